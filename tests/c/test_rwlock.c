/* The read/write lock (zkl_rwlock_new): readers share, a writer is alone, a reader that comes
 * after a waiting writer waits behind it, downgrade, upgrade refused with ZKL_DEADLOCK, tries and
 * timeouts that leave no node, a hold lost with its session, a mutex and a read/write lock that
 * refuse to share a path, and the holders list with each participant's mode.
 *
 * With ZKL_SEQUENCE_LIMIT_PATH set (scripts/test-c does, against a server whose snapshot puts
 * that path's child counter at ZKL_SEQUENCE_LIMIT_START, just below 2^31), it runs only the
 * queue-order test there: readers and writers queue across ZooKeeper's 32-bit sequence limit. */
#define _GNU_SOURCE
#include "harness.h"
#include "proxy.h"

#include <signal.h>

/* ------------------------------------------------------------------ contenders on threads */

/* What every contender of a test saw on entering: readers and writers inside at once are
 * counted, so a reader entering beside a writer, or a second writer, is caught as it happens. */
static pthread_mutex_t inside_guard = PTHREAD_MUTEX_INITIALIZER;
static int readers_inside, writers_inside, exclusion_violations;
static int entry_order[64], entries;

static void inside_reset(void) {
  pthread_mutex_lock(&inside_guard);
  readers_inside = writers_inside = exclusion_violations = entries = 0;
  pthread_mutex_unlock(&inside_guard);
}

/* One owner (its own thread) that acquires, says so, holds until told to release, releases. */
typedef struct {
  int index;
  int writer;
  zkl_lock *lock;
  int64_t timeout_ms;
  pthread_t thread;
  h_event entered, go, done;
  int rc, release_rc;
  bool held;
  int64_t fencing_token;
} contender;

static void *contender_main(void *arg) {
  contender *c = arg;
  c->rc = zkl_lock_acquire(c->lock, c->timeout_ms);
  if (c->rc == ZKL_OK) {
    zkl_lock_is_held(c->lock, &c->held);
    zkl_lock_fencing_token(c->lock, &c->fencing_token);
    pthread_mutex_lock(&inside_guard);
    if (writers_inside > 0 || (c->writer && readers_inside > 0)) exclusion_violations++;
    if (c->writer) writers_inside++;
    else readers_inside++;
    if (entries < (int)(sizeof entry_order / sizeof entry_order[0])) entry_order[entries] = c->index;
    entries++;
    pthread_mutex_unlock(&inside_guard);
  }
  h_event_fire(&c->entered);
  if (c->rc != ZKL_OK) return NULL;
  h_event_wait(&c->go, 1, 120000);
  pthread_mutex_lock(&inside_guard);
  if (c->writer) writers_inside--;
  else readers_inside--;
  pthread_mutex_unlock(&inside_guard);
  c->release_rc = zkl_lock_release(c->lock);
  h_event_fire(&c->done);
  return NULL;
}

static void contender_start(contender *c, int index, zkl_lock *lock, int writer, int64_t timeout_ms) {
  *c = (contender){.index = index, .writer = writer, .lock = lock, .timeout_ms = timeout_ms, .rc = -1,
                   .release_rc = -1, .entered = H_EVENT_INIT, .go = H_EVENT_INIT, .done = H_EVENT_INIT};
  pthread_create(&c->thread, NULL, contender_main, c);
}

/* Whether the contender's acquisition returned within timeout_ms (not whether it succeeded). */
static int contender_entered(contender *c, int timeout_ms) { return h_event_wait(&c->entered, 1, timeout_ms); }

/* Tells a contender holding the lock to release it; waits for the release and the thread. */
static int contender_release(contender *c) {
  h_event_fire(&c->go);
  pthread_join(c->thread, NULL);
  return c->release_rc;
}

/* ------------------------------------------------------------------------------ helpers */

static void rwlock_pair(zkl_client *client, const char *path, zkl_lock **read, zkl_lock **write) {
  h_require(zkl_rwlock_new(client, path, read, write) == ZKL_OK, "make a read/write lock");
}

