/* Chaos soak contender in C, following the soak's fixed protocol between contenders, the
 * orchestrator and the fenced resource.
 *
 *   contender --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS
 *             [--op-sleep-ms N] [--idle-ms N] [--sasl-digest USER:PASSWORD]
 *
 * --sasl-digest (the soak's servers require SASL): every connection authenticates with SASL
 * DIGEST-MD5 as USER (zkl_options.sasl_mechanism).
 *
 * One zklock client, one TCP connection to the fenced resource; loops until SIGTERM (then: close
 * the client so its nodes go, exit 0). Exit 3 if the resource connection drops.
 *
 * The C API has no call that interrupts a waiting acquisition, so "cancel" is what a C program
 * can do: the attempt waits on a worker thread (as an explicit owner), and giving up frees its
 * lock handle (zkl_lock_free); the attempt then gives back whatever it gets. The worker waits at
 * most 3 s, so an abandoned attempt leaves the queue by then.
 *
 * Threads: main (the loop), a signal thread (sigwait), zklock's callback thread (lost holds), and
 * cancel-branch workers. Lock order: state_mu, then sock_mu. */
#define _GNU_SOURCE
#include <zklock.h>

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MUTEX_PATH "/chaos/mutex"
#define RW_PATH "/chaos/rw"
#define CANCEL_WORKER_TIMEOUT_MS 3000
#define PINNED_OP_INTERVAL_MS 100

static int64_t op_sleep_ms = 30; /* the sleep after an operation: uniform in [0, op_sleep_ms] */
static int64_t idle_ms = 50;     /* the sleep between iterations: uniform in [0, idle_ms] */

static const char *name = "c";
static int sock = -1;
static pthread_mutex_t sock_mu = PTHREAD_MUTEX_INITIALIZER;  /* one request on the socket at a time */
static pthread_mutex_t state_mu = PTHREAD_MUTEX_INITIALIZER; /* the current hold's flags */

/* Stop (SIGTERM): set by the signal thread, under stop_mu, broadcast on stop_cv. */
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cv;
static bool stop;

static bool stopping(void) {
  pthread_mutex_lock(&stop_mu);
  bool s = stop;
  pthread_mutex_unlock(&stop_mu);
  return s;
}

