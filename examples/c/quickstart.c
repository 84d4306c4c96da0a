/* The README's C example: take a lock, read its fencing token, release it.
 * cc quickstart.c $(pkg-config --cflags --libs zklock) */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <zklock.h>

int main(void) {
  /* ANCHOR: main */
  const char *hosts = getenv("ZK_CONNECT") ? getenv("ZK_CONNECT") : "127.0.0.1:2181";
  int status = 1;
  zkl_client *client;
  zkl_lock *lock;
  if (zkl_client_connect(hosts, NULL, &client) != ZKL_OK) { /* NULL options: defaults */
    fprintf(stderr, "%s\n", zkl_last_error_message());
    return 1;
  }
  zkl_lock_new(client, "/locks/nightly-report", &lock);
  if (zkl_lock_acquire(lock, 5000) == ZKL_OK) { /* ms; -1 forever, 0 only tries */
    int64_t token;
    zkl_lock_fencing_token(lock, &token);
    printf("holding, fencing token %" PRId64 "\n", token);
    /* ... work ... */
    if (zkl_lock_release(lock) == ZKL_OK) status = 0;
  } else {
    fprintf(stderr, "%s\n", zkl_last_error_message()); /* e.g. ZKL_TIMEOUT */
  }
  zkl_lock_free(lock);
  zkl_client_close(client);
  /* ANCHOR_END: main */
  return status;
}
