/* The semaphore (zkl_semaphore_*, zkl_leases_*) and the multi-lock (zkl_multi_lock_*,
 * zkl_multi_guard_*): bad input refused before any traffic, never more than max leases held at
 * once by several processes, FIFO among acquirers across processes, n leases all or nothing (a
 * timeout or a cancel leaves no lease node and no mutex node), the max changed at run time
 * through the shared count, leases and a multi-lock lost with their session (a real expiry,
 * through the fault proxy), and the multi-lock in both argument orders from two processes
 * without deadlock. The two exclusion checks across processes are tested themselves: each must
 * fail a run with a holder planted beside the honest ones (a process inside with no lease or lock).
 *
 * The other processes are this program again (posix_spawn of argv[0] with "child ..."): each
 * with its own client and session, and, under valgrind, run natively. */
#define _GNU_SOURCE
#include "harness.h"

#include "proxy.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>

static const char *self; /* argv[0]: the children run it */

/* ------------------------------------------------------------------ what processes share */

/* A file mapped by every process of a test: how many hold now, the most at once, and how many
 * entries were made (and the violations the children saw); for the contention gate, how many
 * are ready, how many wait now, and how many entries were made while another waited; and how
 * many honest children have finished (a planted one holds until they all have). */
typedef struct {
  atomic_int inside, peak, entries, violations;
  atomic_int ready, waiting, contended;
  atomic_int finished;
} shared_counts;

