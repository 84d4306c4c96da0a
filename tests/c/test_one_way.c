/* Issue 42 in C: a holder is told it lost the lock before the next holder gets it, whatever the
 * fault (as core/tests/one_way.rs asserts in Rust). Holder H talks to ZooKeeper through the fault
 * proxy (ZKLOCK_PROXY, started here), B connects directly and waits for the same lock; then the
 * proxy stalls H both ways past its session, or holds only what H sends while the server's watch
 * notifications still reach H, or cuts H's connection and lets its reconnect have only the
 * ConnectResponse. The server expires H's session and lets B in; H's lost callback must have run
 * first: both instants are read on CLOCK_MONOTONIC in this process. Right after B's acquire
 * returns, B's thread reads H's state and is_held a few thousand times: never held. Learning the
 * loss from the node's deletion, the event that lets B in, does not count. */
#define _GNU_SOURCE
#include "harness.h"

#include "proxy.h"

#include <netdb.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/socket.h>

/* Short, so the expiry comes quickly; long enough for a loaded machine (or valgrind) not to miss
 * heartbeats while the proxy passes traffic (as test_lost's). */
#define SESSION_MS 4000
/* Bounds on the waits that the fault decides (an expiry takes about a session timeout). */
#define PATIENCE_MS 30000
/* H's state read this many times right after B holds. */
#define READS 5000
/* The upstream stall: watch notifications for H every CHATTER_EVERY_MS, well past the session. */
#define CHATTER_EVERY_MS 250
#define CHATTER ((SESSION_MS + 2500) / CHATTER_EVERY_MS)
#define CHATTER_OWNER 4242

static int64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static const char *state_name(zkl_hold_state state) {
  static const char *names[] = {"NONE", "HELD", "SUSPENDED", "LOST"};
  return state <= ZKL_HOLD_LOST ? names[state] : "?";
}

static const char *reason_name(zkl_lost_reason reason) {
  static const char *names[] = {"?", "SESSION_EXPIRED", "DISCONNECTED_TOO_LONG", "CLOSED", "NODE_DELETED", "AUTH_FAILED"};
  return reason <= ZKL_LOST_AUTH_FAILED ? names[reason] : "?";
}

/* H's lost callback: the instant of its first call, and why. */
typedef struct {
  h_event event;
  int64_t at;
  zkl_lost_reason reason;
} lost_seen;

static void on_lost(void *userdata, zkl_lock *lock, uint64_t owner, zkl_lost_reason reason) {
  (void)lock;
  (void)owner;
  int64_t at = now_us();
  lost_seen *seen = userdata;
  if (seen->at == 0) { /* the first call (a lock's callbacks run one at a time) */
    seen->at = at;
    seen->reason = reason;
  }
  h_event_fire(&seen->event);
}

static void on_state(void *userdata, zkl_client *client, zkl_session_state state) {
  (void)client;
  if (state == ZKL_SESSION_STATE_DISCONNECTED) h_event_fire(userdata);
}

/* B's acquire, in a thread of its own: the instant it returned, H's state then, and H's state and
 * is_held read READS times right after. */
typedef struct {
  zkl_lock *lock, *h_lock;
  uint64_t h_owner;
  int rc;
  int64_t at;
  zkl_hold_state h_then;
  int held;          /* reads that said held (state HELD or is_held true) */
  int64_t held_last; /* the latest such read, in us after B held */
  int64_t reads_took;
} b_waiter;

static void *b_acquires(void *arg) {
  b_waiter *b = arg;
  b->rc = zkl_lock_acquire(b->lock, PATIENCE_MS);
  b->at = now_us();
  zkl_lock_state_as(b->h_lock, b->h_owner, &b->h_then);
  if (b->rc != ZKL_OK) return NULL;
  for (int i = 0; i < READS; i++) {
    zkl_hold_state state = ZKL_HOLD_NONE;
    bool held = false;
    zkl_lock_state_as(b->h_lock, b->h_owner, &state);
    zkl_lock_is_held_as(b->h_lock, b->h_owner, &held);
    if (state == ZKL_HOLD_HELD || held) {
      b->held++;
      b->held_last = now_us() - b->at;
    }
  }
  b->reads_took = now_us() - b->at;
  zkl_lock_release(b->lock);
  return NULL;
}

