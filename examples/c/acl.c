/* Security, ACLs in C: a lock only clients with the same digest credentials may take. */
#include <stdio.h>
#include <stdlib.h>
#include <zklock.h>

#define CHECK(call) do { if ((call) != ZKL_OK) { fprintf(stderr, "%s: %s\n", #call, zkl_last_error_message()); return 1; } } while (0)

int main(void) {
  const char *hosts = getenv("ZK_CONNECT") ? getenv("ZK_CONNECT") : "127.0.0.1:2181";
  zkl_client *client;
  zkl_lock *lock, *read, *write;
  /* ANCHOR: main */
  zkl_options opts;
  zkl_options_init(&opts);
  opts.digest_auth = "app:secret";
  CHECK(zkl_client_connect(hosts, &opts, &client));
  zkl_lock_options lopts;
  zkl_lock_options_init(&lopts);
  lopts.acl = ZKL_ACL_CREATOR_ALL_WORLD_READ; /* or ZKL_ACL_CREATOR_ALL, ZKL_ACL_OPEN */
  CHECK(zkl_lock_new_with(client, "/locks/report-protected", &lopts, &lock));
  CHECK(zkl_rwlock_new_with(client, "/locks/catalog-protected", &lopts, &read, &write));
  /* ANCHOR_END: main */
  CHECK(zkl_lock_acquire(lock, 5000));
  CHECK(zkl_lock_release(lock));
  zkl_lock_free(lock);
  zkl_lock_free(read);
  zkl_lock_free(write);
  zkl_client_close(client);

  /* Without the credentials: refused. */
  zkl_client *stranger;
  zkl_lock *theirs;
  CHECK(zkl_client_connect(hosts, NULL, &stranger));
  CHECK(zkl_lock_new(stranger, "/locks/report-protected", &theirs));
  if (zkl_lock_acquire(theirs, 5000) != ZKL_PERMISSION_DENIED) return 1;
  zkl_lock_free(theirs);
  zkl_client_close(stranger);
  return 0;
}