/* ------------------------------------------------------------------------------------ util */

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "contender-c %s: ", name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  _exit(2);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct timespec deadline_after_ms(int64_t ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

/* Sleeps ms, or less if stopping. */
static void nap(int64_t ms) {
  if (ms <= 0) return;
  struct timespec until = deadline_after_ms(ms);
  pthread_mutex_lock(&stop_mu);
  while (!stop && pthread_cond_timedwait(&stop_cv, &stop_mu, &until) != ETIMEDOUT) {
  }
  pthread_mutex_unlock(&stop_mu);
}

static uint64_t rng_state;
static uint64_t next_random(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/* Uniform in [lo, hi]. */
static int64_t uniform(int64_t lo, int64_t hi) { return lo + (int64_t)(next_random() % (uint64_t)(hi - lo + 1)); }

static const char *result_kind(int rc) {
  switch (rc) {
  case ZKL_OK: return "ZKL_OK";
  case ZKL_TIMEOUT: return "ZKL_TIMEOUT";
  case ZKL_NOT_OWNER: return "ZKL_NOT_OWNER";
  case ZKL_SESSION_EXPIRED: return "ZKL_SESSION_EXPIRED";
  case ZKL_LOCK_LOST: return "ZKL_LOCK_LOST";
  case ZKL_CONNECTION_LOSS: return "ZKL_CONNECTION_LOSS";
  case ZKL_AUTH_FAILED: return "ZKL_AUTH_FAILED";
  case ZKL_CLOSED: return "ZKL_CLOSED";
  case ZKL_INVALID_ARGUMENT: return "ZKL_INVALID_ARGUMENT";
  case ZKL_ZOOKEEPER: return "ZKL_ZOOKEEPER";
  case ZKL_PANIC: return "ZKL_PANIC";
  case ZKL_DEADLOCK: return "ZKL_DEADLOCK";
  default: return "ZKL_UNKNOWN";
  }
}

static const char *hold_state_word(zkl_hold_state state) {
  switch (state) {
  case ZKL_HOLD_NONE: return "none";
  case ZKL_HOLD_HELD: return "held";
  case ZKL_HOLD_SUSPENDED: return "suspended";
  case ZKL_HOLD_LOST: return "lost";
  default: return "unknown";
  }
}

static const char *lost_reason_word(zkl_lost_reason reason) {
  switch (reason) {
  case ZKL_LOST_SESSION_EXPIRED: return "session_expired";
  case ZKL_LOST_DISCONNECTED_TOO_LONG: return "disconnected_too_long";
  case ZKL_LOST_CLOSED: return "closed";
  case ZKL_LOST_NODE_DELETED: return "node_deleted";
  case ZKL_LOST_AUTH_FAILED: return "auth_failed";
  default: return "unknown";
  }
}

/* ------------------------------------------------------------------------------- resource */

static void resource_gone(const char *what) {
  fprintf(stderr, "contender-c %s: resource connection %s\n", name, what);
  _exit(3);
}

static void send_line_locked(const char *line) {
  size_t len = strlen(line), off = 0;
  while (off < len) {
    ssize_t n = send(sock, line + off, len - off, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) resource_gone("dropped (send)");
    off += (size_t)n;
  }
}

/* One reply line into buf (without the newline). Reads a byte at a time: replies are tiny and
 * only one request is ever outstanding, so nothing past the newline is ever in flight. */
static void read_reply_locked(char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    char c;
    ssize_t r = recv(sock, &c, 1, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) resource_gone(r == 0 ? "closed" : "dropped (recv)");
    if (c == '\n') break;
    if (n + 1 < cap) buf[n++] = c;
  }
  buf[n] = 0;
}

/* Sends one line; with a reply buffer, also reads the reply (under the same socket lock). */
static void request(char *reply, size_t cap, const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(line, sizeof line - 1, fmt, ap);
  va_end(ap);
  if (len < 0 || (size_t)len >= sizeof line - 1) die("message too long");
  line[len] = '\n';
  line[len + 1] = 0;
  pthread_mutex_lock(&sock_mu);
  send_line_locked(line);
  if (reply) read_reply_locked(reply, cap);
  pthread_mutex_unlock(&sock_mu);
}

static void connect_resource(const char *addr) {
  char host[256];
  const char *colon = strrchr(addr, ':');
  if (!colon || (size_t)(colon - addr) >= sizeof host) die("--resource %s: expected HOST:PORT", addr);
  memcpy(host, addr, (size_t)(colon - addr));
  host[colon - addr] = 0;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
  if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) die("--resource %s: expected an IPv4 address", addr);
  sock = socket(AF_INET, SOCK_STREAM, 0);
  if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof sa) != 0) die("connect to resource %s: %s", addr, strerror(errno));
  int one = 1;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ----------------------------------------------------------------------------------- holds */

typedef struct {
  zkl_lock *lock;
  uint64_t owner;
  const char *path;
  char mode; /* 'x', 'r', 'w' */
  int64_t token;
  /* under state_mu */
  bool begun, ended, lost_signalled, lost_sent;
  const char *lost_reason;
} hold_t;

/* Sends LOST once the hold has begun and is known lost, at most once and never after END.
 * Called with state_mu held. */
static void report_lost_locked(hold_t *h) {
  if (!h->lost_signalled || !h->begun || h->ended || h->lost_sent) return;
  h->lost_sent = true;
  char reply[64];
  request(reply, sizeof reply, "LOST %s %" PRId64 " %s", h->path, h->token, h->lost_reason);
}

static void on_lost(void *userdata, zkl_lock *lock, uint64_t owner, zkl_lost_reason reason) {
  hold_t *h = userdata;
  (void)lock;
  pthread_mutex_lock(&state_mu);
  if (owner == h->owner && !h->lost_signalled) {
    h->lost_signalled = true;
    h->lost_reason = lost_reason_word(reason);
    report_lost_locked(h);
  }
  pthread_mutex_unlock(&state_mu);
}

/* Whether the hold is known lost (the callback fired, or its state says so); reports it. The
 * hold state seen goes to *seen if given. */
