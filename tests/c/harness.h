/* A tiny test harness for the C tests of zklock. Each check prints one line, "ok - NAME" or
 * "not ok - NAME: details", which scripts/test-c counts; a program exits 1 if any check failed.
 * Every program needs ZK_CONNECT (scripts/test-c runs them under scripts/zk run). */
#ifndef ZKLOCK_TEST_HARNESS_H
#define ZKLOCK_TEST_HARNESS_H

#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zklock.h>

static int h_passed, h_failed;

/* The enum name of a result code, e.g. "ZKL_TIMEOUT". */
static inline const char *h_code_name(int rc) {
  static const char *names[] = {"ZKL_OK", "ZKL_TIMEOUT", "ZKL_NOT_OWNER", "ZKL_SESSION_EXPIRED",
                                "ZKL_LOCK_LOST", "ZKL_CONNECTION_LOSS", "ZKL_AUTH_FAILED", "ZKL_CLOSED",
                                "ZKL_INVALID_ARGUMENT", "ZKL_ZOOKEEPER", "ZKL_PANIC", "ZKL_DEADLOCK",
                                "ZKL_PERMISSION_DENIED", "ZKL_CANCELLED"};
  return rc >= 0 && rc <= ZKL_CANCELLED ? names[rc] : "(not a zkl_result)";
}

static inline void h_report(int ok, const char *name, const char *fmt, ...) {
  if (ok) {
    h_passed++;
    printf("ok - %s\n", name);
  } else {
    h_failed++;
    printf("not ok - %s: ", name);
    va_list args;
    va_start(args, fmt);
    vprintf(fmt, args);
    va_end(args);
    printf("\n");
  }
  fflush(stdout);
}

/* CHECK(condition, name): passes when condition holds. */
#define CHECK(cond, name) h_report(!!(cond), (name), "%s (%s:%d)", #cond, __FILE__, __LINE__)

/* CHECK_RC(call, expected, name): passes when the call returns the expected code; on failure it
 * shows the code and the last error message. Evaluates to the code. */
#define CHECK_RC(call, expected, name)                                                                  \
  ({                                                                                                    \
    int h_rc_ = (call);                                                                                 \
    h_report(h_rc_ == (expected), (name), "%s returned %s (\"%s\"), expected %s (%s:%d)", #call,         \
             h_code_name(h_rc_), zkl_last_error_message(), h_code_name(expected), __FILE__, __LINE__); \
    h_rc_;                                                                                              \
  })

/* CHECK_ERR(call, expected, needle, name): the expected error code, with a message containing
 * needle (the message must say what was wrong). */
#define CHECK_ERR(call, expected, needle, name)                                                          \
  do {                                                                                                  \
    int h_rc_ = (call);                                                                                 \
    const char *h_msg_ = zkl_last_error_message();                                                     \
    h_report(h_rc_ == (expected) && strstr(h_msg_, (needle)) != NULL, (name),                           \
             "%s returned %s (\"%s\"), expected %s with \"%s\" (%s:%d)", #call, h_code_name(h_rc_), h_msg_, \
             h_code_name(expected), (needle), __FILE__, __LINE__);                                      \
  } while (0)

/* The last line, and the exit status. */
static inline int h_done(void) {
  printf("# %d passed, %d failed\n", h_passed, h_failed);
  return h_failed == 0 ? 0 : 1;
}

/* Stops the program when a step that every later check depends on failed. */
static inline void h_require(int ok, const char *what) {
  if (!ok) {
    printf("not ok - %s: cannot go on (\"%s\")\n", what, zkl_last_error_message());
    printf("# %d passed, %d failed\n", h_passed, h_failed + 1);
    exit(1);
  }
}

static inline const char *h_zk_connect(void) {
  const char *connect = getenv("ZK_CONNECT");
  if (connect == NULL || *connect == '\0') {
    fprintf(stderr, "ZK_CONNECT is not set (run through scripts/test-c)\n");
    exit(2);
  }
  return connect;
}

static inline int64_t h_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void h_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A lock path no other test (or earlier run) uses. */
static inline void h_unique_path(char *buf, size_t len, const char *test) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  snprintf(buf, len, "/zklock-c-tests/%s-%d-%ld%09ld", test, (int)getpid(), (long)ts.tv_sec, ts.tv_nsec);
}

/* `first` holds the lock at `path`, `second` finds it held and gets it once `first` releases;
 * each step a check named "<what>: ...". */
static inline void h_hand_over(zkl_client *first, zkl_client *second, const char *path, const char *what) {
  char name[192];
#define H_STEP(step) (snprintf(name, sizeof name, "%s: %s", what, step), name)
  zkl_lock *lock = NULL, *seconds = NULL;
  CHECK_RC(zkl_lock_new(first, path, &lock), ZKL_OK, H_STEP("the first client makes a lock"));
  CHECK_RC(zkl_lock_acquire(lock, -1), ZKL_OK, H_STEP("the first acquires"));
  CHECK_RC(zkl_lock_new(second, path, &seconds), ZKL_OK, H_STEP("the second makes a lock on the path"));
  CHECK_RC(zkl_lock_acquire(seconds, 0), ZKL_TIMEOUT, H_STEP("the second finds it held"));
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, H_STEP("the first releases"));
  CHECK_RC(zkl_lock_acquire(seconds, 10000), ZKL_OK, H_STEP("the second acquires after it"));
  CHECK_RC(zkl_lock_release(seconds), ZKL_OK, H_STEP("the second releases"));
#undef H_STEP
  zkl_lock_free(lock);
  zkl_lock_free(seconds);
}

static inline zkl_client *h_connect(void) {
  zkl_client *client = NULL;
  int rc = zkl_client_connect(h_zk_connect(), NULL, &client);
  h_require(rc == ZKL_OK && client != NULL, "connect to ZK_CONNECT");
  return client;
}

/* The number of contenders (holder included) of lock, or -1 on error. */
static inline long h_contenders(zkl_lock *lock) {
  zkl_participants *list = NULL;
  if (zkl_lock_contenders(lock, &list) != ZKL_OK) return -1;
  long count = (long)list->count;
  zkl_participants_free(list);
  return count;
}

/* Polls (every 5 ms) until lock has `count` contenders or timeout_ms passed; 1 if it does. A
 * contender's arrival in another thread or process is only observable this way. */
static inline int h_wait_contenders(zkl_lock *lock, long count, int timeout_ms) {
  int64_t deadline = h_now_ms() + timeout_ms;
  while (h_now_ms() < deadline) {
    if (h_contenders(lock) == count) return 1;
    h_sleep_ms(5);
  }
  return h_contenders(lock) == count;
}

/* A one-shot event between threads (callbacks signal the test thread through these). */
typedef struct {
  pthread_mutex_t mutex;
  pthread_cond_t cond;
  int fired;
} h_event;

#define H_EVENT_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}

static inline void h_event_fire(h_event *event) {
  pthread_mutex_lock(&event->mutex);
  event->fired++;
  pthread_cond_broadcast(&event->cond);
  pthread_mutex_unlock(&event->mutex);
}

/* Waits until the event fired at least `times` times; 1 if it did within timeout_ms. */
static inline int h_event_wait(h_event *event, int times, int timeout_ms) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += timeout_ms / 1000;
  deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&event->mutex);
  int rc = 0;
  while (event->fired < times && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&event->cond, &event->mutex, &deadline);
  int fired = event->fired >= times;
  pthread_mutex_unlock(&event->mutex);
  return fired;
}

#endif