/* The holders of lock: how many, and how many of them have `mode`; -1 on error. */
static long holders_with_mode(zkl_lock *lock, const char *mode, long *with_mode) {
  zkl_participants *list = NULL;
  if (zkl_lock_holders(lock, &list) != ZKL_OK) return -1;
  long count = (long)list->count;
  *with_mode = 0;
  for (size_t i = 0; i < list->count; i++)
    if (list->items[i].mode != NULL && strcmp(list->items[i].mode, mode) == 0) (*with_mode)++;
  zkl_participants_free(list);
  return count;
}

static bool is_held(zkl_lock *lock) {
  bool held = false;
  zkl_lock_is_held(lock, &held);
  return held;
}

/* -------------------------------------------------------------------------------- tests */

static void test_bad_input(zkl_client *client) {
  zkl_lock *read = NULL, *write = NULL;
  CHECK_ERR(zkl_rwlock_new(NULL, "/x", &read, &write), ZKL_INVALID_ARGUMENT, "client is NULL", "bad input: NULL client");
  CHECK_ERR(zkl_rwlock_new(client, NULL, &read, &write), ZKL_INVALID_ARGUMENT, "path is NULL", "bad input: NULL path");
  CHECK_ERR(zkl_rwlock_new(client, "/x", NULL, &write), ZKL_INVALID_ARGUMENT, "read is NULL", "bad input: NULL read");
  CHECK_ERR(zkl_rwlock_new(client, "/x", &read, NULL), ZKL_INVALID_ARGUMENT, "write is NULL", "bad input: NULL write");
  CHECK_ERR(zkl_rwlock_new(client, "/a/", &read, &write), ZKL_INVALID_ARGUMENT, "ends with '/'",
            "bad input: an invalid path is refused as by zkl_lock_new");
  CHECK(read == NULL && write == NULL, "bad input: the out-pointers are left unchanged on failure");
  zkl_participants *list = NULL;
  CHECK_ERR(zkl_lock_holders(NULL, &list), ZKL_INVALID_ARGUMENT, "zkl_lock_holders: lock is NULL",
            "bad input: zkl_lock_holders with a NULL lock");
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-bad");
  rwlock_pair(client, path, &read, &write);
  CHECK_ERR(zkl_lock_holders(read, NULL), ZKL_INVALID_ARGUMENT, "out is NULL", "bad input: zkl_lock_holders with a NULL out");
  CHECK(read != write, "rwlock_new: two distinct handles");
  CHECK_RC(zkl_lock_free(read), ZKL_OK, "rwlock_new: each side is freed on its own (read)");
  CHECK_RC(zkl_lock_acquire(write, 0), ZKL_OK, "rwlock_new: the write side works after the read side is freed");
  CHECK_RC(zkl_lock_release(write), ZKL_OK, "rwlock_new: and releases");
  CHECK_RC(zkl_lock_free(write), ZKL_OK, "rwlock_new: each side is freed on its own (write)");
}

/* Readers on threads of one handle, and of another client, hold together. */
static void test_readers_share(zkl_client *a, zkl_client *b) {
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-share");
  zkl_lock *read_a, *write_a, *read_b, *write_b;
  rwlock_pair(a, path, &read_a, &write_a);
  rwlock_pair(b, path, &read_b, &write_b);
  inside_reset();
  contender first, second, other_client;
  contender_start(&first, 0, read_a, 0, -1);
  CHECK(contender_entered(&first, 20000) && first.rc == ZKL_OK && first.held, "readers: a first thread reads");
  contender_start(&second, 1, read_a, 0, 10000);
  CHECK(contender_entered(&second, 20000) && second.rc == ZKL_OK && second.held,
        "readers: a second thread of the same handle reads while the first does");
  contender_start(&other_client, 2, read_b, 0, 10000);
  CHECK(contender_entered(&other_client, 20000) && other_client.rc == ZKL_OK,
        "readers: a reader of another client reads beside them");
  CHECK(first.fencing_token != second.fencing_token && second.fencing_token != other_client.fencing_token,
        "readers: each reader has its own node and fencing token");
  CHECK(!is_held(read_a), "readers: the main thread, which did not acquire, holds nothing");

  long reading = 0;
  CHECK(holders_with_mode(read_a, "read", &reading) == 3 && reading == 3,
        "holders: all three readers, each with mode \"read\"");
  zkl_participants *list = NULL;
  if (CHECK_RC(zkl_lock_holders(write_a, &list), ZKL_OK, "holders: from the write side too") == ZKL_OK) {
    int distinct = list->count == 3 && strcmp(list->items[0].owner, list->items[1].owner) != 0;
    CHECK(distinct && strncmp(list->items[0].node, "_c_", 3) == 0 && strstr(list->items[0].node, "__READ__") != NULL,
          "holders: Curator's read node names, one per owner");
    zkl_participants_free(list);
  }
  list = NULL;
  if (CHECK_RC(zkl_lock_holder(read_a, &list), ZKL_OK, "holder: a list") == ZKL_OK) {
    CHECK(list->count == 1 && strcmp(list->items[0].mode, "read") == 0, "holder: the first reader only");
    zkl_participants_free(list);
  }
  CHECK(h_contenders(read_b) == 3, "contenders: the three readers");
  CHECK_RC(contender_release(&first), ZKL_OK, "readers: the first releases");
  CHECK_RC(contender_release(&second), ZKL_OK, "readers: the second releases");
  CHECK_RC(contender_release(&other_client), ZKL_OK, "readers: the other client's releases");
  CHECK(exclusion_violations == 0, "readers: no writer was inside with them");
  CHECK(h_contenders(read_a) == 0, "readers: nothing left behind");
  zkl_lock_free(read_a);
  zkl_lock_free(write_a);
  zkl_lock_free(read_b);
  zkl_lock_free(write_b);
}

