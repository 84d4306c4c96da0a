/* A correct program, as a user writes it: connect (by host name, so glibc's resolver runs),
 * lock, acquire, release, free, close. Under memcheck with zklock's shipped suppressions
 * (share/zklock/zklock.supp) it must report nothing, definite or possible. Built with
 * -DUSER_LEAK it also leaks a block of its own, which must still be reported. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zklock.h>

int main(void) {
  const char *connect = getenv("ZK_CONNECT");
  char by_name[256];
  /* "localhost:PORT" for the server scripts/zk started on 127.0.0.1:PORT. */
  const char *port = connect ? strrchr(connect, ':') : NULL;
  snprintf(by_name, sizeof by_name, "localhost%s", port ? port : ":2181");
  zkl_options options;
  zkl_options_init(&options);
  zkl_client *client = NULL;
  zkl_lock *lock = NULL;
  if (zkl_client_connect(by_name, &options, &client) != ZKL_OK) {
    fprintf(stderr, "connect: %s\n", zkl_last_error_message());
    return 2;
  }
  if (zkl_lock_new(client, "/zklock-c-tests/memcheck", &lock) != ZKL_OK || zkl_lock_acquire(lock, 20000) != ZKL_OK ||
      zkl_lock_release(lock) != ZKL_OK) {
    fprintf(stderr, "lock: %s\n", zkl_last_error_message());
    return 3;
  }
  zkl_lock_free(lock);
  zkl_client_close(client);
#ifdef USER_LEAK
  char *mine = malloc(77);
  if (mine) mine[0] = 1;
  mine = NULL;
#endif
  return 0;
}
