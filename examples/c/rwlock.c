/* Recipes, the read/write lock in C: two ordinary zkl_lock handles. */
#include <stdio.h>
#include <stdlib.h>
#include <zklock.h>

#define CHECK(call) do { if ((call) != ZKL_OK) { fprintf(stderr, "%s: %s\n", #call, zkl_last_error_message()); return 1; } } while (0)

int main(void) {
  const char *hosts = getenv("ZK_CONNECT") ? getenv("ZK_CONNECT") : "127.0.0.1:2181";
  zkl_client *client;
  CHECK(zkl_client_connect(hosts, NULL, &client));
  /* ANCHOR: main */
  zkl_lock *read, *write;
  CHECK(zkl_rwlock_new(client, "/locks/catalog", &read, &write));
  CHECK(zkl_lock_acquire(read, -1));  /* shared with other readers */
  CHECK(zkl_lock_release(read));
  CHECK(zkl_lock_acquire(write, -1)); /* alone */
  CHECK(zkl_lock_acquire(read, -1));  /* downgrade: read under the write, */
  CHECK(zkl_lock_release(write));     /* then go on reading */
  CHECK(zkl_lock_release(read));
  CHECK(zkl_lock_acquire(read, -1));
  if (zkl_lock_acquire(write, -1) != ZKL_DEADLOCK) return 1; /* upgrade: refused at once */
  CHECK(zkl_lock_release(read));
  zkl_lock_free(read);
  zkl_lock_free(write);
  /* ANCHOR_END: main */
  zkl_client_close(client);
  return 0;
}