/* A writer keeps out readers and writers; tries and timeouts that fail leave no node. */
static void test_writer_excludes(zkl_client *a, zkl_client *b) {
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-exclusive");
  zkl_lock *read_a, *write_a, *read_b, *write_b;
  rwlock_pair(a, path, &read_a, &write_a);
  rwlock_pair(b, path, &read_b, &write_b);
  h_require(zkl_lock_acquire(write_a, -1) == ZKL_OK, "a writer acquires");
  long writing = 0;
  CHECK(holders_with_mode(read_b, "write", &writing) == 1 && writing == 1, "holders: the one writer, mode \"write\"");

  int64_t start = h_now_ms();
  CHECK_ERR(zkl_lock_acquire(read_b, 0), ZKL_TIMEOUT, "tried once", "writer holds: a reader's try is ZKL_TIMEOUT");
  CHECK(h_now_ms() - start < 2000, "writer holds: the try returns at once");
  CHECK_ERR(zkl_lock_acquire(write_b, 0), ZKL_TIMEOUT, "tried once", "writer holds: a writer's try is ZKL_TIMEOUT");
  CHECK(h_contenders(read_a) == 1, "writer holds: the tries left no node");
  start = h_now_ms();
  CHECK_ERR(zkl_lock_acquire(read_b, 300), ZKL_TIMEOUT, "not acquired within 300ms",
            "writer holds: a reader's timeout is ZKL_TIMEOUT");
  CHECK(h_now_ms() - start >= 300, "writer holds: the reader waited its whole timeout");
  CHECK_ERR(zkl_lock_acquire(write_b, 300), ZKL_TIMEOUT, "not acquired within 300ms",
            "writer holds: a writer's timeout is ZKL_TIMEOUT");
  CHECK(h_contenders(read_a) == 1, "writer holds: the timeouts left no node");
  CHECK(!is_held(read_b) && !is_held(write_b), "writer holds: the others hold nothing after");
  /* Another thread of the same handles is another owner. */
  contender reader, writer;
  contender_start(&reader, 0, read_a, 0, 0);
  contender_start(&writer, 1, write_a, 1, 0);
  CHECK(contender_entered(&reader, 20000) && reader.rc == ZKL_TIMEOUT,
        "writer holds: another thread's read try on the same client is ZKL_TIMEOUT");
  CHECK(contender_entered(&writer, 20000) && writer.rc == ZKL_TIMEOUT,
        "writer holds: another thread's write try on the same handle is ZKL_TIMEOUT");
  pthread_join(reader.thread, NULL);
  pthread_join(writer.thread, NULL);
  CHECK_RC(zkl_lock_release(write_a), ZKL_OK, "the writer releases");

  h_require(zkl_lock_acquire(read_a, -1) == ZKL_OK, "a reader acquires");
  CHECK_ERR(zkl_lock_acquire(write_b, 0), ZKL_TIMEOUT, "tried once", "reader holds: a writer's try is ZKL_TIMEOUT");
  CHECK_ERR(zkl_lock_acquire(write_b, 300), ZKL_TIMEOUT, "not acquired within 300ms",
            "reader holds: a writer's timeout is ZKL_TIMEOUT");
  CHECK(h_contenders(read_a) == 1, "reader holds: the writer's attempts left no node");
  CHECK_RC(zkl_lock_release(read_a), ZKL_OK, "the reader releases");
  CHECK_RC(zkl_lock_acquire(write_b, 0), ZKL_OK, "free again: a writer's try succeeds");
  CHECK_RC(zkl_lock_release(write_b), ZKL_OK, "and releases");
  CHECK(h_contenders(read_a) == 0, "nothing left behind");
  zkl_lock_free(read_a);
  zkl_lock_free(write_a);
  zkl_lock_free(read_b);
  zkl_lock_free(write_b);
}

