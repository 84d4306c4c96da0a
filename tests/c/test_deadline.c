/* Every deadline holds while the server cannot be reached (issue 45 item 2): a client through the
 * fault proxy (ZKLOCK_PROXY), its connection stalled, then cut. A try (timeout 0) of a lock and of
 * a semaphore, and a listing, answer within 2 s with ZKL_CONNECTION_LOSS (not ZKL_TIMEOUT, which
 * says someone else holds, nor ZKL_SESSION_EXPIRED); a timed acquire returns ZKL_TIMEOUT within
 * 100 ms of its deadline; once the client gave its session up, a try still answers in 2 s (before:
 * it waited out the 10 s connect timeout). Once the server is back nothing of theirs is left. */
#include "harness.h"
#include "proxy.h"

/* Short, so the second outage gives the session up soon (the calls of the first, in turn, take
 * about 8 s: it may end there too; core/tests/deadline.rs checks the removals on one session). */
#define SESSION_MS 6000
/* A try's bound (2 s), and room for a loaded machine or valgrind. */
#define TRY_LIMIT_MS 3500
#define TIMED_MS 300
/* The grace of 100 ms, and room for a loaded machine or valgrind. */
#define OVERSHOOT_LIMIT_MS 1000

typedef struct {
  zkl_lock *lock, *busy;
  zkl_semaphore *semaphore;
} calls;

/* The tries, a listing and a timed acquire, each timed, while the server is unreachable. */
static void unreachable(const calls *c, const char *fault, int timed_too) {
  char name[160];
  int64_t start = h_now_ms();
  snprintf(name, sizeof name, "%s: a try of a free lock is ZKL_CONNECTION_LOSS", fault);
  CHECK_ERR(zkl_lock_acquire(c->lock, 0), ZKL_CONNECTION_LOSS, "could not be reached", name);
  int64_t took = h_now_ms() - start;
  snprintf(name, sizeof name, "%s: the try answered within its bound (%lld ms)", fault, (long long)took);
  CHECK(took <= TRY_LIMIT_MS, name);

  start = h_now_ms();
  snprintf(name, sizeof name, "%s: a try of a held lock is ZKL_CONNECTION_LOSS, not ZKL_TIMEOUT", fault);
  CHECK_ERR(zkl_lock_acquire(c->busy, 0), ZKL_CONNECTION_LOSS, "could not be reached", name);
  took = h_now_ms() - start;
  snprintf(name, sizeof name, "%s: that try answered within its bound (%lld ms)", fault, (long long)took);
  CHECK(took <= TRY_LIMIT_MS, name);

  start = h_now_ms();
  zkl_leases *leases = NULL;
  snprintf(name, sizeof name, "%s: a semaphore's try is ZKL_CONNECTION_LOSS", fault);
  CHECK_ERR(zkl_semaphore_acquire(c->semaphore, 1, 0, &leases), ZKL_CONNECTION_LOSS, "could not be reached", name);
  took = h_now_ms() - start;
  snprintf(name, sizeof name, "%s: the semaphore's try answered within its bound (%lld ms)", fault, (long long)took);
  CHECK(took <= TRY_LIMIT_MS, name);

  start = h_now_ms();
  zkl_participants *listed = NULL;
  snprintf(name, sizeof name, "%s: a listing is ZKL_CONNECTION_LOSS", fault);
  CHECK_ERR(zkl_lock_contenders(c->busy, &listed), ZKL_CONNECTION_LOSS, "could not be reached", name);
  took = h_now_ms() - start;
  snprintf(name, sizeof name, "%s: the listing answered within its bound (%lld ms)", fault, (long long)took);
  CHECK(took <= TRY_LIMIT_MS, name);

  if (!timed_too) return;
  start = h_now_ms();
  snprintf(name, sizeof name, "%s: a timed acquire is ZKL_TIMEOUT", fault);
  CHECK_RC(zkl_lock_acquire(c->lock, TIMED_MS), ZKL_TIMEOUT, name);
  took = h_now_ms() - start;
  snprintf(name, sizeof name, "%s: the timed acquire returned %lld ms past its deadline", fault, (long long)took - TIMED_MS);
  CHECK(took >= TIMED_MS && took <= TIMED_MS + OVERSHOOT_LIMIT_MS, name);
}

static void outage(const char *fault) {
  proxy p;
  proxy_start(&p);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.session_timeout_ms = SESSION_MS; /* and the default connect timeout, 10 s */
  zkl_client *client = proxy_connect(&p, &opts), *direct = h_connect();
  char path[200], busy_path[200], semaphore_path[200];
  h_unique_path(path, sizeof path, "deadline");
  h_unique_path(busy_path, sizeof busy_path, "deadline-busy");
  h_unique_path(semaphore_path, sizeof semaphore_path, "deadline-semaphore");
  calls c = {NULL, NULL, NULL};
  zkl_lock *holder = NULL, *observer = NULL;
  h_require(zkl_lock_new(client, path, &c.lock) == ZKL_OK && zkl_lock_new(client, busy_path, &c.busy) == ZKL_OK &&
                zkl_semaphore_new(client, semaphore_path, 2, &c.semaphore) == ZKL_OK,
            "make the locks and the semaphore");
  h_require(zkl_lock_new(direct, busy_path, &holder) == ZKL_OK && zkl_lock_acquire(holder, -1) == ZKL_OK,
            "a direct client holds the busy lock");
  h_require(zkl_lock_new(direct, path, &observer) == ZKL_OK, "an observer of the free lock");
  /* Healthy: the paths are made, and a try answers. */
  h_require(zkl_lock_acquire(c.lock, 0) == ZKL_OK && zkl_lock_release(c.lock) == ZKL_OK, "a try holds");
  h_require(zkl_lock_acquire(c.busy, 0) == ZKL_TIMEOUT, "a try finds the busy lock held");
  zkl_leases *leases = NULL;
  h_require(zkl_semaphore_acquire(c.semaphore, 1, 0, &leases) == ZKL_OK && zkl_leases_release(leases) == ZKL_OK,
            "a semaphore's try holds");
  zkl_leases_free(leases);

  h_require(proxy_command(&p, fault), "the fault");
  unreachable(&c, fault, 1);
  h_require(proxy_command(&p, "pass"), "pass");
  char name[160];
  snprintf(name, sizeof name, "%s: no node is left once the server is back ", fault);
  CHECK(h_wait_contenders(observer, 0, 20000), name);

  /* The session given up (the report: zkl_lock_acquire(l, 0) returned after 10.00 s). */
  h_require(proxy_command(&p, fault), "the fault again");
  zkl_session_state state = ZKL_SESSION_STATE_CONNECTED;
  int64_t deadline = h_now_ms() + 20000;
  while (h_now_ms() < deadline && (zkl_client_state(client, &state), state != ZKL_SESSION_STATE_EXPIRED)) h_sleep_ms(20);
  h_require(state == ZKL_SESSION_STATE_EXPIRED, "the client gives its session up");
  char given_up[64];
  snprintf(given_up, sizeof given_up, "%s, session given up", fault);
  unreachable(&c, given_up, 0);
  h_require(proxy_command(&p, "pass"), "pass");

  zkl_lock_release(holder);
  zkl_lock_free(holder);
  zkl_lock_free(observer);
  zkl_lock_free(c.lock);
  zkl_lock_free(c.busy);
  zkl_semaphore_free(c.semaphore);
  zkl_client_close(client);
  zkl_client_close(direct);
  proxy_stop(&p);
}

int main(void) {
  outage("stall");
  outage("cut");
  return h_done();
}
