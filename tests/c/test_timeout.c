/* Timeouts and tries: ZKL_TIMEOUT in time, nothing left behind, threads sharing one handle are
 * separate contenders, and a waiter gets the lock as soon as it is released. */
#include "harness.h"

typedef struct {
  zkl_lock *lock;
  int64_t timeout_ms;
  int rc;
  int64_t elapsed_ms;
  bool held_after;
} attempt;

static void *attempt_thread(void *arg) {
  attempt *a = arg;
  int64_t start = h_now_ms();
  a->rc = zkl_lock_acquire(a->lock, a->timeout_ms);
  a->elapsed_ms = h_now_ms() - start;
  zkl_lock_is_held(a->lock, &a->held_after);
  if (a->rc == ZKL_OK) zkl_lock_release(a->lock);
  return NULL;
}

static attempt attempt_on_thread(zkl_lock *lock, int64_t timeout_ms) {
  attempt a = {lock, timeout_ms, -1, 0, false};
  pthread_t thread;
  pthread_create(&thread, NULL, attempt_thread, &a);
  pthread_join(thread, NULL);
  return a;
}

int main(void) {
  zkl_client *a = h_connect(), *b = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "timeout");
  zkl_lock *lock_a = NULL, *lock_b = NULL;
  h_require(zkl_lock_new(a, path, &lock_a) == ZKL_OK && zkl_lock_new(b, path, &lock_b) == ZKL_OK, "make the locks");
  h_require(zkl_lock_acquire(lock_a, -1) == ZKL_OK, "client A acquires");

  int64_t start = h_now_ms();
  CHECK_ERR(zkl_lock_acquire(lock_b, 0), ZKL_TIMEOUT, "tried once", "try: held elsewhere is ZKL_TIMEOUT");
  CHECK(h_now_ms() - start < 2000, "try: returns at once (one round trip)");
  CHECK(h_contenders(lock_a) == 1, "try: leaves no node behind");

  start = h_now_ms();
  CHECK_ERR(zkl_lock_acquire(lock_b, 300), ZKL_TIMEOUT, "not acquired within 300ms", "timeout: ZKL_TIMEOUT");
  int64_t waited = h_now_ms() - start;
  CHECK(waited >= 300, "timeout: waited the whole timeout");
  CHECK(waited < 3000, "timeout: and not much longer");
  CHECK(h_contenders(lock_a) == 1, "timeout: leaves no node behind");
  bool held = true;
  zkl_hold_state state = ZKL_HOLD_HELD;
  zkl_lock_is_held(lock_b, &held);
  zkl_lock_state(lock_b, &state);
  CHECK(!held && state == ZKL_HOLD_NONE, "timeout: nothing held after it");
  CHECK_ERR(zkl_lock_acquire(lock_b, -2), ZKL_INVALID_ARGUMENT, "timeout_ms is -2", "timeout: below -1 is invalid");
  CHECK_ERR(zkl_lock_acquire(lock_b, INT64_MIN), ZKL_INVALID_ARGUMENT, "timeout_ms", "timeout: INT64_MIN is invalid");

  /* Another thread on the same handle is another owner: no reentrancy across threads. */
  attempt other = attempt_on_thread(lock_a, 0);
  CHECK(other.rc == ZKL_TIMEOUT, "threads: another thread's try on the same handle is ZKL_TIMEOUT");
  other = attempt_on_thread(lock_a, 200);
  CHECK(other.rc == ZKL_TIMEOUT && other.elapsed_ms >= 200, "threads: another thread's timeout on the same handle");
  CHECK(!other.held_after, "threads: the other thread holds nothing");
  CHECK(h_contenders(lock_a) == 1, "threads: their attempts left no node behind");

  /* A waiter (forever) on client B gets the lock once A releases. */
  attempt waiter = {lock_b, -1, -1, 0, false};
  pthread_t thread;
  pthread_create(&thread, NULL, attempt_thread, &waiter);
  CHECK(h_wait_contenders(lock_a, 2, 10000), "wait: the waiter queues behind the holder");
  CHECK_RC(zkl_lock_release(lock_a), ZKL_OK, "wait: the holder releases");
  pthread_join(thread, NULL);
  CHECK(waiter.rc == ZKL_OK && waiter.held_after, "wait: the waiter got the lock");

  CHECK_RC(zkl_lock_acquire(lock_b, 0), ZKL_OK, "try: succeeds on a free lock");
  CHECK_RC(zkl_lock_release(lock_b), ZKL_OK, "try: release");
  CHECK(h_contenders(lock_a) == 0, "nothing left behind");

  /* Freeing a handle that holds: every level is released in the background, nothing orphaned. */
  zkl_lock *holding = NULL;
  zkl_lock_new(b, path, &holding);
  h_require(zkl_lock_acquire(holding, -1) == ZKL_OK && zkl_lock_acquire(holding, -1) == ZKL_OK, "client B holds, twice");
  CHECK_RC(zkl_lock_free(holding), ZKL_OK, "free: a handle that holds (reentrantly)");
  CHECK(h_wait_contenders(lock_a, 0, 10000), "free: its hold is released in the background, every level");

  /* Freeing a handle while another thread waits on it: the wait ends at once with
   * ZKL_CANCELLED, its node removed before it returns; the holder is untouched. */
  zkl_lock *shared = NULL;
  zkl_lock_new(b, path, &shared);
  h_require(zkl_lock_acquire(lock_a, -1) == ZKL_OK, "client A holds");
  attempt orphan = {shared, -1, -1, 0, false};
  pthread_create(&thread, NULL, attempt_thread, &orphan);
  CHECK(h_wait_contenders(lock_a, 2, 10000), "free: a thread waits on a handle");
  CHECK_RC(zkl_lock_free(shared), ZKL_OK, "free: the handle is freed while its thread waits");
  pthread_join(thread, NULL);
  CHECK(orphan.rc == ZKL_CANCELLED && !orphan.held_after, "free: the waiting acquire wakes with ZKL_CANCELLED");
  CHECK(h_contenders(lock_a) == 1, "free: its node was gone when it returned; A still holds");

  /* zkl_lock_cancel wakes every wait on the handle, on any thread, and only those. */
  attempt cancelled[2] = {{lock_b, -1, -1, 0, false}, {lock_b, 60000, -1, 0, false}};
  pthread_t threads[2];
  for (int i = 0; i < 2; i++) pthread_create(&threads[i], NULL, attempt_thread, &cancelled[i]);
  CHECK(h_wait_contenders(lock_a, 3, 10000), "cancel: two threads wait on one handle");
  CHECK_RC(zkl_lock_cancel(lock_b), ZKL_OK, "cancel: zkl_lock_cancel");
  for (int i = 0; i < 2; i++) pthread_join(threads[i], NULL);
  CHECK(cancelled[0].rc == ZKL_CANCELLED && cancelled[1].rc == ZKL_CANCELLED, "cancel: both waits end with ZKL_CANCELLED");
  CHECK(h_contenders(lock_a) == 1, "cancel: their nodes were gone when they returned");
  CHECK_RC(zkl_lock_release(lock_a), ZKL_OK, "cancel: client A releases");
  CHECK_RC(zkl_lock_acquire(lock_b, 10000), ZKL_OK, "cancel: a later acquisition on the handle is not affected");
  CHECK_RC(zkl_lock_release(lock_b), ZKL_OK, "cancel: release");
  CHECK_ERR(zkl_lock_cancel(NULL), ZKL_INVALID_ARGUMENT, "lock", "cancel: NULL is invalid");

  /* Closing a client while one of its threads waits in acquire: the wait ends with ZKL_CLOSED. */
  h_require(zkl_lock_acquire(lock_a, -1) == ZKL_OK, "client A holds again");
  attempt closed = {lock_b, -1, -1, 0, false};
  pthread_create(&thread, NULL, attempt_thread, &closed);
  CHECK(h_wait_contenders(lock_a, 2, 10000), "close: a waiter of client B queues");
  CHECK_RC(zkl_client_close(b), ZKL_OK, "close: client B closes while its thread waits");
  pthread_join(thread, NULL);
  CHECK(closed.rc == ZKL_CLOSED && !closed.held_after, "close: the waiting acquire returns ZKL_CLOSED, holding nothing");
  CHECK(h_contenders(lock_a) == 1, "close: the waiter's node is gone with its session");
  CHECK_RC(zkl_lock_release(lock_a), ZKL_OK, "close: client A releases");
  CHECK(h_contenders(lock_a) == 0, "nothing left behind at the end");

  zkl_lock_free(lock_a);
  zkl_lock_free(lock_b);
  zkl_client_close(a);
  return h_done();
}