static bool check_lost(hold_t *h, zkl_hold_state *seen) {
  zkl_hold_state state = ZKL_HOLD_HELD;
  int rc = zkl_lock_state_as(h->lock, h->owner, &state);
  if (seen) *seen = state;
  pthread_mutex_lock(&state_mu);
  if (!h->lost_signalled && (rc != ZKL_OK || state == ZKL_HOLD_LOST || state == ZKL_HOLD_NONE)) {
    h->lost_signalled = true;
    h->lost_reason = "state_lost";
  }
  report_lost_locked(h);
  bool lost = h->lost_signalled;
  pthread_mutex_unlock(&state_mu);
  return lost;
}

/* ------------------------------------------------------------------ cancel-branch attempts */

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  zkl_lock *lock;
  uint64_t owner;
  bool done, abandoned;
  int rc;
} attempt_t;

static void *attempt_main(void *arg) {
  attempt_t *a = arg;
  int rc = zkl_lock_acquire_as(a->lock, a->owner, CANCEL_WORKER_TIMEOUT_MS);
  pthread_mutex_lock(&a->mu);
  a->done = true;
  a->rc = rc;
  bool abandoned = a->abandoned;
  pthread_cond_broadcast(&a->cv);
  pthread_mutex_unlock(&a->mu);
  if (abandoned) { /* the main loop gave up on it and freed its lock handle; nobody waits */
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
  }
  return NULL;
}

/* Acquires on a worker thread and gives up after delay_ms (or on SIGTERM) by freeing the lock
 * handle. Returns the acquisition's result, or -1 if cancelled (then *lock is freed and NULL). */
static int acquire_with_cancel(zkl_lock **lock, uint64_t owner, int64_t delay_ms) {
  attempt_t *a = calloc(1, sizeof *a);
  if (!a) die("out of memory");
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&a->cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_mutex_init(&a->mu, NULL);
  a->lock = *lock;
  a->owner = owner;
  pthread_t worker;
  if (pthread_create(&worker, NULL, attempt_main, a) != 0) die("pthread_create failed");
  pthread_detach(worker);
  struct timespec until = deadline_after_ms(delay_ms);
  pthread_mutex_lock(&a->mu);
  /* Short slices, so that SIGTERM (which wakes stop_cv, not this) is seen within 50 ms. */
  while (!a->done && !stopping()) {
    struct timespec slice = deadline_after_ms(50);
    bool last = slice.tv_sec > until.tv_sec || (slice.tv_sec == until.tv_sec && slice.tv_nsec >= until.tv_nsec);
    if (pthread_cond_timedwait(&a->cv, &a->mu, last ? &until : &slice) == ETIMEDOUT && last) break;
  }
  if (a->done) {
    int rc = a->rc;
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
    pthread_cond_destroy(&a->cv);
    free(a);
    return rc;
  }
  a->abandoned = true; /* the worker frees the attempt when its acquisition returns */
  pthread_mutex_unlock(&a->mu);
  /* The cancel: the waiting acquisition gives back the hold it gets (no node is left behind). */
  zkl_lock_free(*lock);
  *lock = NULL;
  return -1;
}

/* ------------------------------------------------------------------------------------ loop */

static void *signal_main(void *arg) {
  sigset_t *set = arg;
  int sig;
  while (sigwait(set, &sig) == 0) {
    if (sig == SIGTERM || sig == SIGINT) {
      pthread_mutex_lock(&stop_mu);
      stop = true;
      pthread_cond_broadcast(&stop_cv);
      pthread_mutex_unlock(&stop_mu);
    }
  }
  return NULL;
}

static uint64_t next_owner = 1;