/* H through the proxy holding the lock, B direct and waiting for it. */
typedef struct {
  const char *name;
  proxy p;
  zkl_client *h, *b;
  zkl_lock *h_lock;
  uint64_t h_owner;
  int64_t h_session;
  char path[200];
  lost_seen lost;
  h_event disconnected;
  b_waiter waiter;
  pthread_t b_thread;
} stage;

static void stage_start(stage *s, const char *name) {
  s->name = name;
  s->lost = (lost_seen){.event = H_EVENT_INIT};
  s->disconnected = (h_event)H_EVENT_INIT;
  proxy_start(&s->p);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.session_timeout_ms = SESSION_MS;
  s->h = proxy_connect(&s->p, &opts);
  h_require(zkl_client_connect(h_zk_connect(), &opts, &s->b) == ZKL_OK, "connect B directly");
  h_unique_path(s->path, sizeof s->path, name);
  h_require(zkl_lock_new(s->h, s->path, &s->h_lock) == ZKL_OK, "make H's lock");
  h_require(zkl_lock_set_lost_callback(s->h_lock, on_lost, &s->lost) == ZKL_OK, "set H's lost callback");
  h_require(zkl_client_set_state_callback(s->h, on_state, &s->disconnected) == ZKL_OK, "set H's session callback");
  h_require(zkl_lock_acquire(s->h_lock, -1) == ZKL_OK, "H acquires through the proxy");
  s->h_owner = zkl_thread_owner();
  zkl_client_session_id(s->h, &s->h_session);
}

/* B starts waiting for the lock; returns once its node is queued behind H's. */
static void stage_b_waits(stage *s) {
  s->waiter = (b_waiter){.h_lock = s->h_lock, .h_owner = s->h_owner, .rc = -1};
  h_require(zkl_lock_new(s->b, s->path, &s->waiter.lock) == ZKL_OK, "make B's lock");
  h_require(pthread_create(&s->b_thread, NULL, b_acquires, &s->waiter) == 0, "start B's thread");
  h_require(h_wait_contenders(s->waiter.lock, 2, 20000), "B waits behind H");
}

/* Waits for B to hold (and H to be told), prints the instants against t0, and checks the order. */
static void stage_check(stage *s, int64_t t0) {
  char name[200];
#define STEP(what) (snprintf(name, sizeof name, "%s: %s", s->name, what), name)
  pthread_join(s->b_thread, NULL);
  b_waiter *b = &s->waiter;
  CHECK_RC(b->rc, ZKL_OK, STEP("B holds once the server expired H's session"));
  /* Given time to show up if it came late, for the report. */
  int told = h_event_wait(&s->lost.event, 1, b->rc == ZKL_OK ? 5000 : 1);
  char lost_at[64] = "never";
  if (told) snprintf(lost_at, sizeof lost_at, "%.3f s (%s)", (s->lost.at - t0) / 1e6, reason_name(s->lost.reason));
  printf("# %s: H lost at %s, B held at %.3f s, when H read %s; after, H read held %d times of %d (last %.3f ms "
         "after; the reads took %.3f ms)\n",
         s->name, lost_at, (b->at - t0) / 1e6, state_name(b->h_then), b->held, READS, b->held_last / 1e3,
         b->reads_took / 1e3);
  fflush(stdout);
  h_report(told && s->lost.at <= b->at, STEP("H's lost callback ran before B's acquire returned"),
           "H lost at %s, B held at %.3f s (%s:%d)", lost_at, (b->at - t0) / 1e6, __FILE__, __LINE__);
  h_report(!told || s->lost.reason != ZKL_LOST_NODE_DELETED,
           STEP("H was not told by its node's deletion, the event that let B in"), "reason %s (%s:%d)",
           reason_name(s->lost.reason), __FILE__, __LINE__);
  h_report(b->h_then == ZKL_HOLD_LOST, STEP("H's state reads LOST when B's acquire returns"), "it read %s (%s:%d)",
           state_name(b->h_then), __FILE__, __LINE__);
  h_report(b->rc == ZKL_OK && b->held == 0, STEP("H's state and is_held never read held after B holds"),
           "held in %d reads of %d (%s:%d)", b->held, READS, __FILE__, __LINE__);
#undef STEP
}