/* A reader that comes after a waiting writer waits behind it, though only readers hold. */
static void test_writer_not_starved(zkl_client *a, zkl_client *b) {
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-fair");
  zkl_lock *read_a, *write_a, *read_b, *write_b;
  rwlock_pair(a, path, &read_a, &write_a);
  rwlock_pair(b, path, &read_b, &write_b);
  inside_reset();
  h_require(zkl_lock_acquire(read_a, -1) == ZKL_OK, "a reader acquires");
  contender writer, late_reader;
  contender_start(&writer, 0, write_b, 1, -1);
  CHECK(h_wait_contenders(read_a, 2, 20000), "fairness: a writer queues behind the reader");
  CHECK_ERR(zkl_lock_acquire(read_b, 0), ZKL_TIMEOUT, "tried once",
            "fairness: a reader's try after the waiting writer is ZKL_TIMEOUT, though only a reader holds");
  CHECK(h_contenders(read_a) == 2, "fairness: that try left no node");
  contender_start(&late_reader, 1, read_b, 0, -1);
  CHECK(h_wait_contenders(read_a, 3, 20000), "fairness: a late reader queues behind the writer");
  long reading = 0;
  CHECK(holders_with_mode(read_a, "read", &reading) == 1 && reading == 1, "fairness: the first reader alone holds");
  CHECK_RC(zkl_lock_release(read_a), ZKL_OK, "fairness: the first reader releases");
  CHECK(contender_entered(&writer, 20000) && writer.rc == ZKL_OK, "fairness: the writer gets the lock next");
  long writing = 0;
  CHECK(holders_with_mode(read_a, "write", &writing) == 1 && writing == 1, "fairness: the writer alone holds");
  CHECK_RC(contender_release(&writer), ZKL_OK, "fairness: the writer releases");
  CHECK(contender_entered(&late_reader, 20000) && late_reader.rc == ZKL_OK, "fairness: then the late reader reads");
  CHECK_RC(contender_release(&late_reader), ZKL_OK, "fairness: the late reader releases");
  CHECK(exclusion_violations == 0 && entries == 2 && entry_order[0] == 0 && entry_order[1] == 1,
        "fairness: writer, then late reader, never together");
  CHECK(h_contenders(read_a) == 0, "fairness: nothing left behind");
  zkl_lock_free(read_a);
  zkl_lock_free(write_a);
  zkl_lock_free(read_b);
  zkl_lock_free(write_b);
}

/* The write holder takes the read side (a read node of its own that carries the write node's
 * sequence, Curator 5.5+'s form), releases the write side and goes on reading; a writer already
 * waiting gets in only once the read is released. */