/* One iteration of the protocol (steps 1-5). */
static void iteration(zkl_client *client) {
  /* 1. the target */
  int64_t pick = uniform(0, 99);
  char mode = pick < 50 ? 'x' : pick < 75 ? 'r' : 'w';
  const char *path = mode == 'x' ? MUTEX_PATH : RW_PATH;
  zkl_lock *lock = NULL, *other = NULL; /* other: the unused side of a read/write lock */
  int rc;
  if (mode == 'x') {
    rc = zkl_lock_new(client, path, &lock);
  } else {
    zkl_lock *read = NULL, *write = NULL;
    rc = zkl_rwlock_new(client, path, &read, &write);
    lock = mode == 'r' ? read : write;
    other = mode == 'r' ? write : read;
  }
  if (rc != ZKL_OK) {
    request(NULL, 0, "ERROR %s", result_kind(rc));
    nap(100);
    return;
  }
  hold_t h = {.lock = lock, .owner = next_owner++, .path = path, .mode = mode};
  zkl_lock_set_lost_callback(lock, on_lost, &h);

  /* 2-3. the wait */
  int64_t how = uniform(0, 99);
  const char *outcome;
  char kind[64];
  int64_t started = now_ms();
  if (how < 70) {
    rc = zkl_lock_acquire_as(lock, h.owner, uniform(200, 3000));
    outcome = rc == ZKL_TIMEOUT ? "timeout" : NULL;
  } else if (how < 85) {
    rc = acquire_with_cancel(&h.lock, h.owner, uniform(0, 1000));
    lock = h.lock;
    outcome = rc == -1 ? "cancelled" : rc == ZKL_TIMEOUT ? "timeout" : NULL;
  } else {
    rc = zkl_lock_acquire_as(lock, h.owner, 0);
    outcome = rc == ZKL_TIMEOUT ? "busy" : NULL;
  }
  int64_t waited = now_ms() - started;
  if (!outcome) {
    if (rc == ZKL_OK) {
      outcome = "held";
    } else {
      snprintf(kind, sizeof kind, "error:%s", result_kind(rc));
      outcome = kind;
    }
  }
  request(NULL, 0, "WAIT %s %c %" PRId64 " %s", path, mode, waited, outcome);

  if (rc == ZKL_OK) {
    /* 4. the hold */
    rc = zkl_lock_fencing_token_as(lock, h.owner, &h.token);
    if (rc != ZKL_OK) {
      request(NULL, 0, "ERROR %s", result_kind(rc));
      nap(100);
    } else {
      char reply[64];
      pthread_mutex_lock(&state_mu);
      request(reply, sizeof reply, "BEGIN %s %c %" PRId64 " c %s", path, mode, h.token, name);
      int64_t pinned_until = now_ms();
      h.begun = true;
      report_lost_locked(&h); /* lost before BEGIN was acknowledged */
      pthread_mutex_unlock(&state_mu);
      const char *verb = mode == 'r' ? "READ" : "WRITE";
      long long pin_ms = 0;
      if (sscanf(reply, "OK PIN %lld", &pin_ms) == 1 && pin_ms > 0) {
        /* Pinned: hold for pin_ms from the reply, one operation every 100 ms (the orchestrator
         * stalls or cuts this contender meanwhile). A loss is reported by on_lost even while
         * this loop sleeps. The state changes go to stderr, to show a short stall survived. */
        pinned_until += pin_ms;
        zkl_hold_state last = ZKL_HOLD_HELD, state;
        for (int64_t next_op = now_ms(); !stopping() && now_ms() < pinned_until;
             next_op += PINNED_OP_INTERVAL_MS) {
          if (check_lost(&h, &state)) break;
          if (state != last) {
            fprintf(stderr, "contender-c %s: pinned hold %s %" PRId64 ": %s\n", name, path, h.token,
                    hold_state_word(state));
            last = state;
          }
          request(reply, sizeof reply, "%s %s %" PRId64, verb, path, h.token);
          int64_t wake = next_op + PINNED_OP_INTERVAL_MS < pinned_until ? next_op + PINNED_OP_INTERVAL_MS : pinned_until;
          nap(wake - now_ms());
        }
      } else {
        int64_t ops = uniform(1, 3);
        for (int64_t i = 0; i < ops && !stopping(); i++) {
          if (check_lost(&h, NULL)) break;
          request(reply, sizeof reply, "%s %s %" PRId64, verb, path, h.token);
          nap(uniform(0, op_sleep_ms));
        }
      }
      check_lost(&h, NULL);
      pthread_mutex_lock(&state_mu);
      bool lost = h.lost_signalled;
      if (!lost) {
        h.ended = true;
        request(reply, sizeof reply, "END %s %" PRId64, path, h.token);
      }
      pthread_mutex_unlock(&state_mu);
      (void)lost;
    }
    /* After END (or LOST): give the lock back. A lost hold reports ZKL_LOCK_LOST here, which is
     * expected; END was sent already, so nothing more goes to the resource then. */
    rc = zkl_lock_release_as(lock, h.owner);
    pthread_mutex_lock(&state_mu);
    bool expected = rc == ZKL_OK || h.lost_signalled || rc == ZKL_LOCK_LOST;
    pthread_mutex_unlock(&state_mu);
    if (!expected) {
      request(NULL, 0, "ERROR %s", result_kind(rc));
      nap(100);
    }
  } else if (strncmp(outcome, "error:", 6) == 0) {
    nap(100);
  }
  /* Freeing unregisters the lost callback (it is not running once this returns), so h may go. */
  zkl_lock_free(lock);
  zkl_lock_free(other);
  /* 6. */
  nap(uniform(0, idle_ms));
}

