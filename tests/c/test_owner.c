/* Owners: the calling thread by default; a release from a thread that does not own the lock is
 * ZKL_NOT_OWNER, while the _as functions act for an explicit owner from any thread. */
#include "harness.h"

typedef struct {
  zkl_lock *lock;
  uint64_t owner;  /* for the _as calls */
  int rc;
  uint64_t thread_owner;
} job;

static void *acquire_default(void *arg) {
  job *j = arg;
  j->thread_owner = zkl_thread_owner();
  j->rc = zkl_lock_acquire(j->lock, -1);
  return NULL;
}

static void *release_default(void *arg) {
  job *j = arg;
  j->rc = zkl_lock_release(j->lock);
  return NULL;
}

static void *release_as(void *arg) {
  job *j = arg;
  j->rc = zkl_lock_release_as(j->lock, j->owner);
  return NULL;
}

static void *acquire_as_try(void *arg) {
  job *j = arg;
  j->rc = zkl_lock_acquire_as(j->lock, j->owner, 0);
  return NULL;
}

static void *report_owner(void *arg) {
  ((job *)arg)->thread_owner = zkl_thread_owner();
  return NULL;
}

static int run(void *(*fn)(void *), job *j) {
  pthread_t thread;
  pthread_create(&thread, NULL, fn, j);
  pthread_join(thread, NULL);
  return j->rc;
}

int main(void) {
  zkl_client *client = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "owner");
  zkl_lock *lock = NULL;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "make the lock");

  uint64_t me = zkl_thread_owner();
  job other = {lock, 0, 0, 0};
  run(report_owner, &other);
  CHECK(me >= (UINT64_C(1) << 63) && other.thread_owner >= (UINT64_C(1) << 63), "thread owners: ids at or above 2^63");
  CHECK(me != other.thread_owner && zkl_thread_owner() == me, "thread owners: one per thread, stable");

  /* A thread acquires (as itself); this thread may not release it, but _as with its id may. */
  job acquirer = {lock, 0, -1, 0};
  CHECK(run(acquire_default, &acquirer) == ZKL_OK, "default owner: another thread acquires");
  CHECK_ERR(zkl_lock_release(lock), ZKL_NOT_OWNER, "does not hold", "default owner: release from a non-owner thread");
  bool held = true;
  zkl_lock_is_held(lock, &held);
  CHECK(!held, "default owner: this thread does not hold it");
  CHECK_RC(zkl_lock_is_held_as(lock, acquirer.thread_owner, &held), ZKL_OK, "_as: is_held_as");
  CHECK(held, "_as: the acquiring thread's owner holds it");
  zkl_hold_state state = ZKL_HOLD_NONE;
  int64_t token = 0, sequence = -1;
  CHECK(zkl_lock_state_as(lock, acquirer.thread_owner, &state) == ZKL_OK && state == ZKL_HOLD_HELD, "_as: state_as HELD");
  CHECK(zkl_lock_fencing_token_as(lock, acquirer.thread_owner, &token) == ZKL_OK && token > 0, "_as: fencing_token_as");
  CHECK(zkl_lock_sequence_as(lock, acquirer.thread_owner, &sequence) == ZKL_OK && sequence >= 0, "_as: sequence_as");
  CHECK(h_contenders(lock) == 1, "default owner: the non-owner release changed nothing");
  CHECK_RC(zkl_lock_release_as(lock, acquirer.thread_owner), ZKL_OK, "_as: release with the owner's id from another thread");
  zkl_lock_is_held_as(lock, acquirer.thread_owner, &held);
  CHECK(!held && h_contenders(lock) == 0, "_as: released, node deleted");

  /* An explicit owner id: acquire here, release from another thread. */
  const uint64_t request = 42;
  CHECK_RC(zkl_lock_acquire_as(lock, request, -1), ZKL_OK, "explicit owner: acquire_as");
  zkl_lock_is_held(lock, &held);
  CHECK(!held, "explicit owner: the calling thread itself holds nothing");
  job releaser = {lock, request, -1, 0};
  CHECK(run(release_default, &releaser) == ZKL_NOT_OWNER, "explicit owner: a plain release elsewhere is ZKL_NOT_OWNER");
  job reenter = {lock, request, -1, 0};
  CHECK(run(acquire_as_try, &reenter) == ZKL_OK, "explicit owner: re-enters from another thread (owner, not thread)");
  CHECK(h_contenders(lock) == 1, "explicit owner: re-entry made no node");
  CHECK(run(release_as, &releaser) == ZKL_OK, "explicit owner: release_as from another thread (inner level)");
  CHECK(run(release_as, &releaser) == ZKL_OK, "explicit owner: release_as from another thread (outer level)");
  CHECK(h_contenders(lock) == 0, "explicit owner: node deleted");
  CHECK_ERR(zkl_lock_release_as(lock, request), ZKL_NOT_OWNER, "does not hold", "explicit owner: released twice");

  /* Two explicit owners are two contenders. */
  CHECK_RC(zkl_lock_acquire_as(lock, 1, -1), ZKL_OK, "explicit owners: owner 1 acquires");
  CHECK_ERR(zkl_lock_acquire_as(lock, 2, 0), ZKL_TIMEOUT, "tried once", "explicit owners: owner 2's try times out");
  CHECK_ERR(zkl_lock_release_as(lock, 2), ZKL_NOT_OWNER, "does not hold", "explicit owners: owner 2 cannot release");
  zkl_participants *list = NULL;
  if (zkl_lock_holder(lock, &list) == ZKL_OK && list->count == 1)
    CHECK(list->items[0].owner != NULL && strcmp(list->items[0].owner, "owner:1") == 0, "explicit owners: labelled owner:<id>");
  else
    CHECK(0, "explicit owners: one holder");
  zkl_participants_free(list);
  CHECK_RC(zkl_lock_release_as(lock, 1), ZKL_OK, "explicit owners: owner 1 releases");

  CHECK_ERR(zkl_lock_acquire_as(lock, UINT64_MAX, 0), ZKL_INVALID_ARGUMENT, "neither an explicit id",
            "owner ids: an id at or above 2^63 not from zkl_thread_owner is refused");
  CHECK_ERR(zkl_lock_release_as(lock, UINT64_C(1) << 63), ZKL_INVALID_ARGUMENT, "neither an explicit id",
            "owner ids: 2^63 itself is refused");
  CHECK(h_contenders(lock) == 0, "nothing left behind");

  zkl_lock_free(lock);
  zkl_client_close(client);
  return h_done();
}
