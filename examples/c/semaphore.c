/* Recipes, the semaphore and the multi-lock in C. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <zklock.h>

#define CHECK(call) do { if ((call) != ZKL_OK) { fprintf(stderr, "%s: %s\n", #call, zkl_last_error_message()); return 1; } } while (0)

int main(void) {
  const char *hosts = getenv("ZK_CONNECT") ? getenv("ZK_CONNECT") : "127.0.0.1:2181";
  zkl_client *client;
  CHECK(zkl_client_connect(hosts, NULL, &client));
  /* ANCHOR: semaphore */
  zkl_semaphore *sem;
  zkl_leases *leases;
  CHECK(zkl_semaphore_new(client, "/jobs/nightly", 3, &sem)); /* at most 3 leases at once */
  if (zkl_semaphore_acquire(sem, 2, 30000, &leases) == ZKL_OK) { /* 2 leases: both, or neither */
    int64_t token;
    zkl_leases_fencing_token(leases, 0, &token); /* each lease: token, node, state */
    printf("lease with fencing token %" PRId64 "\n", token);
    CHECK(zkl_leases_release(leases)); /* from any thread; not reentrant */
    zkl_leases_free(leases);
  }
  /* ANCHOR_END: semaphore */
  /* ANCHOR: multi */
  zkl_lock *from, *to;
  CHECK(zkl_lock_new(client, "/accounts/alice", &from));
  CHECK(zkl_lock_new(client, "/accounts/bob", &to));
  zkl_multi_member members[] = {{.lock = from}, {.lock = to}, {.semaphore = sem, .leases = 1}};
  zkl_multi_lock *multi;
  zkl_multi_guard *guard;
  CHECK(zkl_multi_lock_new(members, 3, &multi)); /* taken sorted by path */
  if (zkl_multi_lock_acquire(multi, 10000, &guard) == ZKL_OK) { /* all or none, one deadline */
    /* ... move the money ... */
    CHECK(zkl_multi_guard_release(guard)); /* in reverse order */
    zkl_multi_guard_free(guard);
  }
  zkl_multi_lock_free(multi);
  zkl_lock_free(from);
  zkl_lock_free(to);
  zkl_semaphore_free(sem);
  /* ANCHOR_END: multi */
  zkl_client_close(client);
  return 0;
}