static void test_downgrade(zkl_client *a, zkl_client *b) {
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-downgrade");
  zkl_lock *read_a, *write_a, *read_b, *write_b;
  rwlock_pair(a, path, &read_a, &write_a);
  rwlock_pair(b, path, &read_b, &write_b);
  inside_reset();
  h_require(zkl_lock_acquire(write_a, -1) == ZKL_OK, "downgrade: the thread acquires the write side");
  int64_t write_token = 0, read_token = -1;
  zkl_lock_fencing_token(write_a, &write_token);
  CHECK_RC(zkl_lock_acquire(read_a, 0), ZKL_OK, "downgrade: the write holder acquires the read side (a try suffices)");
  CHECK(h_contenders(read_a) == 2, "downgrade: the read has a node of its own");
  zkl_lock_fencing_token(read_a, &read_token);
  CHECK(read_token == write_token, "downgrade: the read hold's fencing token is the write hold's");
  int64_t write_sequence = -1, read_sequence = -2;
  zkl_lock_sequence(write_a, &write_sequence);
  zkl_lock_sequence(read_a, &read_sequence);
  CHECK(read_sequence == write_sequence, "downgrade: the read node carries the write node's sequence");
  contender writer;
  contender_start(&writer, 0, write_b, 1, -1);
  CHECK(h_wait_contenders(read_a, 3, 20000), "downgrade: a writer of another client waits");
  CHECK_RC(zkl_lock_release(write_a), ZKL_OK, "downgrade: the thread releases the write side");
  CHECK(!is_held(write_a), "downgrade: the write side is no longer held");
  zkl_hold_state state = ZKL_HOLD_NONE;
  zkl_lock_state(read_a, &state);
  CHECK(is_held(read_a) && state == ZKL_HOLD_HELD, "downgrade: the thread goes on reading");
  CHECK(h_contenders(read_a) == 2, "downgrade: the read node stays, ahead of the waiting writer");
  zkl_participants *list = NULL;
  if (CHECK_RC(zkl_lock_holders(read_a, &list), ZKL_OK, "downgrade: the holders are listed") == ZKL_OK) {
    CHECK(list->count == 1 && list->items[0].sequence == write_sequence && strcmp(list->items[0].mode, "read") == 0,
          "downgrade: the holder is the downgraded read");
    zkl_participants_free(list);
  }
  /* The writer's node is behind the read node, which took the write node's place. */
  CHECK(!contender_entered(&writer, 300), "downgrade: the waiting writer has not got in");
  CHECK_RC(zkl_lock_acquire(read_a, 0), ZKL_OK, "downgrade: the reader re-enters (counts up)");
  CHECK_RC(zkl_lock_release(read_a), ZKL_OK, "downgrade: and counts down");
  CHECK(is_held(read_a) && h_contenders(read_a) == 2, "downgrade: still reading after the nested release");
  CHECK_RC(zkl_lock_release(read_a), ZKL_OK, "downgrade: the thread releases the read side");
  CHECK(contender_entered(&writer, 20000) && writer.rc == ZKL_OK, "downgrade: then the waiting writer gets in");
  CHECK(writer.fencing_token > write_token, "downgrade: with a higher fencing token");
  CHECK_RC(contender_release(&writer), ZKL_OK, "downgrade: the writer releases");
  CHECK(exclusion_violations == 0, "downgrade: no one inside beside the writer");
  CHECK(h_contenders(read_a) == 0, "downgrade: nothing left behind");
  zkl_lock_free(read_a);
  zkl_lock_free(write_a);
  zkl_lock_free(read_b);
  zkl_lock_free(write_b);
}

/* A reader asking for the write side would wait for itself: refused at once. */
static void test_upgrade(zkl_client *a) {
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-upgrade");
  zkl_lock *read, *write;
  rwlock_pair(a, path, &read, &write);
  h_require(zkl_lock_acquire(read, -1) == ZKL_OK, "upgrade: the thread reads");
  int64_t start = h_now_ms();
  CHECK_ERR(zkl_lock_acquire(write, -1), ZKL_DEADLOCK, "release the read lock first",
            "upgrade: acquiring the write side while reading is ZKL_DEADLOCK, waiting forever or not");
  CHECK(h_now_ms() - start < 1000, "upgrade: refused at once");
  CHECK_ERR(zkl_lock_acquire(write, 0), ZKL_DEADLOCK, "would wait for itself", "upgrade: a try too");
  CHECK(h_contenders(read) == 1, "upgrade: no write node was created");
  CHECK(is_held(read) && !is_held(write), "upgrade: the read is still held, the write is not");
  CHECK_ERR(zkl_lock_release(write), ZKL_NOT_OWNER, "does not hold this lock",
            "upgrade: nothing to release on the write side");
  /* Another owner is not refused: it waits for the reader like any writer. */
  CHECK_ERR(zkl_lock_acquire_as(write, 42, 0), ZKL_TIMEOUT, "tried once", "upgrade: another owner's write try times out");
  CHECK_RC(zkl_lock_release(read), ZKL_OK, "upgrade: the read is released");
  CHECK_RC(zkl_lock_acquire(write, 0), ZKL_OK, "upgrade: then the write side is acquired");
  CHECK_RC(zkl_lock_release(write), ZKL_OK, "upgrade: and released");
  CHECK(h_contenders(read) == 0, "upgrade: nothing left behind");
  zkl_lock_free(read);
  zkl_lock_free(write);
}