static void stage_end(stage *s) {
  proxy_command(&s->p, "pass");
  zkl_lock_release(s->h_lock); /* ZKL_LOCK_LOST: the node went with the session */
  zkl_lock_free(s->h_lock);
  zkl_lock_free(s->waiter.lock);
  zkl_client_close(s->h);
  zkl_client_close(s->b);
  proxy_stop(&s->p);
}

/* (1) H hears nothing, both ways, for longer than its session. */
static void test_stall(void) {
  stage s;
  stage_start(&s, "stall");
  stage_b_waits(&s);
  int64_t t0 = now_us();
  CHECK(proxy_command(&s.p, "stall"), "stall: the proxy stalls H's connection both ways");
  stage_check(&s, t0);
  stage_end(&s);
}

/* Whether the server's `wchp` lists `node` (ZK_CONNECT's chroot, if any, added) as watched by
 * `session`. */
static int watched_by(const char *node, int64_t session) {
  const char *servers = h_zk_connect(), *chroot = strchr(servers, '/');
  char host[256], full[600], session_line[40];
  snprintf(host, sizeof host, "%s", servers);
  host[strcspn(host, ",/")] = '\0';
  char *colon = strrchr(host, ':');
  if (colon == NULL) return 0;
  *colon = '\0';
  snprintf(full, sizeof full, "%s%s", chroot != NULL ? chroot : "", node);
  snprintf(session_line, sizeof session_line, "0x%" PRIx64, (uint64_t)session);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *found = NULL;
  if (getaddrinfo(host, colon + 1, &hints, &found) != 0) return 0;
  int fd = socket(found->ai_family, found->ai_socktype, 0), ok = 0;
  if (fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0 && write(fd, "wchp", 4) == 4) {
    size_t size = 1 << 16, used = 0;
    char *reply = malloc(size);
    ssize_t n;
    while (reply != NULL && (n = read(fd, reply + used, size - used - 1)) > 0) {
      used += (size_t)n;
      if (size - used < 4096) reply = realloc(reply, size *= 2);
    }
    if (reply != NULL) {
      reply[used] = '\0';
      /* A watched path's line, then a tab-indented line for each session watching it. */
      int in_node = 0;
      for (char *line = strtok(reply, "\n"); line != NULL && !ok; line = strtok(NULL, "\n")) {
        if (line[0] != '\t') in_node = strcmp(line, full) == 0;
        else if (in_node && strcmp(line + 1, session_line) == 0) ok = 1;
      }
      free(reply);
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  return ok;
}

/* A lock held by B's client that H's client waits for (in a thread of its own). */
typedef struct {
  zkl_lock *b_lock, *h_lock;
  pthread_t thread;
  int rc;
} chatter_lock;

static void *h_waits(void *arg) {
  chatter_lock *c = arg;
  c->rc = zkl_lock_acquire(c->h_lock, 60000);
  if (c->rc == ZKL_OK) zkl_lock_release(c->h_lock);
  return NULL;
}

typedef struct {
  chatter_lock *locks;
  atomic_int stop;
  int released;
} releaser;

/* Releases B's chatter locks one by one, CHATTER_EVERY_MS apart: each sends H a notification. */
static void *release_one_by_one(void *arg) {
  releaser *r = arg;
  while (r->released < CHATTER && !atomic_load(&r->stop)) {
    h_sleep_ms(CHATTER_EVERY_MS);
    zkl_lock_release_as(r->locks[r->released++].b_lock, CHATTER_OWNER);
  }
  return NULL;
}

/* (2) A one-way loss, H to the server: H's requests and pings are held, while the watch
 * notifications of locks it waits for (released every CHATTER_EVERY_MS by B's client) still
 * arrive, well past the session: a client that takes any byte received for a sign that the server
 * still hears it would keep believing it holds. */
static void test_stall_upstream(void) {
  stage s;
  stage_start(&s, "stall-upstream");
  stage_b_waits(&s);
  static chatter_lock chatter[CHATTER];
  int watched = 0;
  for (int i = 0; i < CHATTER; i++) {
    chatter_lock *c = &chatter[i];
    char path[240];
    snprintf(path, sizeof path, "%s-chatter-%d", s.path, i);
    h_require(zkl_lock_new(s.b, path, &c->b_lock) == ZKL_OK && zkl_lock_new(s.h, path, &c->h_lock) == ZKL_OK,
              "make a chatter lock");
    h_require(zkl_lock_acquire_as(c->b_lock, CHATTER_OWNER, -1) == ZKL_OK, "B's client holds a chatter lock");
    h_require(pthread_create(&c->thread, NULL, h_waits, c) == 0, "start a chatter waiter");
    char node[400] = "";
    zkl_participants *holder = NULL;
    if (zkl_lock_holder(c->b_lock, &holder) == ZKL_OK && holder->count == 1)
      snprintf(node, sizeof node, "%s/%s", path, holder->items[0].node);
    zkl_participants_free(holder);
    int64_t deadline = h_now_ms() + 10000;
    while (!watched_by(node, s.h_session) && h_now_ms() < deadline) h_sleep_ms(5);
    watched += watched_by(node, s.h_session);
  }
  CHECK(watched == CHATTER, "stall-upstream: H's client watches each chatter lock's holder");

  releaser r = {.locks = chatter};
  pthread_t releases;
  int64_t t0 = now_us();
  CHECK(proxy_command(&s.p, "stall-upstream"), "stall-upstream: the proxy holds what H sends, passes what it gets");
  h_require(pthread_create(&releases, NULL, release_one_by_one, &r) == 0, "start the releases");
  stage_check(&s, t0);
  atomic_store(&r.stop, 1);
  pthread_join(releases, NULL);
  printf("# stall-upstream: %d of %d chatter locks released by then\n", r.released, CHATTER);
  CHECK(r.released < CHATTER, "stall-upstream: B held while the chatter locks were still being released");
  for (int i = r.released; i < CHATTER; i++) zkl_lock_release_as(chatter[i].b_lock, CHATTER_OWNER);
  for (int i = 0; i < CHATTER; i++) zkl_lock_cancel(chatter[i].h_lock);
  for (int i = 0; i < CHATTER; i++) {
    pthread_join(chatter[i].thread, NULL);
    zkl_lock_free(chatter[i].b_lock);
    zkl_lock_free(chatter[i].h_lock);
  }
  stage_end(&s);
}

/* (3) Issue 42 item 5: the proxy cuts H, lets only the ConnectResponse of H's reconnect through,
 * then refuses new connections. The reconnect renewed the session on the server, which expires it
 * a session timeout later and lets B in; H must be told first, and never read held after. */
static void test_cut_after_connect_response(void) {
  stage s;
  stage_start(&s, "cut-after-connect-response");
  stage_b_waits(&s);
  int64_t t0 = now_us();
  CHECK(proxy_command(&s.p, "cut"), "cut-after-connect-response: the proxy cuts H's connection");
  CHECK(h_event_wait(&s.disconnected, 1, PATIENCE_MS), "cut-after-connect-response: H's session callback: DISCONNECTED");
  CHECK(proxy_command(&s.p, "cut-after-connect-response") && proxy_command(&s.p, "pass"),
        "cut-after-connect-response: armed, and the proxy passes again");
  CHECK(proxy_command(&s.p, "wait-connect-cut"),
        "cut-after-connect-response: H reconnected, got its ConnectResponse, and was cut");
  printf("# cut-after-connect-response: the ConnectResponse went through by %.3f s\n", (now_us() - t0) / 1e6);
  stage_check(&s, t0);
  stage_end(&s);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  test_stall();
  test_stall_upstream();
  test_cut_after_connect_response();
  return h_done();
}
