/* Issue 44 item 6 in C: an acquisition with timeout -1 waits as long as it takes. A client talks
 * to ZooKeeper through the fault proxy (ZKLOCK_PROXY, started here) with a 2 s session and a 1 s
 * connect timeout; one of its threads waits (zkl_lock_acquire(l, -1)) behind a holder connected
 * directly. The proxy then cuts the client off for longer than its session and several connect
 * timeouts, and more threads begin acquisitions meanwhile (a mutex and a semaphore, both -1),
 * each needing a new session. None may end during the outage (before issue 44 each ended with
 * ZKL_TIMEOUT: "no session within the connect timeout"); once the server is reachable again and
 * the holder has released, each holds, on a new session. */
#include "harness.h"

#include "proxy.h"

#include <signal.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* Under valgrind (scripts/test-c's second pass) everything runs several times slower: a 1 s
 * connect timeout is missed by a connection that works. The times scale together there. */
#define SCALE (RUNNING_ON_VALGRIND ? 3 : 1)
#define SESSION_MS (2000 * SCALE)
#define CONNECT_MS (1000 * SCALE)
/* Longer than the session (the waiter's session ends) and than several connect timeouts. */
#define OUTAGE_MS (6000 * SCALE)
/* How long the acquisitions may take once the server is back (a new session, a queue). */
#define PATIENCE_MS 30000

/* One acquisition in a thread of its own, taken with timeout -1 and held until told to release. */
typedef struct {
  const char *what;
  zkl_lock *lock;           /* a mutex, or NULL */
  zkl_semaphore *semaphore; /* or a semaphore (one lease) */
  zkl_leases *leases;
  int rc, released_rc;
  char message[300]; /* zkl_last_error_message() of the acquiring thread */
  int64_t ended_ms;  /* when the acquisition returned (h_now_ms) */
  h_event done, release;
  pthread_t thread;
} forever;

static void *acquires_forever(void *arg) {
  forever *f = arg;
  f->rc = f->lock != NULL ? zkl_lock_acquire(f->lock, -1) : zkl_semaphore_acquire(f->semaphore, 1, -1, &f->leases);
  snprintf(f->message, sizeof f->message, "%s", zkl_last_error_message());
  f->ended_ms = h_now_ms();
  h_event_fire(&f->done);
  h_event_wait(&f->release, 1, 2 * PATIENCE_MS);
  if (f->rc == ZKL_OK) f->released_rc = f->lock != NULL ? zkl_lock_release(f->lock) : zkl_leases_release(f->leases);
  return NULL;
}

static void start(forever *f, const char *what, zkl_lock *lock, zkl_semaphore *semaphore) {
  *f = (forever){.what = what, .lock = lock, .semaphore = semaphore, .rc = -1, .released_rc = -1,
                 .done = H_EVENT_INIT, .release = H_EVENT_INIT};
  h_require(pthread_create(&f->thread, NULL, acquires_forever, f) == 0, "start an acquiring thread");
}

static void test_forever_outlasts_an_outage(void) {
  proxy p;
  proxy_start(&p);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.session_timeout_ms = SESSION_MS;
  opts.connect_timeout_ms = CONNECT_MS;
  zkl_client *client = proxy_connect(&p, &opts);
  zkl_client *holder = h_connect();
  int64_t session_before = 0, session_after = 0;
  zkl_client_session_id(client, &session_before);

  char queued_path[200], mutex_path[200], semaphore_path[200];
  h_unique_path(queued_path, sizeof queued_path, "forever-queued");
  h_unique_path(mutex_path, sizeof mutex_path, "forever-mutex");
  h_unique_path(semaphore_path, sizeof semaphore_path, "forever-semaphore");
  zkl_lock *held = NULL, *queued_lock = NULL, *mutex_lock = NULL;
  zkl_semaphore *semaphore = NULL;
  h_require(zkl_lock_new(holder, queued_path, &held) == ZKL_OK && zkl_lock_acquire(held, -1) == ZKL_OK,
            "the direct holder holds");
  h_require(zkl_lock_new(client, queued_path, &queued_lock) == ZKL_OK &&
                zkl_lock_new(client, mutex_path, &mutex_lock) == ZKL_OK &&
                zkl_semaphore_new(client, semaphore_path, 2, &semaphore) == ZKL_OK,
            "make the proxied client's lock, mutex and semaphore");

  /* A waiter queued before the outage. */
  forever f[3];
  start(&f[0], "the queued waiter (zkl_lock_acquire -1)", queued_lock, NULL);
  h_require(h_wait_contenders(held, 2, 20000), "the waiter queues behind the holder");

  CHECK(proxy_command(&p, "cut"), "the proxy cuts the client off");
  int64_t t0 = h_now_ms();
  /* Acquisitions begun during the outage: each needs a new session. */
  start(&f[1], "a mutex begun during the outage (zkl_lock_acquire -1)", mutex_lock, NULL);
  start(&f[2], "a semaphore begun during the outage (zkl_semaphore_acquire -1)", NULL, semaphore);
  /* The fault itself: an outage this long. */
  h_sleep_ms(OUTAGE_MS);
  char name[240];
  for (int i = 0; i < 3; i++) {
    snprintf(name, sizeof name, "%s did not end during a %d ms outage", f[i].what, OUTAGE_MS);
    h_report(!h_event_wait(&f[i].done, 1, 1), name, "it returned %s (\"%s\") after %.1f s", h_code_name(f[i].rc),
             f[i].message, (f[i].ended_ms - t0) / 1e3);
  }

  CHECK_RC(zkl_lock_release(held), ZKL_OK, "the direct holder releases");
  CHECK(proxy_command(&p, "pass"), "the server is reachable again");
  for (int i = 0; i < 3; i++) {
    h_event_wait(&f[i].done, 1, PATIENCE_MS);
    snprintf(name, sizeof name, "%s holds once the server is back", f[i].what);
    h_report(f[i].rc == ZKL_OK, name, "it returned %s (\"%s\")", f[i].rc == -1 ? "nothing yet" : h_code_name(f[i].rc),
             f[i].message);
  }
  printf("# waited for them until %.1f s after the outage began\n", (h_now_ms() - t0) / 1e3);
  zkl_client_session_id(client, &session_after);
  CHECK(session_after != 0 && session_after != session_before, "they hold on a new session");
  CHECK(h_contenders(held) == 1, "the waiter's node of the ended session is gone: one contender");

  for (int i = 0; i < 3; i++) {
    h_event_fire(&f[i].release);
    pthread_join(f[i].thread, NULL);
    if (f[i].rc != ZKL_OK) continue;
    snprintf(name, sizeof name, "%s releases", f[i].what);
    CHECK_RC(f[i].released_rc, ZKL_OK, name);
  }
  if (f[2].leases != NULL) zkl_leases_free(f[2].leases);
  zkl_lock_free(held);
  zkl_lock_free(queued_lock);
  zkl_lock_free(mutex_lock);
  zkl_semaphore_free(semaphore);
  zkl_client_close(client);
  zkl_client_close(holder);
  proxy_stop(&p);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  test_forever_outlasts_an_outage();
  return h_done();
}