/* A mutex on a path with read/write nodes, and the reverse: refused, naming the conflict. */
static void test_recipe_conflict(zkl_client *a, zkl_client *b) {
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-conflict");
  zkl_lock *read, *write, *mutex;
  rwlock_pair(a, path, &read, &write);
  h_require(zkl_lock_acquire(read, -1) == ZKL_OK, "conflict: a reader holds");
  CHECK_RC(zkl_lock_new(b, path, &mutex), ZKL_OK, "conflict: zkl_lock_new on that path (no traffic yet)");
  CHECK_ERR(zkl_lock_acquire(mutex, -1), ZKL_INVALID_ARGUMENT, "a mutex cannot use this path: it holds read/write lock nodes (read node _c_",
            "conflict: a mutex's acquire on read/write nodes is ZKL_INVALID_ARGUMENT, naming the node");
  CHECK_ERR(zkl_lock_acquire(mutex, 0), ZKL_INVALID_ARGUMENT, "read/write lock nodes", "conflict: a mutex's try too");
  CHECK(h_contenders(read) == 1, "conflict: the mutex created no node");
  zkl_participants *list = NULL;
  if (CHECK_RC(zkl_lock_contenders(mutex, &list), ZKL_OK, "conflict: the mutex lists the contenders") == ZKL_OK) {
    CHECK(list->count == 1 && strcmp(list->items[0].mode, "read") == 0, "conflict: the mutex lists the reader, mode \"read\"");
    zkl_participants_free(list);
  }
  CHECK_RC(zkl_lock_release(read), ZKL_OK, "conflict: the reader releases");
  zkl_lock_free(read);
  zkl_lock_free(write);
  zkl_lock_free(mutex);

  h_unique_path(path, sizeof path, "rwlock-conflict-mutex");
  h_require(zkl_lock_new(a, path, &mutex) == ZKL_OK && zkl_lock_acquire(mutex, -1) == ZKL_OK, "conflict: a mutex holds");
  long exclusive = 0;
  CHECK(holders_with_mode(mutex, "exclusive", &exclusive) == 1 && exclusive == 1,
        "holders of a mutex: its one holder, mode \"exclusive\"");
  rwlock_pair(b, path, &read, &write);
  CHECK_ERR(zkl_lock_acquire(write, -1), ZKL_INVALID_ARGUMENT, "a read/write lock cannot use this path: it holds mutex nodes",
            "conflict: a writer's acquire on mutex nodes is ZKL_INVALID_ARGUMENT");
  CHECK_ERR(zkl_lock_acquire(read, 1000), ZKL_INVALID_ARGUMENT, "(exclusive node _c_",
            "conflict: a reader's too, naming the node");
  CHECK(h_contenders(mutex) == 1, "conflict: the read/write lock created no node");
  CHECK_RC(zkl_lock_release(mutex), ZKL_OK, "conflict: the mutex releases");
  zkl_lock_free(read);
  zkl_lock_free(write);
  zkl_lock_free(mutex);
}

static h_event lost_event = H_EVENT_INIT;
static int lost_calls;
static zkl_lock *lost_lock;

static void on_lost(void *userdata, zkl_lock *lock, uint64_t owner, zkl_lost_reason reason) {
  (void)userdata, (void)owner, (void)reason;
  lost_lock = lock;
  __atomic_add_fetch(&lost_calls, 1, __ATOMIC_SEQ_CST);
  h_event_fire(&lost_event);
}