int main(int argc, char **argv) {
  const char *zk = NULL, *resource = NULL, *sasl_digest = NULL;
  int64_t session_ms = 0;
  bool have_seed = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--curator-mutex-only") == 0) continue;
    if (i + 1 >= argc) die("%s needs a value", a);
    const char *v = argv[++i];
    if (strcmp(a, "--zk") == 0) zk = v;
    else if (strcmp(a, "--resource") == 0) resource = v;
    else if (strcmp(a, "--name") == 0) name = v;
    else if (strcmp(a, "--seed") == 0) rng_state = strtoull(v, NULL, 10), have_seed = true;
    else if (strcmp(a, "--session-timeout-ms") == 0) session_ms = strtoll(v, NULL, 10);
    else if (strcmp(a, "--op-sleep-ms") == 0) op_sleep_ms = strtoll(v, NULL, 10);
    else if (strcmp(a, "--idle-ms") == 0) idle_ms = strtoll(v, NULL, 10);
    else if (strcmp(a, "--sasl-digest") == 0) sasl_digest = v;
    else die("unknown argument %s", a);
  }
  if (!zk || !resource || !have_seed || session_ms <= 0 || op_sleep_ms < 0 || idle_ms < 0)
    die("usage: contender --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS"
        " [--op-sleep-ms N] [--idle-ms N] (N >= 0) [--sasl-digest USER:PASSWORD]");
  char *sasl_user = NULL;
  const char *sasl_password = NULL;
  if (sasl_digest) {
    const char *colon = strchr(sasl_digest, ':');
    if (!colon) die("--sasl-digest wants USER:PASSWORD");
    sasl_user = strndup(sasl_digest, (size_t)(colon - sasl_digest));
    if (!sasl_user) die("out of memory");
    sasl_password = colon + 1;
  }

  /* Signals go to the signal thread only: block them before any thread (zklock's too) starts. */
  static sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&stop_cv, &attr);
  pthread_condattr_destroy(&attr);
  pthread_t signal_thread;
  if (pthread_create(&signal_thread, NULL, signal_main, &set) != 0) die("pthread_create failed");
  pthread_detach(signal_thread);

  connect_resource(resource);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.session_timeout_ms = session_ms;
  opts.connect_timeout_ms = session_ms;
  if (sasl_user) {
    opts.sasl_mechanism = "DIGEST-MD5";
    opts.sasl_username = sasl_user;
    opts.sasl_password = sasl_password;
  }
  zkl_client *client = NULL;
  while (!stopping()) {
    int rc = zkl_client_connect(zk, &opts, &client);
    if (rc == ZKL_OK) break;
    if (rc == ZKL_INVALID_ARGUMENT) die("%s", zkl_last_error_message());
    request(NULL, 0, "ERROR %s", result_kind(rc));
    nap(100);
  }
  while (client && !stopping()) iteration(client);
  /* Ends the session: the server deletes this client's nodes at once. */
  zkl_client_close(client);
  free(sasl_user);
  pthread_mutex_lock(&sock_mu);
  close(sock);
  return 0;
}