static shared_counts *shared_open(const char *file, int create) {
  int fd = open(file, create ? O_RDWR | O_CREAT | O_TRUNC : O_RDWR, 0600);
  if (fd < 0) return NULL;
  if (create && ftruncate(fd, sizeof(shared_counts)) != 0) return NULL;
  void *map = mmap(NULL, sizeof(shared_counts), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return map == MAP_FAILED ? NULL : map;
}

/* One more holder (n of them): the peak follows. */
static void shared_enter(shared_counts *s, int n) {
  int now = atomic_fetch_add(&s->inside, n) + n;
  int peak = atomic_load(&s->peak);
  while (now > peak && !atomic_compare_exchange_weak(&s->peak, &peak, now)) {
  }
  atomic_fetch_add(&s->entries, 1);
}

static pid_t spawn_child(char **argv) {
  pid_t pid = -1;
  if (posix_spawn(&pid, self, NULL, NULL, argv, environ) != 0) return -1;
  return pid;
}

static int exited_cleanly(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 0;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) printf("# child %d: wait status %#x\n", (int)pid, (unsigned)status);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* ------------------------------------------------------------------------------ helpers */

/* The semaphore's listing: lease nodes, how many of them wait, acquirers at the mutex. */
static int sem_counts(zkl_semaphore *sem, long *leases, long *waiting, long *queue) {
  zkl_semaphore_listing *list = NULL;
  if (zkl_semaphore_participants(sem, &list) != ZKL_OK) return 0;
  *leases = (long)list->leases->count;
  *waiting = (long)list->waiting_leases;
  *queue = (long)list->queue->count;
  zkl_semaphore_listing_free(list);
  return 1;
}

/* Polls (every 5 ms) until the semaphore has `queue` acquirers at its mutex and `waiting` lease
 * nodes waiting, or timeout_ms passed: another process's arrival is only observable this way. */
static int sem_wait_queue(zkl_semaphore *sem, long queue, long waiting, int timeout_ms) {
  int64_t deadline = h_now_ms() + timeout_ms;
  long l = -1, w = -1, q = -1;
  do {
    if (sem_counts(sem, &l, &w, &q) && q == queue && w == waiting) return 1;
    h_sleep_ms(5);
  } while (h_now_ms() < deadline);
  printf("# semaphore: %ld leases, %ld waiting, %ld at the mutex\n", l, w, q);
  return 0;
}

/* Whether the semaphore has exactly `leases` lease nodes, none waiting, nobody at the mutex;
 * says what it has if not (unless quiet). */
static int sem_has(zkl_semaphore *sem, long leases, int quiet) {
  long l = -1, w = -1, q = -1;
  int ok = sem_counts(sem, &l, &w, &q) && l == leases && w == 0 && q == 0;
  if (!ok && !quiet) printf("# semaphore: %ld leases, %ld waiting, %ld at the mutex (expected %ld, 0, 0)\n", l, w, q, leases);
  return ok;
}
static int sem_is(zkl_semaphore *sem, long leases) { return sem_has(sem, leases, 0); }

static zkl_semaphore *sem_make(zkl_client *client, const char *path, int max) {
  zkl_semaphore *sem = NULL;
  h_require(zkl_semaphore_new(client, path, max, &sem) == ZKL_OK, "make a semaphore");
  return sem;
}

/* An acquisition on its own thread: started, then joined with its result. */
typedef struct {
  zkl_semaphore *sem;
  zkl_multi_lock *multi;
  int n;
  int64_t timeout_ms;
  int rc;
  zkl_leases *leases;
  zkl_multi_guard *guard;
  const char *name; /* the FIFO test's: reported on `report_fd` with the token, then released */
  int report_fd;
  char message[256]; /* the last error message, on the acquiring thread */
  pthread_t thread;
} acquirer;

static void *acquirer_main(void *arg) {
  acquirer *a = arg;
  if (a->multi != NULL) {
    a->rc = zkl_multi_lock_acquire(a->multi, a->timeout_ms, &a->guard);
    snprintf(a->message, sizeof a->message, "%s", zkl_last_error_message());
    return NULL;
  }
  a->rc = zkl_semaphore_acquire(a->sem, a->n, a->timeout_ms, &a->leases);
  snprintf(a->message, sizeof a->message, "%s", zkl_last_error_message());
  if (a->rc == ZKL_OK && a->name != NULL) {
    int64_t token = 0;
    zkl_leases_fencing_token(a->leases, 0, &token);
    char line[64];
    int len = snprintf(line, sizeof line, "%s %" PRId64 "\n", a->name, token);
    if (write(a->report_fd, line, (size_t)len) != len) a->rc = -1;
    else a->rc = zkl_leases_release(a->leases);
    zkl_leases_free(a->leases);
    a->leases = NULL;
  }
  return NULL;
}

static void acquirer_start(acquirer *a) { pthread_create(&a->thread, NULL, acquirer_main, a); }
static int acquirer_join(acquirer *a) {
  pthread_join(a->thread, NULL);
  return a->rc;
}

/* ------------------------------------------------------------------------- the children */

/* "plant FILE HONEST": a test of the tests' exclusion checks. Enters as a holder would, with no
 * lease or lock at all, then says it is ready and stays inside until the HONEST children have
 * all finished (at most 60 s): every entry of theirs is beside it, an overlap the check must see. */
static int child_plant(char **argv) {
  shared_counts *s = shared_open(argv[0], 0);
  int honest = atoi(argv[1]);
  if (s == NULL) return 10;
  shared_enter(s, 1);
  atomic_fetch_add(&s->ready, 1);
  int64_t until = h_now_ms() + 60000;
  while (atomic_load(&s->finished) < honest && h_now_ms() < until) h_sleep_ms(2);
  atomic_fetch_sub(&s->inside, 1);
  return 0;
}

/* "load PATH MAX ROUNDS FILE": ROUNDS times, one lease, held until MAX hold (or 500 ms). */
static int child_load(char **argv) {
  const char *path = argv[0];
  int max = atoi(argv[1]), rounds = atoi(argv[2]);
  shared_counts *s = shared_open(argv[3], 0);
  zkl_client *client = NULL;
  zkl_semaphore *sem = NULL;
  if (s == NULL || zkl_client_connect(h_zk_connect(), NULL, &client) != ZKL_OK ||
      zkl_semaphore_new(client, path, max, &sem) != ZKL_OK)
    return 10;
  int failed = 0;
  for (int round = 0; round < rounds && !failed; round++) {
    zkl_leases *leases = NULL;
    if (zkl_semaphore_acquire(sem, 1, 30000, &leases) != ZKL_OK) {
      printf("# load child: acquire: %s\n", zkl_last_error_message());
      failed = 11;
      break;
    }
    shared_enter(s, 1);
    /* Held until the others fill the semaphore, so that the test sees max reached. */
    int64_t until = h_now_ms() + 500;
    while (atomic_load(&s->inside) < max && h_now_ms() < until) h_sleep_ms(2);
    atomic_fetch_sub(&s->inside, 1);
    if (zkl_leases_release(leases) != ZKL_OK) failed = 12;
    zkl_leases_free(leases);
  }
  zkl_semaphore_free(sem);
  zkl_client_close(client);
  atomic_fetch_add(&s->finished, 1);
  return failed;
}

/* "fifo PATH NAME FD": one lease of a max-1 semaphore; reports "NAME TOKEN" on FD, releases. */
static int child_fifo(char **argv) {
  zkl_client *client = NULL;
  zkl_semaphore *sem = NULL;
  if (zkl_client_connect(h_zk_connect(), NULL, &client) != ZKL_OK || zkl_semaphore_new(client, argv[0], 1, &sem) != ZKL_OK)
    return 10;
  acquirer a = {.sem = sem, .n = 1, .timeout_ms = 60000, .name = argv[1], .report_fd = atoi(argv[2])};
  acquirer_main(&a);
  zkl_semaphore_free(sem);
  zkl_client_close(client);
  return a.rc == ZKL_OK ? 0 : 11;
}

/* "multi A B ROUNDS FILE": a multi-lock over the mutexes at A and B, given in that order, taken
 * and released ROUNDS times; never beside another holder. */
static int child_multi(char **argv) {
  int rounds = atoi(argv[2]);
  shared_counts *s = shared_open(argv[3], 0);
  zkl_client *client = NULL;
  zkl_lock *a = NULL, *b = NULL;
  zkl_multi_lock *multi = NULL;
  if (s == NULL || zkl_client_connect(h_zk_connect(), NULL, &client) != ZKL_OK || zkl_lock_new(client, argv[0], &a) != ZKL_OK ||
      zkl_lock_new(client, argv[1], &b) != ZKL_OK)
    return 10;
  zkl_multi_member members[] = {{.lock = a}, {.lock = b}};
  if (zkl_multi_lock_new(members, 2, &multi) != ZKL_OK) return 11;
  /* The gate: both processes connected before either takes its first round, so that they contend. */
  atomic_fetch_add(&s->ready, 1);
  int64_t gate_deadline = h_now_ms() + 20000;
  while (atomic_load(&s->ready) < 2 && h_now_ms() < gate_deadline) h_sleep_ms(1);
  int failed = 0;
  for (int round = 0; round < rounds && !failed; round++) {
    zkl_multi_guard *guard = NULL;
    atomic_fetch_add(&s->waiting, 1);
    if (zkl_multi_lock_acquire(multi, 20000, &guard) != ZKL_OK) {
      printf("# multi child (%s first): acquire: %s\n", argv[0], zkl_last_error_message());
      failed = 12;
      break;
    }
    atomic_fetch_sub(&s->waiting, 1);
    if (atomic_fetch_add(&s->inside, 1) != 0) atomic_fetch_add(&s->violations, 1);
    atomic_fetch_add(&s->entries, 1);
    if (atomic_load(&s->waiting) > 0) atomic_fetch_add(&s->contended, 1);
    h_sleep_ms(5); /* the hold spans real time, so that an overlap would be seen */
    atomic_fetch_sub(&s->inside, 1);
    if (zkl_multi_guard_release(guard) != ZKL_OK) failed = 13;
    zkl_multi_guard_free(guard);
  }
  zkl_multi_lock_free(multi);
  zkl_lock_free(a);
  zkl_lock_free(b);
  zkl_client_close(client);
  atomic_fetch_add(&s->finished, 1);
  return failed;
}

/* ------------------------------------------------------------------------------ the tests */

static void test_bad_input(zkl_client *client, const char *base) {
  char path[256];
  snprintf(path, sizeof path, "%s/bad", base);
  zkl_semaphore *sem = NULL;
  CHECK_ERR(zkl_semaphore_new(client, path, 0, &sem), ZKL_INVALID_ARGUMENT, "at least 1, not 0", "bad input: max 0");
  CHECK_ERR(zkl_semaphore_new(client, path, -2, &sem), ZKL_INVALID_ARGUMENT, "max_leases is -2", "bad input: max -2");
  CHECK_ERR(zkl_semaphore_new(NULL, path, 1, &sem), ZKL_INVALID_ARGUMENT, "client is NULL", "bad input: NULL client");
  CHECK_ERR(zkl_semaphore_new(client, "rel", 1, &sem), ZKL_INVALID_ARGUMENT, "path", "bad input: a relative path");
  zkl_semaphore_options opts;
  zkl_semaphore_options_init(&opts);
  opts.max_leases = 2;
  opts.shared_count_path = "/count";
  CHECK_ERR(zkl_semaphore_new_with(client, path, &opts, &sem), ZKL_INVALID_ARGUMENT, "both set",
            "bad input: a fixed max and a shared count");
  opts.max_leases = 0;
  CHECK_ERR(zkl_semaphore_new_with(client, path, &opts, &sem), ZKL_INVALID_ARGUMENT, "seed must be from 1",
            "bad input: a shared count's seed of 0");
  opts.shared_count_path = "count";
  opts.shared_count_seed = 1;
  CHECK_ERR(zkl_semaphore_new_with(client, path, &opts, &sem), ZKL_INVALID_ARGUMENT, "shared count path",
            "bad input: a shared count path that is not a path");
  CHECK(sem == NULL, "bad input: *out is left unchanged on failure");

  sem = sem_make(client, path, 2);
  zkl_leases *leases = NULL;
  CHECK_ERR(zkl_semaphore_acquire(sem, 0, 0, &leases), ZKL_INVALID_ARGUMENT, "not 0", "bad input: n 0");
  CHECK_ERR(zkl_semaphore_acquire(sem, -1, 0, &leases), ZKL_INVALID_ARGUMENT, "n is -1", "bad input: n -1");
  CHECK_ERR(zkl_semaphore_acquire(sem, 3, -1, &leases), ZKL_INVALID_ARGUMENT, "more than the semaphore's max of 2",
            "bad input: n above the max");
  CHECK_ERR(zkl_semaphore_acquire(sem, 1, -5, &leases), ZKL_INVALID_ARGUMENT, "timeout_ms is -5", "bad input: timeout -5");
  CHECK(leases == NULL, "bad input: no leases handle");
  CHECK(sem_is(sem, 0), "bad input: nothing was made");
  CHECK_ERR(zkl_semaphore_set_shared_count(sem, 3), ZKL_INVALID_ARGUMENT, "fixed", "bad input: set the count of a fixed max");
  CHECK_ERR(zkl_leases_release((zkl_leases *)sem), ZKL_INVALID_ARGUMENT, "is a zkl_semaphore, not a zkl_leases",
            "bad input: a semaphore passed as leases");

  /* A lock on a semaphore's path, and a semaphore on a lock's path: refused, nothing made. */
  h_require(zkl_semaphore_acquire(sem, 1, 10000, &leases) == ZKL_OK, "bad input: a lease makes the semaphore's nodes");
  zkl_lock *lock = NULL;
  zkl_lock_new(client, path, &lock);
  CHECK_ERR(zkl_lock_acquire(lock, 0), ZKL_INVALID_ARGUMENT, "semaphore", "bad input: a lock on a semaphore's path");
  zkl_leases_release(leases);
  zkl_leases_free(leases);
  char lock_path[256];
  snprintf(lock_path, sizeof lock_path, "%s/a-lock", base);
  zkl_lock *held = NULL;
  zkl_lock_new(client, lock_path, &held);
  h_require(zkl_lock_acquire(held, 10000) == ZKL_OK, "bad input: a lock is held");
  zkl_semaphore *on_lock = sem_make(client, lock_path, 2);
  leases = NULL;
  CHECK_ERR(zkl_semaphore_acquire(on_lock, 1, 0, &leases), ZKL_INVALID_ARGUMENT, "holds lock nodes",
            "bad input: a semaphore on a lock's path");
  CHECK(h_contenders(held) == 1, "bad input: the refused semaphore made no node");
  zkl_lock_release(held);
  zkl_lock_free(held);
  zkl_lock_free(lock);
  zkl_semaphore_free(on_lock);
  zkl_semaphore_free(sem);
}

static void test_leases(zkl_client *client, zkl_client *other, const char *base) {
  char path[256];
  snprintf(path, sizeof path, "%s/leases", base);
  zkl_semaphore *sem = sem_make(client, path, 2), *others = sem_make(other, path, 2);
  zkl_leases *first = NULL, *second = NULL, *third = NULL;
  CHECK_RC(zkl_semaphore_acquire(sem, 1, 10000, &first), ZKL_OK, "leases: the first lease");
  CHECK_RC(zkl_semaphore_acquire(others, 1, 10000, &second), ZKL_OK, "leases: a second, by another client");
  CHECK_RC(zkl_semaphore_acquire(sem, 1, 0, &third), ZKL_TIMEOUT, "leases: a third does not fit (try)");
  size_t count = 0;
  int64_t token1 = 0, token2 = 0;
  const char *name = NULL;
  zkl_hold_state state = ZKL_HOLD_NONE;
  zkl_leases_count(first, &count);
  CHECK(count == 1, "leases: count 1");
  CHECK(zkl_leases_fencing_token(first, 0, &token1) == ZKL_OK && zkl_leases_fencing_token(second, 0, &token2) == ZKL_OK &&
            token2 > token1 && token1 > 0,
        "leases: fencing tokens rise");
  CHECK(zkl_leases_node_name(first, 0, &name) == ZKL_OK && strncmp(name, "_c_", 3) == 0 && strstr(name, "-lease-") != NULL,
        "leases: the node is Curator's _c_<uuid>-lease-<seq>");
  CHECK(zkl_leases_state(first, 0, &state) == ZKL_OK && state == ZKL_HOLD_HELD, "leases: HELD");
  CHECK_ERR(zkl_leases_state(first, 1, &state), ZKL_INVALID_ARGUMENT, "out of range", "leases: index out of range");
  int64_t lost_index = 99;
  CHECK(zkl_leases_combined_state(first, &state) == ZKL_OK && state == ZKL_HOLD_HELD, "leases: HELD together");
  CHECK(zkl_leases_lost_lease(first, &lost_index, NULL) == ZKL_OK && lost_index == -1, "leases: none lost");
  CHECK_ERR(zkl_leases_lost_lease(first, NULL, NULL), ZKL_INVALID_ARGUMENT, "index is NULL", "leases: lost_lease needs index");
  zkl_semaphore_listing *list = NULL;
  CHECK_RC(zkl_semaphore_participants(sem, &list), ZKL_OK, "participants: listed");
  if (list != NULL) {
    CHECK(list->leases->count == 2 && list->waiting_leases == 0 && list->queue->count == 0 && list->max_leases == 2,
          "participants: 2 leases held, none waiting, max 2");
    CHECK(list->leases->items[0].lang != NULL && strcmp(list->leases->items[0].lang, "c") == 0 &&
              strcmp(list->leases->items[0].node, name) == 0,
          "participants: the first lease is ours, with its identity");
  }
  zkl_semaphore_listing_free(list);
  CHECK_RC(zkl_leases_release(first), ZKL_OK, "leases: release");
  CHECK_RC(zkl_leases_release(first), ZKL_NOT_OWNER, "leases: a second release is refused");
  CHECK_RC(zkl_leases_fencing_token(first, 0, &token1), ZKL_NOT_OWNER, "leases: no token once released");
  CHECK(zkl_leases_state(first, 0, &state) == ZKL_OK && state == ZKL_HOLD_NONE, "leases: NONE once released");
  CHECK(zkl_leases_combined_state(first, &state) == ZKL_OK && state == ZKL_HOLD_NONE, "leases: NONE together once released");
  zkl_leases_free(first);
  CHECK_ERR(zkl_leases_free(first), ZKL_INVALID_ARGUMENT, "not a live zkl_leases", "leases: a second free is refused");
  /* Freed while held: released in the background. */
  zkl_leases_free(second);
  int64_t deadline = h_now_ms() + 10000;
  while (!sem_has(sem, 0, 1) && h_now_ms() < deadline) h_sleep_ms(10);
  CHECK(sem_is(sem, 0), "leases: freeing held leases releases them");
  zkl_semaphore_free(others);
  zkl_semaphore_free(sem);
}

/* n leases: all or nothing. A timeout and a cancel leave no lease node and no mutex node. */
static void test_all_or_nothing(zkl_client *client, zkl_client *other, const char *base) {
  char path[256];
  snprintf(path, sizeof path, "%s/all-or-nothing", base);
  zkl_semaphore *sem = sem_make(client, path, 3), *others = sem_make(other, path, 3);
  zkl_leases *two = NULL, *more = NULL;
  h_require(zkl_semaphore_acquire(others, 2, 10000, &two) == ZKL_OK, "n: another client holds 2 of 3");
  int64_t started = h_now_ms();
  CHECK_RC(zkl_semaphore_acquire(sem, 2, 300, &more), ZKL_TIMEOUT, "n: 2 more time out");
  CHECK(h_now_ms() - started < 5000, "n: within about the timeout");
  CHECK(more == NULL && sem_is(sem, 2), "n: the timeout left no lease node and no mutex node");
  CHECK_RC(zkl_semaphore_acquire(sem, 2, 0, &more), ZKL_TIMEOUT, "n: 2 more, tried once");
  CHECK(sem_is(sem, 2), "n: the try left nothing");

  acquirer waiter = {.sem = sem, .n = 2, .timeout_ms = -1};
  acquirer_start(&waiter);
  CHECK(sem_wait_queue(sem, 1, 2, 10000), "cancel: a waiter for 2 holds the mutex with its 2 lease nodes");
  CHECK_RC(zkl_semaphore_cancel(sem), ZKL_OK, "cancel: zkl_semaphore_cancel");
  CHECK_RC(acquirer_join(&waiter), ZKL_CANCELLED, "cancel: the waiter returns ZKL_CANCELLED");
  CHECK(sem_is(sem, 2), "cancel: its lease nodes and mutex node are gone");
  zkl_semaphore *freed = sem_make(client, path, 3);
  acquirer woken = {.sem = freed, .n = 2, .timeout_ms = -1};
  acquirer_start(&woken);
  CHECK(sem_wait_queue(sem, 1, 2, 10000), "free: a waiter for 2 on another handle");
  CHECK_RC(zkl_semaphore_free(freed), ZKL_OK, "free: zkl_semaphore_free while it waits");
  CHECK(acquirer_join(&woken) == ZKL_CANCELLED && strstr(woken.message, "cancelled by zkl_semaphore_free") != NULL,
        "free: the waiter returns ZKL_CANCELLED, saying why");
  CHECK(sem_is(sem, 2), "free: its lease nodes and mutex node are gone");

  acquirer after = {.sem = sem, .n = 2, .timeout_ms = 20000};
  acquirer_start(&after);
  CHECK(sem_wait_queue(sem, 1, 2, 10000), "n: a waiter for 2 queues");
  CHECK_RC(zkl_leases_release(two), ZKL_OK, "n: the other client releases its 2");
  CHECK_RC(acquirer_join(&after), ZKL_OK, "n: the waiter gets both");
  size_t count = 0;
  zkl_leases_count(after.leases, &count);
  CHECK(count == 2 && sem_is(sem, 2), "n: 2 leases, nobody waiting");
  zkl_leases_free(after.leases);
  zkl_leases_free(two);
  zkl_semaphore_free(others);
  zkl_semaphore_free(sem);
}

/* The max from a shared count, changed at run time: a waiter is admitted when it grows. */
static void test_shared_count(zkl_client *client, zkl_client *other, const char *base) {
  char path[256], count_path[256];
  snprintf(path, sizeof path, "%s/shared", base);
  snprintf(count_path, sizeof count_path, "%s/shared-max", base);
  zkl_semaphore_options opts;
  zkl_semaphore_options_init(&opts);
  opts.shared_count_path = count_path;
  opts.shared_count_seed = 1;
  opts.identifier = "shared-count-test";
  zkl_semaphore *sem = NULL, *others = NULL;
  h_require(zkl_semaphore_new_with(client, path, &opts, &sem) == ZKL_OK && zkl_semaphore_new_with(other, path, &opts, &others) == ZKL_OK,
            "shared count: make the semaphores");
  int64_t max = 0;
  CHECK(zkl_semaphore_max_leases(sem, &max) == ZKL_OK && max == 1, "shared count: made with its seed, 1");
  zkl_leases *held = NULL, *three = NULL;
  CHECK_ERR(zkl_semaphore_acquire(sem, 2, 0, &three), ZKL_INVALID_ARGUMENT, "more than the shared count's max of 1",
            "shared count: n above the count is refused");
  h_require(zkl_semaphore_acquire(sem, 1, 10000, &held) == ZKL_OK, "shared count: the one lease is held");
  acquirer waiter = {.sem = others, .n = 1, .timeout_ms = 20000};
  acquirer_start(&waiter);
  CHECK(sem_wait_queue(sem, 1, 1, 10000), "shared count: another client waits for room");
  CHECK_RC(zkl_semaphore_set_shared_count(sem, 2), ZKL_OK, "shared count: set to 2");
  CHECK_RC(acquirer_join(&waiter), ZKL_OK, "shared count: the waiter is admitted");
  CHECK(zkl_semaphore_max_leases(others, &max) == ZKL_OK && max == 2, "shared count: both read 2");
  zkl_semaphore_listing *list = NULL;
  if (CHECK_RC(zkl_semaphore_participants(sem, &list), ZKL_OK, "shared count: the participants are listed") == ZKL_OK) {
    CHECK(list->leases->count == 2 && list->max_leases == 2 && list->leases->items[0].identifier != NULL &&
              strcmp(list->leases->items[0].identifier, "shared-count-test") == 0,
          "shared count: 2 leases held, max 2, with the identifier");
    zkl_semaphore_listing_free(list);
  }
  zkl_leases_release(waiter.leases);
  zkl_leases_free(waiter.leases);
  zkl_leases_release(held);
  zkl_leases_free(held);
  zkl_semaphore_free(others);
  zkl_semaphore_free(sem);
}

/* A shared file, mapped, for the processes of one run: its name into FILE. */
static shared_counts *shared_new(char *file) {
  int fd = mkstemp(file);
  h_require(fd >= 0, "a shared file");
  close(fd);
  shared_counts *s = shared_open(file, 1);
  h_require(s != NULL, "map the shared file");
  return s;
}

/* Spawns PLANTED planted children (child_plant) in FILE, each inside before this returns, as the
 * first holders of a run whose HONEST children come next. */
static int spawn_planted(const char *file, shared_counts *s, int planted, int honest, pid_t *pids) {
  char count[8];
  snprintf(count, sizeof count, "%d", honest);
  for (int i = 0; i < planted; i++) {
    char *argv[] = {(char *)self, "child", "plant", (char *)file, count, NULL};
    pids[i] = spawn_child(argv);
    if (pids[i] < 0) return 0;
  }
  int64_t until = h_now_ms() + 20000;
  while (atomic_load(&s->ready) < planted && h_now_ms() < until) h_sleep_ms(1);
  return atomic_load(&s->ready) == planted;
}

enum { LOAD_PROCESSES = 4, LOAD_MAX = 2, LOAD_ROUNDS = 3 };

/* A run of the load children: LOAD_PROCESSES of them, each with its own session, LOAD_ROUNDS
 * leases each of a max-LOAD_MAX semaphore at PATH; PLANTED more first (a test of the check).
 * Whether every child exited cleanly; the counts stay in S. */
static int load_run(const char *path, const char *file, shared_counts *s, int planted) {
  char max[8], rounds[8];
  snprintf(max, sizeof max, "%d", LOAD_MAX);
  snprintf(rounds, sizeof rounds, "%d", LOAD_ROUNDS);
  pid_t pids[LOAD_PROCESSES + 2];
  int clean = spawn_planted(file, s, planted, LOAD_PROCESSES, pids + LOAD_PROCESSES);
  for (int i = 0; i < LOAD_PROCESSES; i++) {
    char *argv[] = {(char *)self, "child", "load", (char *)path, max, rounds, (char *)file, NULL};
    pids[i] = spawn_child(argv);
  }
  for (int i = 0; i < LOAD_PROCESSES + planted; i++) clean &= exited_cleanly(pids[i]);
  return clean;
}

/* The load run's exclusion check: never more than max leases held at once. */
static int load_excluded(const shared_counts *s) { return atomic_load(&s->peak) <= LOAD_MAX; }

/* Several processes, each with its own session, never more than max leases at once, and max
 * reached. */
static void test_processes(zkl_client *client, const char *base) {
  char path[256], file[] = "/tmp/zklock-c-semaphore-XXXXXX";
  snprintf(path, sizeof path, "%s/load", base);
  shared_counts *s = shared_new(file);
  int clean = load_run(path, file, s, 0);
  CHECK(clean, "processes: every process acquired and released its leases");
  printf("# processes: %d entries, at most %d holding at once\n", atomic_load(&s->entries), atomic_load(&s->peak));
  CHECK(atomic_load(&s->entries) == LOAD_PROCESSES * LOAD_ROUNDS, "processes: every round held a lease");
  CHECK(load_excluded(s), "processes: never more than max leases held at once");
  CHECK(atomic_load(&s->peak) == LOAD_MAX, "processes: max was reached");
  zkl_semaphore *sem = sem_make(client, path, LOAD_MAX);
  CHECK(sem_is(sem, 0), "processes: nothing left behind");
  zkl_semaphore_free(sem);
  munmap(s, sizeof *s);
  unlink(file);

  /* A test of that check: two planted holders (no lease) inside throughout the same run, so each
   * honest lease makes max + 1 at once; the check must fail the run. */
  char planted_file[] = "/tmp/zklock-c-semaphore-XXXXXX";
  s = shared_new(planted_file);
  clean = load_run(path, planted_file, s, 2);
  printf("# processes, planted: %d entries, at most %d holding at once\n", atomic_load(&s->entries), atomic_load(&s->peak));
  CHECK(clean, "processes, planted: every process ended cleanly");
  CHECK(!load_excluded(s), "processes, planted: the exclusion check fails a run with two holders planted");
  sem = sem_make(client, path, LOAD_MAX);
  CHECK(sem_is(sem, 0), "processes, planted: nothing left behind");
  zkl_semaphore_free(sem);
  munmap(s, sizeof *s);
  unlink(planted_file);
}

/* FIFO: waiters from this process and two others, queued alternately, get their lease in the
 * order they queued at the mutex, with rising fencing tokens. */
static void test_fifo(zkl_client *client, const char *base) {
  enum { WAITERS = 4 };
  char path[256];
  snprintf(path, sizeof path, "%s/fifo", base);
  zkl_semaphore *sem = sem_make(client, path, 1);
  zkl_leases *held = NULL;
  h_require(zkl_semaphore_acquire(sem, 1, 10000, &held) == ZKL_OK, "fifo: the one lease is held");
  int order[2];
  h_require(pipe(order) == 0, "a pipe");
  char fd[8];
  snprintf(fd, sizeof fd, "%d", order[1]);
  const char *queue[WAITERS] = {"c1", "p1", "c2", "p2"};
  acquirer parents[2];
  pid_t children[2];
  int p = 0, c = 0;
  for (int i = 0; i < WAITERS; i++) {
    if (queue[i][0] == 'c') {
      char *argv[] = {(char *)self, "child", "fifo", path, (char *)queue[i], fd, NULL};
      children[c++] = spawn_child(argv);
    } else {
      parents[p] = (acquirer){.sem = sem, .n = 1, .timeout_ms = 60000, .name = queue[i], .report_fd = order[1]};
      acquirer_start(&parents[p++]);
    }
    char what[64];
    snprintf(what, sizeof what, "fifo: %s queues (%d at the mutex)", queue[i], i + 1);
    CHECK(sem_wait_queue(sem, i + 1, 1, 15000), what);
  }
  CHECK_RC(zkl_leases_release(held), ZKL_OK, "fifo: the holder releases");
  zkl_leases_free(held);
  FILE *in = fdopen(order[0], "r");
  char line[64];
  int got = 0, in_order = 1, tokens_rise = 1;
  int64_t last = 0;
  while (got < WAITERS && fgets(line, sizeof line, in) != NULL) {
    char name[8];
    int64_t token = 0;
    if (sscanf(line, "%7s %" SCNd64, name, &token) != 2) break;
    printf("# fifo: %s got the lease (fencing token %" PRId64 ")\n", name, token);
    in_order &= strcmp(name, queue[got]) == 0;
    tokens_rise &= token > last;
    last = token;
    got++;
  }
  CHECK(got == WAITERS && in_order, "fifo: in the order they queued, across three processes");
  CHECK(tokens_rise, "fifo: fencing tokens rise in that order");
  CHECK(acquirer_join(&parents[0]) == ZKL_OK && acquirer_join(&parents[1]) == ZKL_OK, "fifo: this process's waiters released");
  CHECK(exited_cleanly(children[0]) && exited_cleanly(children[1]), "fifo: the other processes' waiters released");
  fclose(in);
  close(order[1]);
  CHECK(sem_is(sem, 0), "fifo: nothing left behind");
  zkl_semaphore_free(sem);
}

static void test_multi_lock(zkl_client *client, zkl_client *other, const char *base) {
  char a[256], b[256], c[256];
  snprintf(a, sizeof a, "%s/multi-a", base);
  snprintf(b, sizeof b, "%s/multi-b", base);
  snprintf(c, sizeof c, "%s/multi-c", base);
  zkl_semaphore *pool = sem_make(client, a, 2);
  zkl_lock *mutex = NULL, *read = NULL, *write = NULL;
  h_require(zkl_lock_new(client, b, &mutex) == ZKL_OK && zkl_rwlock_new(client, c, &read, &write) == ZKL_OK, "multi: make the members");

  zkl_multi_lock *multi = NULL;
  zkl_multi_member none[] = {{0}};
  CHECK_ERR(zkl_multi_lock_new(none, 0, &multi), ZKL_INVALID_ARGUMENT, "count is 0", "multi bad input: no member");
  CHECK_ERR(zkl_multi_lock_new(NULL, 1, &multi), ZKL_INVALID_ARGUMENT, "members is NULL", "multi bad input: NULL members");
  CHECK_ERR(zkl_multi_lock_new(none, 1, &multi), ZKL_INVALID_ARGUMENT, "neither", "multi bad input: an empty member");
  zkl_multi_member both[] = {{.lock = mutex, .semaphore = pool, .leases = 1}};
  CHECK_ERR(zkl_multi_lock_new(both, 1, &multi), ZKL_INVALID_ARGUMENT, "both a lock and a semaphore", "multi bad input: both");
  zkl_multi_member zero[] = {{.semaphore = pool, .leases = 0}};
  CHECK_ERR(zkl_multi_lock_new(zero, 1, &multi), ZKL_INVALID_ARGUMENT, "at least 1 lease", "multi bad input: 0 leases");
  zkl_multi_member too_many[] = {{.semaphore = pool, .leases = 3}};
  CHECK_ERR(zkl_multi_lock_new(too_many, 1, &multi), ZKL_INVALID_ARGUMENT, "more than the semaphore's max of 2",
            "multi bad input: more leases than the max");
  zkl_multi_member lock_leases[] = {{.lock = mutex, .leases = 1}};
  CHECK_ERR(zkl_multi_lock_new(lock_leases, 1, &multi), ZKL_INVALID_ARGUMENT, "leases are for a semaphore member",
            "multi bad input: leases for a lock");
  zkl_multi_member twice[] = {{.lock = mutex}, {.lock = mutex}};
  CHECK_ERR(zkl_multi_lock_new(twice, 2, &multi), ZKL_INVALID_ARGUMENT, "both on this path", "multi bad input: one lock twice");
  zkl_multi_member sides[] = {{.lock = read}, {.lock = write}};
  CHECK_ERR(zkl_multi_lock_new(sides, 2, &multi), ZKL_INVALID_ARGUMENT, "both on this path",
            "multi bad input: both sides of a read/write lock");
  CHECK(multi == NULL, "multi bad input: *out is left unchanged");

  /* Given as [write c, mutex b, 2 leases of a]; taken as a, b, c. */
  zkl_multi_member members[] = {{.lock = write}, {.lock = mutex}, {.semaphore = pool, .leases = 2}};
  h_require(zkl_multi_lock_new(members, 3, &multi) == ZKL_OK, "multi: make it");
  size_t count = 0;
  const char *path0 = NULL, *path1 = NULL, *path2 = NULL;
  zkl_member_kind kind0 = 0, kind1 = 0, kind2 = 0;
  zkl_multi_lock_member_count(multi, &count);
  CHECK(count == 3 && zkl_multi_lock_member(multi, 0, &path0, &kind0) == ZKL_OK &&
            zkl_multi_lock_member(multi, 1, &path1, &kind1) == ZKL_OK && zkl_multi_lock_member(multi, 2, &path2, &kind2) == ZKL_OK &&
            strcmp(path0, a) == 0 && kind0 == ZKL_MEMBER_LEASES && strcmp(path1, b) == 0 && kind1 == ZKL_MEMBER_MUTEX &&
            strcmp(path2, c) == 0 && kind2 == ZKL_MEMBER_WRITE,
        "multi: members in canonical order (by path), with their kinds");

  zkl_multi_guard *guard = NULL;
  CHECK_RC(zkl_multi_lock_acquire(multi, 10000, &guard), ZKL_OK, "multi: acquire");
  zkl_hold_state state = ZKL_HOLD_NONE;
  int64_t lease0 = 0, lease1 = 0, token_b = 0, token_c = 0, lost = 0;
  CHECK(zkl_multi_guard_state(guard, &state) == ZKL_OK && state == ZKL_HOLD_HELD, "multi: HELD");
  CHECK(zkl_multi_guard_fencing_token(guard, 0, 0, &lease0) == ZKL_OK && zkl_multi_guard_fencing_token(guard, 0, 1, &lease1) == ZKL_OK &&
            zkl_multi_guard_fencing_token(guard, 1, 0, &token_b) == ZKL_OK && zkl_multi_guard_fencing_token(guard, 2, 0, &token_c) == ZKL_OK &&
            lease0 > 0 && lease1 > lease0 && token_b > lease1 && token_c > token_b,
        "multi: a token per lease and per lock, rising in the order taken");
  CHECK_ERR(zkl_multi_guard_fencing_token(guard, 1, 1, &lost), ZKL_INVALID_ARGUMENT, "out of range",
            "multi: a lock member has one token");
  CHECK(zkl_multi_guard_lost_member(guard, &lost, NULL) == ZKL_OK && lost == -1, "multi: no member lost");
  bool held = false;
  zkl_lock_is_held(mutex, &held);
  CHECK(held, "multi: the mutex is held by the calling thread");
  zkl_lock *others_b = NULL;
  zkl_semaphore *others_pool = sem_make(other, a, 2);
  zkl_leases *leases = NULL;
  zkl_lock_new(other, b, &others_b);
  CHECK_RC(zkl_lock_acquire(others_b, 0), ZKL_TIMEOUT, "multi: another client finds the mutex held");
  CHECK_RC(zkl_semaphore_acquire(others_pool, 1, 0, &leases), ZKL_TIMEOUT, "multi: and no lease free");
  CHECK_RC(zkl_multi_guard_release(guard), ZKL_OK, "multi: release");
  CHECK_RC(zkl_multi_guard_release(guard), ZKL_NOT_OWNER, "multi: a second release is refused");
  CHECK(zkl_multi_guard_state(guard, &state) == ZKL_OK && state == ZKL_HOLD_NONE, "multi: NONE once released");
  zkl_multi_guard_free(guard);
  CHECK(sem_is(pool, 0) && h_contenders(mutex) == 0 && h_contenders(write) == 0, "multi: every member released");

  /* All or nothing: with c held by another client, a timeout and a cancel leave nothing. */
  zkl_lock *others_read = NULL, *others_write = NULL;
  zkl_rwlock_new(other, c, &others_read, &others_write);
  h_require(zkl_lock_acquire(others_write, 10000) == ZKL_OK, "multi: another client holds c");
  guard = NULL;
  CHECK_RC(zkl_multi_lock_acquire(multi, 300, &guard), ZKL_TIMEOUT, "multi: times out on c");
  CHECK(strstr(zkl_last_error_message(), c) != NULL && strstr(zkl_last_error_message(), "write member") != NULL,
        "multi: the timeout names the member it waited for (c's write side), not the first");
  CHECK(guard == NULL && sem_is(pool, 0) && h_contenders(mutex) == 0 && h_contenders(write) == 1,
        "multi: the timeout released a and b, and left no node at c");
  acquirer waiter = {.multi = multi, .timeout_ms = -1};
  acquirer_start(&waiter);
  CHECK(h_wait_contenders(write, 2, 10000), "multi: a waiter queues at c");
  CHECK_RC(zkl_multi_lock_cancel(multi), ZKL_OK, "multi: zkl_multi_lock_cancel");
  CHECK_RC(acquirer_join(&waiter), ZKL_CANCELLED, "multi: the waiter returns ZKL_CANCELLED");
  CHECK(sem_is(pool, 0) && h_contenders(mutex) == 0 && h_contenders(write) == 1, "multi: the cancel left nothing");
  zkl_multi_lock *freed = NULL;
  h_require(zkl_multi_lock_new(members, 3, &freed) == ZKL_OK, "multi: a second multi-lock");
  acquirer woken = {.multi = freed, .timeout_ms = -1};
  acquirer_start(&woken);
  CHECK(h_wait_contenders(write, 2, 10000), "multi: a waiter of another multi-lock queues at c");
  CHECK_RC(zkl_multi_lock_free(freed), ZKL_OK, "multi: zkl_multi_lock_free while it waits");
  CHECK(acquirer_join(&woken) == ZKL_CANCELLED && strstr(woken.message, "cancelled by zkl_multi_lock_free") != NULL,
        "multi: that waiter returns ZKL_CANCELLED, saying why");
  CHECK(sem_is(pool, 0) && h_contenders(mutex) == 0 && h_contenders(write) == 1, "multi: the free left nothing");
  zkl_lock_release(others_write);

  /* Freed while held: released in the background. */
  h_require(zkl_multi_lock_acquire(multi, 10000, &guard) == ZKL_OK, "multi: acquired again");
  zkl_multi_guard_free(guard);
  int64_t deadline = h_now_ms() + 10000;
  while (!(sem_has(pool, 0, 1) && h_contenders(write) == 0) && h_now_ms() < deadline) h_sleep_ms(10);
  CHECK(sem_is(pool, 0) && h_contenders(mutex) == 0 && h_contenders(write) == 0, "multi: freeing a guard releases it");

  zkl_multi_lock_free(multi);
  zkl_lock_free(others_b);
  zkl_lock_free(others_read);
  zkl_lock_free(others_write);
  zkl_semaphore_free(others_pool);
  zkl_lock_free(mutex);
  zkl_lock_free(read);
  zkl_lock_free(write);
  zkl_semaphore_free(pool);
}

/* A run of the multi-lock children: [a, b] and [b, a] from two processes, 10 rounds each; with
 * PLANT, the second process is a planted holder instead (no lock at all, inside first and
 * throughout: a test of the check). Whether every child exited cleanly; the counts stay in S. */
static int multi_run(const char *base, const char *file, shared_counts *s, int plant) {
  char a[256], b[256];
  snprintf(a, sizeof a, "%s/orders-a", base);
  snprintf(b, sizeof b, "%s/orders-b", base);
  pid_t second = -1;
  int clean = plant ? spawn_planted(file, s, 1, 1, &second) : 1;
  char *ab[] = {(char *)self, "child", "multi", a, b, "10", (char *)file, NULL};
  char *ba[] = {(char *)self, "child", "multi", b, a, "10", (char *)file, NULL};
  pid_t first = spawn_child(ab);
  if (!plant) second = spawn_child(ba);
  clean &= exited_cleanly(first);
  clean &= exited_cleanly(second);
  return clean;
}

/* The multi-lock run's exclusion check: no entry beside another holder. */
static int multi_excluded(const shared_counts *s) { return atomic_load(&s->violations) == 0; }

/* The multi-lock in both argument orders, from two processes, repeatedly: no deadlock. */
static void test_multi_processes(const char *base) {
  char file[] = "/tmp/zklock-c-multi-XXXXXX";
  shared_counts *s = shared_new(file);
  int clean = multi_run(base, file, s, 0);
  CHECK(clean, "multi processes: [a, b] and [b, a], 10 rounds each, never timed out (no deadlock)");
  CHECK(atomic_load(&s->entries) == 20 && multi_excluded(s), "multi processes: 20 holds, one at a time");
  CHECK(atomic_load(&s->contended) > 0, "multi processes: the two contended (one entered while the other waited)");
  munmap(s, sizeof *s);
  unlink(file);

  /* A test of that check: a planted holder (no lock) inside throughout the run of [a, b]; the
   * check must fail the run. */
  char planted_file[] = "/tmp/zklock-c-multi-XXXXXX";
  s = shared_new(planted_file);
  clean = multi_run(base, planted_file, s, 1);
  printf("# multi processes, planted: %d entries, %d beside another holder\n", atomic_load(&s->entries),
         atomic_load(&s->violations));
  CHECK(clean, "multi processes, planted: every process ended cleanly");
  CHECK(!multi_excluded(s), "multi processes, planted: the exclusion check fails a run with a holder planted");
  munmap(s, sizeof *s);
  unlink(planted_file);
}

/* Leases and a multi-lock lost with their session: the client talks through the fault proxy,
 * which stalls; the client gives the session up, the server expires it for real. */
typedef struct {
  h_event event;
  size_t index;
  zkl_lost_reason reason;
  void *handle;
} lost_record;

static void on_lease_lost(void *userdata, zkl_leases *leases, size_t index, zkl_lost_reason reason) {
  lost_record *r = userdata;
  r->index = index;
  r->reason = reason;
  r->handle = leases;
  h_event_fire(&r->event);
}

static void on_multi_lost(void *userdata, zkl_multi_guard *guard, size_t member, zkl_lost_reason reason) {
  lost_record *r = userdata;
  r->index = member;
  r->reason = reason;
  r->handle = guard;
  h_event_fire(&r->event);
}

static void test_lost(zkl_client *direct, const char *base) {
  char path[256], lock_path[256];
  snprintf(path, sizeof path, "%s/lost", base);
  snprintf(lock_path, sizeof lock_path, "%s/lost-lock", base);
  proxy p;
  proxy_start(&p);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.session_timeout_ms = 4000; /* as test_lost.c: quick expiry, yet no missed heartbeat */
  zkl_client *client = proxy_connect(&p, &opts);
  zkl_semaphore *sem = sem_make(client, path, 3);
  zkl_lock *lock = NULL;
  zkl_lock_new(client, lock_path, &lock);
  lost_record lease_lost = {.event = H_EVENT_INIT}, multi_lost = {.event = H_EVENT_INIT};
  zkl_semaphore_set_lost_callback(sem, on_lease_lost, &lease_lost);
  zkl_leases *leases = NULL;
  h_require(zkl_semaphore_acquire(sem, 2, 10000, &leases) == ZKL_OK, "lost: 2 leases through the proxy");
  zkl_multi_member members[] = {{.lock = lock}, {.semaphore = sem, .leases = 1}};
  zkl_multi_lock *multi = NULL;
  zkl_multi_guard *guard = NULL;
  h_require(zkl_multi_lock_new(members, 2, &multi) == ZKL_OK, "lost: make a multi-lock");
  zkl_multi_lock_set_lost_callback(multi, on_multi_lost, &multi_lost);
  h_require(zkl_multi_lock_acquire(multi, 10000, &guard) == ZKL_OK, "lost: a multi-lock through the proxy");

  CHECK(proxy_command(&p, "stall"), "lost: the proxy stalls the connection");
  CHECK(h_event_wait(&lease_lost.event, 1, 30000) && lease_lost.handle == leases && lease_lost.index <= 1,
        "lost: the lease lost callback, with the leases and the index of a lease");
  CHECK(lease_lost.reason == ZKL_LOST_DISCONNECTED_TOO_LONG || lease_lost.reason == ZKL_LOST_SESSION_EXPIRED,
        "lost: the reason is the session");
  CHECK(h_event_wait(&multi_lost.event, 1, 30000) && multi_lost.handle == guard, "lost: the multi-lock's lost callback");
  zkl_hold_state state = ZKL_HOLD_HELD;
  int64_t token = 0, member = -1;
  zkl_lost_reason reason = 0;
  zkl_hold_state second = ZKL_HOLD_HELD;
  CHECK(zkl_leases_state(leases, 0, &state) == ZKL_OK && state == ZKL_HOLD_LOST &&
            zkl_leases_state(leases, 1, &second) == ZKL_OK && second == ZKL_HOLD_LOST,
        "lost: both leases are LOST");
  CHECK(zkl_leases_combined_state(leases, &state) == ZKL_OK && state == ZKL_HOLD_LOST, "lost: the leases together are LOST");
  int64_t lost_index = -1;
  CHECK(zkl_leases_lost_lease(leases, &lost_index, &reason) == ZKL_OK && lost_index == 0 &&
            (reason == ZKL_LOST_DISCONNECTED_TOO_LONG || reason == ZKL_LOST_SESSION_EXPIRED),
        "lost: the first lease lost (both are: the first made) is named, with why");
  CHECK_ERR(zkl_leases_fencing_token(leases, 0, &token), ZKL_LOCK_LOST, "no fencing token", "lost: no token for a lost lease");
  CHECK_ERR(zkl_leases_release(leases), ZKL_LOCK_LOST, "lost", "lost: releasing the lease reports ZKL_LOCK_LOST");
  CHECK(zkl_leases_state(leases, 0, &state) == ZKL_OK && state == ZKL_HOLD_NONE, "lost: NONE once its release reported it");
  CHECK(zkl_multi_guard_state(guard, &state) == ZKL_OK && state == ZKL_HOLD_LOST, "lost: the multi-lock is LOST");
  /* Both members are lost by now: the first in canonical order (the semaphore, at "lost") is named. */
  CHECK(zkl_multi_guard_lost_member(guard, &member, &reason) == ZKL_OK && member == 0 &&
            (reason == ZKL_LOST_DISCONNECTED_TOO_LONG || reason == ZKL_LOST_SESSION_EXPIRED),
        "lost: the multi-lock says which member, and why");
  CHECK_RC(zkl_multi_guard_release(guard), ZKL_LOCK_LOST, "lost: releasing the multi-lock reports ZKL_LOCK_LOST");
  CHECK(zkl_multi_guard_state(guard, &state) == ZKL_OK && state == ZKL_HOLD_NONE &&
            zkl_multi_guard_lost_member(guard, &member, NULL) == ZKL_OK && member == -1,
        "lost: NONE, and no member named, once its release reported the loss (as in every language)");
  CHECK(zkl_leases_combined_state(leases, &state) == ZKL_OK && state == ZKL_HOLD_NONE &&
            zkl_leases_lost_lease(leases, &lost_index, NULL) == ZKL_OK && lost_index == -1,
        "lost: the leases too");

  /* The server expired the session: its lease nodes are gone, so another client gets all 3. */
  zkl_semaphore *others = sem_make(direct, path, 3);
  zkl_leases *two = NULL;
  CHECK_RC(zkl_semaphore_acquire(others, 3, 20000, &two), ZKL_OK, "lost: the nodes expired; another client gets all 3 leases");
  /* (Time for a wrongly delivered second call to show up.) */
  CHECK(!h_event_wait(&lease_lost.event, 2, 200) && !h_event_wait(&multi_lost.event, 2, 0),
        "lost: each callback was called once, for the first of its set's holds lost");
  zkl_leases_release(two);
  zkl_leases_free(two);
  CHECK(proxy_command(&p, "pass"), "lost: the proxy passes traffic again");
  zkl_leases_free(leases);
  zkl_multi_guard_free(guard);
  zkl_multi_lock_free(multi);
  zkl_semaphore_free(others);
  zkl_semaphore_free(sem);
  zkl_lock_free(lock);
  zkl_client_close(client);
  proxy_stop(&p);
}

int main(int argc, char **argv) {
  self = argv[0];
  if (argc >= 3 && strcmp(argv[1], "child") == 0) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (strcmp(argv[2], "load") == 0 && argc == 7) return child_load(argv + 3);
    if (strcmp(argv[2], "fifo") == 0 && argc == 6) return child_fifo(argv + 3);
    if (strcmp(argv[2], "multi") == 0 && argc == 7) return child_multi(argv + 3);
    if (strcmp(argv[2], "plant") == 0 && argc == 5) return child_plant(argv + 3);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  char base[200];
  h_unique_path(base, sizeof base, "semaphore");
  zkl_client *client = h_connect(), *other = h_connect();
  test_processes(client, base);
  test_bad_input(client, base);
  test_leases(client, other, base);
  test_all_or_nothing(client, other, base);
  test_shared_count(client, other, base);
  test_fifo(client, base);
  test_multi_lock(client, other, base);
  test_multi_processes(base);
  test_lost(other, base);
  zkl_client_close(other);
  zkl_client_close(client);
  return h_done();
}