/* Readers' holds lost with their session: not held, tokens refused, nodes gone. */
static void test_lost(void) {
  proxy p;
  proxy_start(&p);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.session_timeout_ms = 4000; /* as test_lost.c: quick expiry, yet no missed heartbeat */
  zkl_client *client = proxy_connect(&p, &opts);
  char path[200];
  h_unique_path(path, sizeof path, "rwlock-lost");
  zkl_lock *read, *write;
  rwlock_pair(client, path, &read, &write);
  zkl_lock_set_lost_callback(read, on_lost, NULL);
  h_require(zkl_lock_acquire(read, -1) == ZKL_OK && zkl_lock_acquire_as(read, 7, -1) == ZKL_OK,
            "lost: two readers hold through the proxy");
  CHECK(proxy_command(&p, "stall"), "lost: the proxy stalls the connection");
  CHECK(h_event_wait(&lost_event, 2, 30000) && lost_lock == read, "lost: the callback reports both readers' holds");
  bool held = true, held_as = true;
  zkl_lock_is_held(read, &held);
  zkl_lock_is_held_as(read, 7, &held_as);
  CHECK(!held && !held_as, "lost: zkl_lock_is_held is false for both");
  zkl_hold_state state = ZKL_HOLD_HELD;
  zkl_lock_state(read, &state);
  CHECK(state == ZKL_HOLD_LOST, "lost: the hold is LOST");
  int64_t token = 0;
  CHECK_ERR(zkl_lock_fencing_token(read, &token), ZKL_LOCK_LOST, "hold is lost", "lost: its fencing token is refused");
  CHECK_ERR(zkl_lock_acquire(read, 0), ZKL_LOCK_LOST, "release it", "lost: re-entering is refused");
  CHECK_ERR(zkl_lock_release(read), ZKL_LOCK_LOST, "nothing was deleted", "lost: the release reports the loss");
  CHECK_ERR(zkl_lock_release_as(read, 7), ZKL_LOCK_LOST, "nothing was deleted", "lost: so does the other reader's");

  /* The server expired the session: its read nodes are gone, so a writer gets in. */
  zkl_client *other = h_connect();
  zkl_lock *other_read, *other_write;
  rwlock_pair(other, path, &other_read, &other_write);
  CHECK_RC(zkl_lock_acquire(other_write, 20000), ZKL_OK, "lost: the nodes expired; a writer of another client gets in");
  CHECK_RC(zkl_lock_release(other_write), ZKL_OK, "lost: that writer releases");
  CHECK(lost_calls == 2, "lost: the callback was called once per hold");
  zkl_lock_free(read);
  zkl_lock_free(write);
  zkl_lock_free(other_read);
  zkl_lock_free(other_write);
  CHECK(proxy_command(&p, "pass"), "lost: the proxy passes traffic again");
  zkl_client_close(client);
  zkl_client_close(other);
  proxy_stop(&p);
}

/* Readers and writers queued one by one behind a writer hold in batches in queue order: each
 * run of readers together, each writer alone. */
#define QUEUED 12
static const int queued_writer[QUEUED] = {0, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0, 0};
/* The batch each contender holds in: readers 0-1, writer 2, readers 3-4, writer 5, ... */
static const int batch_of[QUEUED] = {0, 0, 1, 2, 2, 3, 4, 5, 6, 7, 7, 7};
#define BATCHES 8

static void test_queue_order(zkl_client **clients, int client_count, const char *path, int64_t sequence_limit_start) {
  const char *where = sequence_limit_start > 0 ? "across the sequence limit" : "queue order";
  char name[160];
  zkl_lock *reads[4], *writes[4];
  for (int i = 0; i < client_count; i++) rwlock_pair(clients[i], path, &reads[i], &writes[i]);
  inside_reset();
  h_require(zkl_lock_acquire(writes[0], -1) == ZKL_OK, "a gate writer holds");
  if (sequence_limit_start > 0) {
    int64_t sequence = 0;
    zkl_lock_sequence(writes[0], &sequence);
    snprintf(name, sizeof name, "%s: the snapshot put the counter just below the limit (gate at %" PRId64 ")", where,
             sequence);
    CHECK(sequence == sequence_limit_start, name);
  }
  static contender queued[QUEUED];
  for (int i = 0; i < QUEUED; i++) {
    int c = i % client_count;
    contender_start(&queued[i], i, queued_writer[i] ? writes[c] : reads[c], queued_writer[i], -1);
    /* One at a time, so the queue is in this order. */
    if (!h_wait_contenders(reads[0], i + 2, 20000)) {
      snprintf(name, sizeof name, "%s: contender %d queues", where, i);
      CHECK(0, name);
    }
  }
  zkl_participants *list = NULL;
  snprintf(name, sizeof name, "%s: the contenders are listed", where);
  if (CHECK_RC(zkl_lock_contenders(reads[0], &list), ZKL_OK, name) == ZKL_OK) {
    int in_order = list->count == QUEUED + 1 && strcmp(list->items[0].mode, "write") == 0, crossed = 0;
    for (size_t i = 1; i < list->count && in_order; i++) {
      in_order = strcmp(list->items[i].mode, queued_writer[i - 1] ? "write" : "read") == 0 &&
                 list->items[i].fencing_token > list->items[i - 1].fencing_token;
      if (list->items[i].sequence < 0 || (list->items[i].sequence == INT32_MAX && list->items[i - 1].sequence == INT32_MAX))
        crossed = 1;
    }
    snprintf(name, sizeof name, "%s: contenders listed in arrival order, with their modes", where);
    CHECK(in_order, name);
    if (sequence_limit_start > 0) {
      snprintf(name, sizeof name, "%s: the queue crosses the limit (repeated maximum or negative sequences)", where);
      CHECK(crossed, name);
    }
    zkl_participants_free(list);
  }
  snprintf(name, sizeof name, "%s: the gate writer releases", where);
  CHECK_RC(zkl_lock_release(writes[0]), ZKL_OK, name);
  for (int batch = 0; batch < BATCHES; batch++) {
    int members = 0, all_in = 1;
    for (int i = 0; i < QUEUED; i++) {
      if (batch_of[i] != batch) continue;
      members++;
      all_in = all_in && contender_entered(&queued[i], 20000) && queued[i].rc == ZKL_OK;
    }
    int writer_batch = 0;
    for (int i = 0; i < QUEUED; i++)
      if (batch_of[i] == batch) writer_batch = queued_writer[i];
    long with_mode = 0, holding = holders_with_mode(reads[0], writer_batch ? "write" : "read", &with_mode);
    snprintf(name, sizeof name, "%s: batch %d (%d %s) holds, and only it", where, batch, members,
             writer_batch ? "writer" : "reader(s)");
    CHECK(all_in && holding == members && with_mode == members, name);
    for (int i = 0; i < QUEUED; i++)
      if (batch_of[i] == batch) contender_release(&queued[i]);
  }
  int batches_in_order = entries == QUEUED;
  for (int i = 1; i < entries && i < QUEUED; i++)
    batches_in_order = batches_in_order && batch_of[entry_order[i]] >= batch_of[entry_order[i - 1]];
  snprintf(name, sizeof name, "%s: every contender held once, batch after batch", where);
  CHECK(batches_in_order, name);
  snprintf(name, sizeof name, "%s: never a writer beside anyone", where);
  CHECK(exclusion_violations == 0, name);
  snprintf(name, sizeof name, "%s: nothing left behind", where);
  CHECK(h_contenders(reads[0]) == 0, name);
  for (int i = 0; i < client_count; i++) {
    zkl_lock_free(reads[i]);
    zkl_lock_free(writes[i]);
  }
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  zkl_client *a = h_connect(), *b = h_connect();
  zkl_client *clients[] = {a, b};
  const char *limit_path = getenv("ZKL_SEQUENCE_LIMIT_PATH");
  if (limit_path != NULL && *limit_path != '\0') {
    const char *start = getenv("ZKL_SEQUENCE_LIMIT_START");
    h_require(start != NULL && atoll(start) > 0, "ZKL_SEQUENCE_LIMIT_START is set");
    test_queue_order(clients, 2, limit_path, atoll(start));
  } else {
    test_bad_input(a);
    test_readers_share(a, b);
    test_writer_excludes(a, b);
    test_writer_not_starved(a, b);
    test_downgrade(a, b);
    test_upgrade(a);
    test_recipe_conflict(a, b);
    char path[200];
    h_unique_path(path, sizeof path, "rwlock-order");
    test_queue_order(clients, 2, path, 0);
    test_lost();
  }
  zkl_client_close(a);
  zkl_client_close(b);
  return h_done();
}
