/* A seeded, time-bounded random driver of every zkl_* entry point: sequences of calls with NULL,
 * forged, wrong-kind, closed and freed handles, malformed, huge and non-UTF-8 paths and connect
 * strings, bad options, timeouts and owner ids, mixed with valid calls on live clients and locks
 * (against ZK_CONNECT) so the bad input meets every state. Each result is checked against a model
 * of what the call must give: bad input is ZKL_INVALID_ARGUMENT with a message "zkl_fn: ..."
 * naming what was wrong; valid calls give the code their state calls for (a release by a
 * non-holder is ZKL_NOT_OWNER, a re-entry is ZKL_OK at once, ...). ZKL_PANIC or a code outside
 * the enum is always a failure. Build with -fsanitize=address,undefined (or run under valgrind)
 * to catch memory errors and leaks: every handle and list is freed before exit.
 *
 *   fuzz_abi [SECONDS [SEED]]     (or FUZZ_SECONDS, FUZZ_SEED; defaults 10 s, seed from the clock)
 *
 * Prints the seed first, then per function the calls made and the codes seen, and last
 * "fuzz_abi: N calls, N failed" and "ok" (exit 0) or "not ok" (exit 1). A failure prints the
 * seed and call number; the same seed replays the same sequence (single-threaded, so only the
 * server's timing can differ). ZK_CONNECT unset: only the calls that need no server. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zklock.h>

/* ------------------------------------------------------------------ randomness */

static uint64_t rng;

static uint64_t rnd(void) { /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1DULL;
}
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }
static bool chance(int percent) { return (int)below(100) < percent; }

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ bookkeeping */

/* The lock options with an ACL. */
#define ACL_FUNCTIONS(X) X(lock_options_init) X(lock_new_with) X(rwlock_new_with)
/* The semaphore and the multi-lock (their own model, below `call_sem_family`). */
#define SEM_FUNCTIONS(X)                                                                                        \
  X(semaphore_options_init) X(semaphore_new) X(semaphore_new_with) X(semaphore_acquire) X(semaphore_cancel)     \
  X(semaphore_max_leases) X(semaphore_set_shared_count) X(semaphore_set_lost_callback) X(semaphore_free)        \
  X(semaphore_participants) X(semaphore_listing_free) X(leases_count) X(leases_fencing_token)                   \
  X(leases_node_name) X(leases_state) X(leases_combined_state) X(leases_lost_lease) X(leases_release)           \
  X(leases_free) X(multi_lock_new)                                                                              \
  X(multi_lock_member_count) X(multi_lock_member) X(multi_lock_acquire) X(multi_lock_acquire_as)                \
  X(multi_lock_cancel) X(multi_lock_set_lost_callback) X(multi_lock_free) X(multi_guard_state)                  \
  X(multi_guard_lost_member) X(multi_guard_fencing_token) X(multi_guard_release) X(multi_guard_free)
#define FUNCTIONS(X)                                                                                      \
  X(options_init) X(client_connect) X(client_close) X(client_state) X(client_session_id)                  \
  X(client_set_state_callback) X(result_str) X(last_error_message) X(last_error_zookeeper_code) X(version) \
  X(lock_new) X(rwlock_new) X(lock_free) X(lock_acquire) X(lock_acquire_as) X(lock_release)               \
  X(lock_release_as) X(lock_is_held) X(lock_is_held_as) X(lock_state) X(lock_state_as)                    \
  X(lock_fencing_token) X(lock_fencing_token_as) X(lock_sequence) X(lock_sequence_as)                     \
  X(lock_set_lost_callback) X(thread_owner) X(lock_contenders) X(lock_holder) X(lock_holders)             \
  X(participants_free) ACL_FUNCTIONS(X) SEM_FUNCTIONS(X)
#define AS_ENUM(name) F_##name,
#define AS_NAME(name) "zkl_" #name,
enum { FUNCTIONS(AS_ENUM) F_COUNT };
static const char *fn_name[F_COUNT] = {FUNCTIONS(AS_NAME)};

/* The codes the library knows, found at start: zkl_result_str names every one from 0 up (codes
 * added after ZKL_DEADLOCK are fuzzed without a change here). */
#define MAX_CODES 32
static int CODES = ZKL_DEADLOCK + 1;
static long calls[F_COUNT], codes[F_COUNT][MAX_CODES + 1], bad_inputs[F_COUNT];
static long total_calls, failures;
static uint64_t seed;
static bool trace; /* FUZZ_TRACE=1: print the model's view of some calls */

static const char *code_name(int rc) {
  static const char *names[] = {"ZKL_OK", "ZKL_TIMEOUT", "ZKL_NOT_OWNER", "ZKL_SESSION_EXPIRED",
                                "ZKL_LOCK_LOST", "ZKL_CONNECTION_LOSS", "ZKL_AUTH_FAILED", "ZKL_CLOSED",
                                "ZKL_INVALID_ARGUMENT", "ZKL_ZOOKEEPER", "ZKL_PANIC", "ZKL_DEADLOCK"};
  if (rc >= 0 && rc <= ZKL_DEADLOCK) return names[rc];
  return rc >= 0 && rc < CODES ? zkl_result_str(rc) : "(not a zkl_result)";
}

/* Failures are all counted; the first 50 printed. The run goes on to its deadline (stopping
 * after 1000), so one finding does not hide the others. */
static void fail(const char *fmt, ...) {
  if (++failures > 50) return;
  printf("not ok - fuzz_abi (seed %" PRIu64 ", call %ld): ", seed, total_calls);
  va_list args;
  va_start(args, fmt);
  vprintf(fmt, args);
  va_end(args);
  printf("\n");
  fflush(stdout);
}

#define BIT(code) (1u << (code))
#define MAX_NEEDLES 8

/* What a call must give: `allowed` codes; if any `needles` are given (bad input), exactly
 * ZKL_INVALID_ARGUMENT with a message naming one of them. */
typedef struct {
  unsigned allowed;
  const char *needles[MAX_NEEDLES];
  int n;
} expect;

static void bad(expect *e, const char *needle) {
  if (e->n < MAX_NEEDLES) e->needles[e->n++] = needle;
}

/* Checks rc and the thread's last message against e; counts the call. */
static void check(int f, int rc, const expect *e, const char *what) {
  calls[f]++;
  total_calls++;
  codes[f][rc >= 0 && rc < CODES ? rc : CODES]++;
  if (e->n) bad_inputs[f]++;
  if (rc < 0 || rc >= CODES || rc == ZKL_PANIC) {
    fail("%s(%s) returned %d %s: \"%s\"", fn_name[f], what, rc, code_name(rc), zkl_last_error_message());
    return;
  }
  if (rc != ZKL_OK) {
    const char *message = zkl_last_error_message();
    size_t len = strlen(fn_name[f]);
    if (strncmp(message, fn_name[f], len) != 0 || strncmp(message + len, ": ", 2) != 0 || strlen(message) < len + 8)
      fail("%s(%s) returned %s with the message \"%s\": it must start \"%s: \" and say what happened", fn_name[f],
           what, code_name(rc), message, fn_name[f]);
    if (rc != ZKL_ZOOKEEPER && zkl_last_error_zookeeper_code() != 0)
      fail("%s(%s): %s with ZooKeeper code %d", fn_name[f], what, code_name(rc), zkl_last_error_zookeeper_code());
  }
  if (e->n) {
    bool named = false;
    for (int i = 0; i < e->n && rc == ZKL_INVALID_ARGUMENT; i++) named |= strstr(zkl_last_error_message(), e->needles[i]) != NULL;
    if (!named) {
      fail("%s(%s) returned %s (\"%s\"); bad input must be ZKL_INVALID_ARGUMENT naming e.g. \"%s\"", fn_name[f], what,
           code_name(rc), rc ? zkl_last_error_message() : "", e->needles[0]);
    }
    return;
  }
  if (!(e->allowed & BIT(rc)))
    fail("%s(%s) returned %s (\"%s\"), not one of the codes its state allows (mask %#x)", fn_name[f], what,
         code_name(rc), rc ? zkl_last_error_message() : "", e->allowed);
}

/* ------------------------------------------------------------------ the model */

/* Handle ids are multiples of 16 handed out in order (core/src/ffi/handles.rs): every value the
 * library gave us is recorded here, so any other value is one it never gave. */
enum {
  UNKNOWN, LIVE_CLIENT, CLOSED_CLIENT, LIVE_LOCK, FREED_LOCK,
  LIVE_SEM, FREED_SEM, LIVE_LEASES, FREED_LEASES, LIVE_MULTI, FREED_MULTI, LIVE_GUARD, FREED_GUARD
};
#define ID_SLOTS (1u << 24)
static unsigned char id_state[ID_SLOTS];

static int state_of(const void *handle) {
  uintptr_t v = (uintptr_t)handle;
  if (v % 16 || v / 16 >= ID_SLOTS) return UNKNOWN;
  return id_state[v / 16];
}
static void set_state(const void *handle, int state) {
  uintptr_t v = (uintptr_t)handle;
  if (v % 16 || v / 16 >= ID_SLOTS) {
    fail("handle %#" PRIxPTR " is not a multiple of 16 below %u*16: the fuzzer cannot track it", v, ID_SLOTS);
    return;
  }
  id_state[v / 16] = (unsigned char)state;
}

#define MAX_CLIENTS 4
#define MAX_LOCKS 24
#define MAX_PATHS 16
#define OWNERS 4 /* 0: the calling thread; 1..3: explicit ids */
static uint64_t owner_id[OWNERS];

typedef struct {
  zkl_client *handle;
} client_slot;

enum { MUTEX, READ, WRITE };
typedef struct {
  zkl_lock *handle;
  int client; /* index in clients[] */
  int path;   /* index in paths[] */
  int kind;
  int partner; /* the other side of a read/write pair, or -1 */
  bool client_closed;
  long count[OWNERS];
  /* The owner's read is on its own write node (taken while holding the write side): to other
   * contenders it is a writer. */
} lock_slot;

typedef struct {
  char text[160];
  bool rw;             /* made for read/write locks (else mutexes) */
  bool mixed;          /* both recipes have had locks on it */
  int64_t dirty_until; /* holds are being released in the background until then */
} path_slot;

static client_slot clients[MAX_CLIENTS];
static int n_clients;
static lock_slot locks[MAX_LOCKS];
static int n_locks;
static path_slot paths[MAX_PATHS];
static int n_paths;
static const char *zk_connect;
static char base[100];
static atomic_long lost_callbacks, state_callbacks, callback_problems;

static void add_client(zkl_client *handle) {
  set_state(handle, LIVE_CLIENT);
  clients[n_clients++].handle = handle;
}

static void drop_lock(int i) {
  locks[i] = locks[--n_locks];
  for (int j = 0; j < n_locks; j++) {
    if (locks[j].partner == i) locks[j].partner = -1;
    if (locks[j].partner == n_locks) locks[j].partner = i;
  }
}

static int add_lock(zkl_lock *handle, int client, int path, int kind) {
  set_state(handle, LIVE_LOCK);
  lock_slot *l = &locks[n_locks];
  memset(l, 0, sizeof *l);
  l->handle = handle, l->client = client, l->path = path, l->kind = kind, l->partner = -1;
  if ((kind == MUTEX) == paths[path].rw) paths[path].mixed = true;
  return n_locks++;
}

/* Whether anyone other than (lock i, owner o) holds on lock i's path in a way that keeps o out. */
static bool others_hold(int i, int o) {
  int path = locks[i].path;
  for (int j = 0; j < n_locks; j++) {
    if (locks[j].path != path || locks[j].client_closed) continue;
    for (int k = 0; k < OWNERS; k++) {
      if (!locks[j].count[k] || (j == i && k == o)) continue;
      /* Readers share (a downgrade's read too: a read node of its own). */
      if (locks[i].kind == READ && locks[j].kind == READ) continue;
      if (locks[i].kind == READ && j == locks[i].partner && k == o) continue;
      return true;
    }
  }
  return false;
}

/* Whether owner o holds lock i's path through another handle of the same client (each
 * zkl_lock_new is a table of its own; the two sides of a read/write pair share one), of the same
 * family (mutex, or read/write), in a way an acquisition through i would queue behind (anything
 * but two reads): core refuses that acquisition as a deadlock, at once. */
static bool holds_elsewhere(int i, int o) {
  for (int j = 0; j < n_locks; j++) {
    if (j == i || j == locks[i].partner || locks[j].path != locks[i].path || locks[j].client != locks[i].client) continue;
    if (locks[j].client_closed || !locks[j].count[o]) continue;
    if ((locks[j].kind == MUTEX) != (locks[i].kind == MUTEX)) continue;
    if (locks[i].kind == READ && locks[j].kind == READ) continue;
    return true;
  }
  return false;
}

/* ------------------------------------------------------------------ argument generators */

/* The C type of a live handle's state, or NULL. */
static const char *live_kind(int state) {
  switch (state) {
    case LIVE_CLIENT: return "zkl_client";
    case LIVE_LOCK: return "zkl_lock";
    case LIVE_SEM: return "zkl_semaphore";
    case LIVE_LEASES: return "zkl_leases";
    case LIVE_MULTI: return "zkl_multi_lock";
    case LIVE_GUARD: return "zkl_multi_guard";
    default: return NULL;
  }
}

/* A handle in `state` passed where a `want` is expected: a live one of another kind is named as
 * such, anything else is no live `want`. */
static void wrong_handle(expect *e, int state, const char *want) {
  static char needles[16][80];
  static int next;
  char *needle = needles[next++ % 16];
  const char *kind = live_kind(state);
  if (kind) snprintf(needle, sizeof needles[0], "is a %s, not a %s", kind, want);
  else snprintf(needle, sizeof needles[0], "not a live %s", want);
  bad(e, needle);
}

static const char *owner_needle = "neither an explicit id";

/* A client argument for a function, recording what its use must give. */
static zkl_client *client_arg(expect *e, int *live_index, bool null_allowed_as_noop) {
  *live_index = -1;
  int r = (int)below(100);
  if (n_clients && r < 60) {
    *live_index = (int)below(n_clients);
    return clients[*live_index].handle;
  }
  if (r < 68) {
    if (!null_allowed_as_noop) bad(e, "client is NULL");
    return NULL;
  }
  uintptr_t v;
  if (r < 80 && n_locks) v = (uintptr_t)locks[below(n_locks)].handle;              /* a live lock */
  else if (r < 88) v = (uintptr_t)(16 * (1 + below(ID_SLOTS - 2)));                 /* any id, maybe dead */
  else if (r < 94) v = (uintptr_t)rnd();                                             /* anything */
  else v = (uintptr_t)(16 * (1 + below(ID_SLOTS - 2)) + 1 + below(15));              /* misaligned */
  switch (state_of((void *)v)) {
    case LIVE_CLIENT:
      for (int i = 0; i < n_clients; i++)
        if ((uintptr_t)clients[i].handle == v) *live_index = i;
      break;
    default: wrong_handle(e, state_of((void *)v), "zkl_client"); break;
  }
  return (zkl_client *)v;
}

static zkl_lock *lock_arg(expect *e, int *live_index, bool null_allowed_as_noop) {
  *live_index = -1;
  int r = (int)below(100);
  if (n_locks && r < 70) {
    *live_index = (int)below(n_locks);
    return locks[*live_index].handle;
  }
  if (r < 77) {
    if (!null_allowed_as_noop) bad(e, "lock is NULL");
    return NULL;
  }
  uintptr_t v;
  if (r < 84 && n_clients) v = (uintptr_t)clients[below(n_clients)].handle;
  else if (r < 92) v = (uintptr_t)(16 * (1 + below(ID_SLOTS - 2)));
  else if (r < 96) v = (uintptr_t)rnd();
  else v = (uintptr_t)(16 * (1 + below(ID_SLOTS - 2)) + 1 + below(15));
  switch (state_of((void *)v)) {
    case LIVE_LOCK:
      for (int i = 0; i < n_locks; i++)
        if ((uintptr_t)locks[i].handle == v) *live_index = i;
      break;
    default: wrong_handle(e, state_of((void *)v), "zkl_lock"); break;
  }
  return (zkl_lock *)v;
}

/* An owner id for an _as function: *model is its index in owner_id[], or -1 for an owner that
 * holds nothing (a fresh explicit id) or -2 for a bad id. */
static uint64_t owner_arg(expect *e, int *model) {
  int r = (int)below(100);
  if (r < 70) {
    *model = (int)below(OWNERS);
    return owner_id[*model];
  }
  if (r < 85) {
    *model = -1;
    uint64_t id;
    do id = rnd() >> 1;
    while (id == owner_id[1] || id == owner_id[2] || id == owner_id[3]);
    return id;
  }
  *model = -2;
  bad(e, owner_needle);
  switch (below(3)) {
    case 0: return UINT64_MAX - below(1000);
    case 1: return 1ULL << 63; /* the base itself is never handed out */
    default: return (1ULL << 63) + (1ULL << 40) + below(1ULL << 40);
  }
}

/* A timeout; *may_wait for one that waits long (the caller uses it only where the call returns at once). */
static int64_t timeout_arg(expect *e, bool *may_wait) {
  *may_wait = false;
  switch (below(10)) {
    case 0: bad(e, "timeout_ms is"); return -2 - (int64_t)below(1000);
    case 1: bad(e, "timeout_ms is"); return INT64_MIN + (int64_t)below(10);
    case 2: *may_wait = true; return -1;
    case 3: *may_wait = true; return INT64_MAX - (int64_t)below(10);
    case 4: case 5: case 6: return 0;
    default: return 1 + (int64_t)below(20);
  }
}

/* Appends a random byte string (may hold invalid UTF-8, never NUL) of up to max bytes. */
static size_t random_bytes(char *out, size_t max) {
  size_t n = below(max + 1);
  static const char alphabet[] = "/._-:,[]@ az09\x01\x1f\x7f";
  for (size_t i = 0; i < n; i++) {
    switch (below(4)) {
      case 0: out[i] = (char)(1 + below(255)); break;
      default: out[i] = alphabet[below(sizeof alphabet - 1)]; break;
    }
  }
  out[n] = '\0';
  return n;
}

/* A path for zkl_lock_new / zkl_rwlock_new: *path_index is set for one that must be accepted,
 * -1 for one that must be refused (with its needle in e), -2 for random bytes (either). */
/* Room for the huge paths (the base, up to 2 MiB - 1 of one letter, NUL): found by ASan once. */
static char path_buf[(1 << 21) + 256];
static const char *path_needles[] = {"is empty", "is relative", "is the root", "ends with '/'", "empty segment",
                                     "relative segment", "invalid character", "under /zookeeper", "not valid UTF-8",
                                     "packet limit", NULL};

static const char *path_arg(expect *e, int *path_index, bool rw) {
  *path_index = -1;
  int r = (int)below(100);
  if (r < 45) {
    /* One of the fuzz paths, mostly of the same recipe (sometimes the other: a conflict). */
    int want_rw = chance(90) ? rw : !rw, candidates[MAX_PATHS], n = 0;
    for (int i = 0; i < n_paths; i++)
      if (paths[i].rw == want_rw) candidates[n++] = i;
    if (n == 0 || (n_paths < MAX_PATHS && chance(20))) {
      path_slot *p = &paths[n_paths];
      snprintf(p->text, sizeof p->text, "%s/%s%d-\xc3\xbc", base, want_rw ? "rw" : "m", n_paths);
      p->rw = want_rw;
      *path_index = n_paths++;
    } else {
      *path_index = candidates[below(n)];
    }
    return paths[*path_index].text;
  }
  if (r < 50) {
    bad(e, "path is NULL");
    return NULL;
  }
  char *p = path_buf;
  switch (below(12)) {
    case 0: bad(e, "lock path is empty"); return "";
    case 1: bad(e, "is relative"); snprintf(p, 64, "relative/%d", (int)below(100)); return p;
    case 2: bad(e, "is the root"); return "/";
    case 3: bad(e, "ends with '/'"); snprintf(p, 256, "%s/x/", base); return p;
    case 4: bad(e, "empty segment"); snprintf(p, 256, "%s//x", base); return p;
    case 5: bad(e, "relative segment"); snprintf(p, 256, "%s/%s/x", base, chance(50) ? "." : ".."); return p;
    case 6: bad(e, "invalid character U+"); snprintf(p, 256, "%s/a%cb", base, (char)(1 + below(31))); return p;
    case 7: bad(e, "under /zookeeper"); snprintf(p, 64, "/zookeeper%s", chance(50) ? "" : "/quota"); return p;
    case 8: bad(e, "not valid UTF-8"); snprintf(p, 256, "%s/bad-%c%c", base, (char)(0x80 + below(0x40)), (char)0xff); return p;
    case 9: { /* huge: over the packet limit (1 MiB by default) */
      size_t n = (1 << 20) + below(1 << 20);
      int len = snprintf(p, 256, "%s/", base);
      memset(p + len, 'a' + (int)below(26), n);
      p[len + n] = '\0';
      bad(e, "packet limit");
      return p;
    }
    default: { /* random bytes, under the base or alone */
      size_t len = chance(50) ? (size_t)snprintf(p, 256, "%s/", base) : 0;
      random_bytes(p + len, 48);
      *path_index = -2;
      return p;
    }
  }
}

/* ------------------------------------------------------------------ callbacks */

static void on_lost(void *userdata, zkl_lock *lock, uint64_t owner, zkl_lost_reason reason) {
  (void)owner;
  atomic_fetch_add(&lost_callbacks, 1);
  bool held = true;
  /* Cheap calls are allowed inside callbacks; the hold is lost, so not held. */
  if ((uintptr_t)userdata != 0x5ca1ab1e || reason < ZKL_LOST_SESSION_EXPIRED || reason > ZKL_LOST_AUTH_FAILED ||
      ((uintptr_t)lock % 16) != 0)
    atomic_fetch_add(&callback_problems, 1);
  if (zkl_lock_is_held_as(lock, owner, &held) == ZKL_OK && held) atomic_fetch_add(&callback_problems, 1);
}

static void on_state(void *userdata, zkl_client *client, zkl_session_state state) {
  (void)client;
  atomic_fetch_add(&state_callbacks, 1);
  if ((uintptr_t)userdata != 0xc0ffee || state < ZKL_SESSION_STATE_CONNECTED || state > ZKL_SESSION_STATE_CLOSED)
    atomic_fetch_add(&callback_problems, 1);
}

/* ------------------------------------------------------------------ one call of each function */

static void check_list(zkl_participants *list, int f) {
  if (list == NULL) {
    fail("%s: ZKL_OK without a list", fn_name[f]);
    return;
  }
  for (size_t i = 0; i < list->count; i++) {
    const zkl_participant *p = &list->items[i];
    if (p->node == NULL || p->node[0] == '\0' || (p->data_len && p->data == NULL) ||
        (p->mode && strcmp(p->mode, "exclusive") && strcmp(p->mode, "read") && strcmp(p->mode, "write")) ||
        (p->host == NULL && (p->owner || p->lang || p->pid)))
      fail("%s: participant %zu is malformed (node %s)", fn_name[f], i, p->node ? p->node : "(null)");
  }
  zkl_participants_free(list);
}

static void call_connect(void) {
  expect e = {0};
  char hosts_buf[256];
  const char *hosts = hosts_buf;
  bool live = false, nonexistent_chroot = false, random_hosts = false;
  switch (below(8)) {
    case 0: hosts = NULL; bad(&e, "hosts is NULL"); break;
    case 1: strcpy(hosts_buf, ""); bad(&e, "connect string is empty"); break;
    case 2: snprintf(hosts_buf, sizeof hosts_buf, "127.0.0.1:%d", chance(50) ? 0 : 65536 + (int)below(100000)); bad(&e, "bad port"); break;
    case 3: strcpy(hosts_buf, "127.0.0.1:1,\xff\xfe"); bad(&e, "hosts is not valid UTF-8"); break;
    case 4: snprintf(hosts_buf, sizeof hosts_buf, "127.0.0.1:2181/%s", chance(50) ? "zookeeper" : "a//b"); bad(&e, "connect string"); break;
    case 5: random_bytes(hosts_buf, 40); random_hosts = true; break;
    default:
      if (zk_connect && n_clients < MAX_CLIENTS && chance(60)) {
        nonexistent_chroot = chance(20);
        snprintf(hosts_buf, sizeof hosts_buf, "%s%s", zk_connect, nonexistent_chroot ? "/zklock-fuzz-no-such-chroot" : "");
        live = !nonexistent_chroot;
      } else {
        strcpy(hosts_buf, "127.0.0.1:1"); /* nothing listens there */
      }
  }
  zkl_options opts, *o = &opts;
  zkl_options_init(&opts);
  /* Short, so that a connect string that passes the checks times out fast where no server is. */
  opts.connect_timeout_ms = live || nonexistent_chroot ? 10000 : 1 + (int64_t)below(40);
  switch (below(17)) {
    case 0: if (live || nonexistent_chroot) o = NULL; break; /* NULL: the defaults (a 10 s connect timeout) */
    case 1: opts.session_timeout_ms = -1 - (int64_t)below(1000); bad(&e, "opts->session_timeout_ms is"); break;
    case 2: opts.connect_timeout_ms = INT64_MIN + (int64_t)below(3); bad(&e, "opts->connect_timeout_ms is"); break;
    case 3: opts.session_timeout_ms = (int64_t)INT32_MAX + 1 + (int64_t)below(INT64_MAX / 2); bad(&e, "out of range"); break;
    case 4: opts.jute_maxbuffer = 1 + (int64_t)below(1023); bad(&e, "jute_maxbuffer"); break;
    case 5: opts.jute_maxbuffer = chance(50) ? -1 - (int64_t)below(100) : (int64_t)UINT32_MAX + 1 + (int64_t)below(1000); bad(&e, "opts->jute_maxbuffer is"); break;
    case 6: opts.digest_auth = chance(50) ? "no-colon" : ""; bad(&e, "user:password"); break;
    case 7: opts.digest_auth = "user\xff:pass"; bad(&e, "opts->digest_auth is not valid UTF-8"); break;
    case 8: opts.digest_auth = "fuzz:secret"; break;
    case 9: opts.sasl_mechanism = chance(50) ? "PLAIN" : "digest-md5"; bad(&e, "opts->sasl_mechanism is"); break;
    case 10:
      opts.sasl_mechanism = chance(50) ? "DIGEST-MD5" : "GSSAPI";
      opts.sasl_username = "fuzz"; /* DIGEST-MD5 without its password; GSSAPI with a user it does not take */
      bad(&e, "DIGEST-MD5 needs"), bad(&e, "GSSAPI takes no");
      break;
    case 11: opts.tls = chance(50) ? 4 + (int32_t)below(1000) : -1 - (int32_t)below(1000); bad(&e, "opts->tls is"); break;
    case 12:
      opts.tls_ca_file = "/zklock-fuzz/no-such-ca.pem";
      if (chance(50)) opts.tls = ZKL_TLS_VERIFY_FULL, bad(&e, "cannot read the CA bundle /zklock-fuzz/no-such-ca.pem");
      else bad(&e, "opts->tls is ZKL_TLS_OFF but a tls_ field is set");
      break;
    case 13:
      opts.tls = chance(50) ? ZKL_TLS_VERIFY_FULL : ZKL_TLS_VERIFY_CA;
      if (chance(50)) opts.tls_key_password = "fuzz-password";
      bad(&e, "opts->tls_ca_file is NULL");
      break;
    default: break;
  }
  zkl_client *out = (zkl_client *)(uintptr_t)0xdead0;
  zkl_client **outp = &out;
  if (chance(8)) outp = NULL, bad(&e, "out is NULL");
  if (e.n && random_hosts) bad(&e, "connect string"), bad(&e, "hosts is not valid UTF-8");
  /* Random bytes: refused as a connect string, or no server there in time. */
  if (e.n == 0) e.allowed = live ? BIT(ZKL_OK) : nonexistent_chroot ? BIT(ZKL_ZOOKEEPER) : BIT(ZKL_TIMEOUT);
  if (e.n == 0 && random_hosts) e.allowed |= BIT(ZKL_INVALID_ARGUMENT);
  int rc = zkl_client_connect(hosts, o, outp);
  if (rc == ZKL_INVALID_ARGUMENT && e.n == 0 && !strstr(zkl_last_error_message(), "connect string") &&
      !strstr(zkl_last_error_message(), "hosts is not valid UTF-8"))
    fail("connect refused random hosts without naming why: \"%s\"", zkl_last_error_message());
  check(F_client_connect, rc, &e, hosts ? "hosts" : "NULL");
  if (rc == ZKL_ZOOKEEPER && zkl_last_error_zookeeper_code() != -101)
    fail("connect to a missing chroot: ZooKeeper code %d, expected -101 (NoNode)", zkl_last_error_zookeeper_code());
  if (rc == ZKL_OK) {
    if (outp == NULL || out == (zkl_client *)(uintptr_t)0xdead0 || state_of(out) != UNKNOWN) {
      fail("connect: ZKL_OK with out %p", (void *)out);
      return;
    }
    if (n_clients < MAX_CLIENTS) add_client(out);
    else zkl_client_close(out);
  } else if (out != (zkl_client *)(uintptr_t)0xdead0) {
    fail("connect failed with %s but wrote *out", code_name(rc));
  }
}

/* ------------------------------------------------------------------ the semaphore and the multi-lock */

/* Semaphores on paths of their own (a fixed max each, which every handle on the path uses), the
 * leases and guards taken, and how many leases the model knows held on each path. The server may
 * hold more for a while (a freed handle's leases are released in the background), never fewer:
 * so an acquisition that succeeds must fit in the model's count, or max was exceeded. */
#define MAX_SEM_PATHS 6
#define MAX_SEMS 8
#define MAX_LEASES 12
#define MAX_MULTIS 4
#define MAX_GUARDS 6
typedef struct {
  char text[160];
  int max, held;
} sem_path_slot;
typedef struct {
  zkl_semaphore *handle;
  zkl_client *client;
  int path;
  bool closed; /* its client was closed */
} sem_slot;
/* Leases, and a guard's members: on up to two semaphore paths of one client. */
typedef struct {
  void *handle;
  zkl_client *client;
  int count, path[2], n[2];
  bool closed, released;
} taken_slot;
static sem_path_slot sem_paths[MAX_SEM_PATHS];
static sem_slot sems[MAX_SEMS];
static taken_slot leases_slots[MAX_LEASES], multis[MAX_MULTIS], guards[MAX_GUARDS];
static int n_sem_paths, n_sems, n_leases, n_multis, n_guards;

static void on_lease_lost(void *userdata, zkl_leases *leases, size_t index, zkl_lost_reason reason) {
  atomic_fetch_add(&lost_callbacks, 1);
  if ((uintptr_t)userdata != 0x5ca1ab1e || reason < ZKL_LOST_SESSION_EXPIRED || reason > ZKL_LOST_AUTH_FAILED ||
      ((uintptr_t)leases % 16) != 0 || index > 3)
    atomic_fetch_add(&callback_problems, 1);
}

static void on_multi_lost(void *userdata, zkl_multi_guard *guard, size_t member, zkl_lost_reason reason) {
  atomic_fetch_add(&lost_callbacks, 1);
  if ((uintptr_t)userdata != 0x5ca1ab1e || reason < ZKL_LOST_SESSION_EXPIRED || reason > ZKL_LOST_AUTH_FAILED ||
      ((uintptr_t)guard % 16) != 0 || member > 1)
    atomic_fetch_add(&callback_problems, 1);
}

/* Any live handle (of any kind), or a forged id. */
static uintptr_t any_handle(void) {
  switch (below(7)) {
    case 0: if (n_clients) return (uintptr_t)clients[below(n_clients)].handle; break;
    case 1: if (n_locks) return (uintptr_t)locks[below(n_locks)].handle; break;
    case 2: if (n_sems) return (uintptr_t)sems[below(n_sems)].handle; break;
    case 3: if (n_leases) return (uintptr_t)leases_slots[below(n_leases)].handle; break;
    case 4: if (n_multis) return (uintptr_t)multis[below(n_multis)].handle; break;
    case 5: if (n_guards) return (uintptr_t)guards[below(n_guards)].handle; break;
    default: break;
  }
  uintptr_t v = chance(80) ? (uintptr_t)(16 * (1 + below(ID_SLOTS - 2))) : (uintptr_t)rnd();
  return v ? v : 16;
}

/* A handle argument of kind `state` (a LIVE_ one named `name`): mostly one of the n live ones
 * (`handles`, `stride` bytes apart: each slot's first field), else NULL, another kind or a forged
 * id, recording what its use must give. *index: the live one's, or -1. */
static void *handle_arg(expect *e, int state, const char *name, const char *null_needle, const void *handles,
                        size_t stride, int n, int *index, bool null_allowed_as_noop) {
  *index = -1;
  int r = (int)below(100);
  if (n && r < 75) {
    *index = (int)below(n);
    return *(void *const *)((const char *)handles + stride * (size_t)*index);
  }
  if (r < 82) {
    if (!null_allowed_as_noop) bad(e, null_needle);
    return NULL;
  }
  uintptr_t v = any_handle();
  if (state_of((void *)v) != state) {
    wrong_handle(e, state_of((void *)v), name);
    return (void *)v;
  }
  for (int i = 0; i < n; i++)
    if (*(void *const *)((const char *)handles + stride * (size_t)i) == (void *)v) *index = i;
  if (*index < 0) fail("the model lost a live %s", name);
  return (void *)v;
}

#define SEM_ARG(e, i, noop) \
  (zkl_semaphore *)handle_arg(e, LIVE_SEM, "zkl_semaphore", "semaphore is NULL", sems, sizeof sems[0], n_sems, i, noop)
#define LEASES_ARG(e, i, noop) \
  (zkl_leases *)handle_arg(e, LIVE_LEASES, "zkl_leases", "leases is NULL", leases_slots, sizeof leases_slots[0], n_leases, i, noop)
#define MULTI_ARG(e, i, noop) \
  (zkl_multi_lock *)handle_arg(e, LIVE_MULTI, "zkl_multi_lock", "multi is NULL", multis, sizeof multis[0], n_multis, i, noop)
#define GUARD_ARG(e, i, noop) \
  (zkl_multi_guard *)handle_arg(e, LIVE_GUARD, "zkl_multi_guard", "guard is NULL", guards, sizeof guards[0], n_guards, i, noop)

/* A timeout that never waits long: the fuzzer is one thread, so nobody would release meanwhile. */
static int64_t short_timeout_arg(expect *e) {
  bool may_wait;
  int64_t timeout = timeout_arg(e, &may_wait);
  return may_wait ? 0 : timeout;
}

/* The leases of a successful acquisition are counted held; more than max is the bug this hunts. */
static void count_taken(const taken_slot *t, const char *what) {
  for (int m = 0; m < t->count; m++) {
    sem_path_slot *p = &sem_paths[t->path[m]];
    if (p->held + t->n[m] > p->max)
      fail("%s: %d leases granted on %s where %d of max %d are held", what, t->n[m], p->text, p->held, p->max);
    p->held += t->n[m];
  }
}

/* What a taken slot holds goes: released, freed, or its client closed. */
static void uncount_taken(taken_slot *t) {
  if (t->released || t->closed) return;
  for (int m = 0; m < t->count; m++) sem_paths[t->path[m]].held -= t->n[m];
}

static void sem_family_client_closed(zkl_client *client) {
  for (int i = 0; i < n_sems; i++) sems[i].closed |= sems[i].client == client;
  taken_slot *lists[] = {leases_slots, multis, guards};
  int counts[] = {n_leases, n_multis, n_guards};
  for (int l = 0; l < 3; l++) {
    for (int i = 0; i < counts[l]; i++) {
      if (lists[l][i].client != client) continue;
      uncount_taken(&lists[l][i]);
      lists[l][i].closed = true;
    }
  }
}

static void call_semaphore_new(bool with) {
  int f = with ? F_semaphore_new_with : F_semaphore_new;
  expect e = {0};
  int c, p = -1;
  zkl_client *client = client_arg(&e, &c, false);
  const char *path = NULL;
  if (chance(85)) {
    if (n_sem_paths == 0 || (n_sem_paths < MAX_SEM_PATHS && chance(15))) {
      p = n_sem_paths++;
      snprintf(sem_paths[p].text, sizeof sem_paths[p].text, "%s/s%d", base, p);
      sem_paths[p].max = 1 + (int)below(3);
    } else {
      p = (int)below(n_sem_paths);
    }
    path = sem_paths[p].text;
  } else {
    switch (below(3)) {
      case 0: bad(&e, "path is NULL"); break;
      case 1: path = "relative"; bad(&e, "is relative"); break;
      default: path = "/zookeeper/s"; bad(&e, "under /zookeeper"); break;
    }
  }
  int max = p >= 0 ? sem_paths[p].max : 1;
  switch (below(10)) {
    case 0: max = 0; bad(&e, "at least 1, not 0"); break;
    case 1: max = -1 - (int)below(1000); bad(&e, "max_leases is"); break;
    default: break;
  }
  zkl_semaphore *out = (zkl_semaphore *)(uintptr_t)0xdead0, **outp = &out;
  if (chance(6)) outp = NULL, bad(&e, "out is NULL");
  e.allowed = BIT(ZKL_OK);
  int rc;
  if (with) {
    zkl_semaphore_options opts, *o = &opts;
    zkl_semaphore_options_init(&opts);
    opts.max_leases = max;
    switch (below(10)) {
      case 0: o = NULL; bad(&e, "opts is NULL"); break;
      case 1: opts.shared_count_path = "/zklock-fuzz-count"; opts.max_leases = max ? max : 1; bad(&e, "both set"); break;
      case 2: opts.shared_count_seed = 1 + (int)below(5); bad(&e, "shared_count_seed is only"); break;
      case 3: opts.identifier = "fuzz-\xff"; bad(&e, "opts->identifier is not valid UTF-8"); break;
      case 4: opts.max_leases = 0, opts.shared_count_path = "count", opts.shared_count_seed = 1; bad(&e, "shared count path"); break;
      case 5: opts.identifier = "fuzz-id"; break;
      case 6: opts.acl = 4 + (int)below(100); bad(&e, "it must be one of ZKL_ACL_*"); break;
      case 7: opts.acl_entry_count = 1 + below(3); bad(&e, "only for ZKL_ACL_CUSTOM"); break;
      default: break;
    }
    rc = zkl_semaphore_new_with(client, path, o, outp);
  } else {
    rc = zkl_semaphore_new(client, path, max, outp);
  }
  check(f, rc, &e, "semaphore");
  if (rc != ZKL_OK) {
    if (out != (zkl_semaphore *)(uintptr_t)0xdead0) fail("%s failed but wrote *out", fn_name[f]);
    return;
  }
  if (e.n) return;
  set_state(out, LIVE_SEM);
  if (n_sems < MAX_SEMS) {
    sems[n_sems++] = (sem_slot){.handle = out, .client = client, .path = p};
  } else {
    zkl_semaphore_free(out);
    set_state(out, FREED_SEM);
  }
}

static void call_semaphore_acquire(void) {
  expect e = {0};
  int i;
  zkl_semaphore *sem = SEM_ARG(&e, &i, false);
  int64_t timeout = short_timeout_arg(&e);
  int max = i >= 0 ? sem_paths[sems[i].path].max : 2, n;
  switch (below(10)) {
    case 0: n = 0; bad(&e, "not 0"); break;
    case 1: n = -1 - (int)below(100); bad(&e, "n is"); break;
    case 2: n = max + 1 + (int)below(3); bad(&e, "more than the semaphore's max"); break;
    default: n = 1 + (int)below(max);
  }
  zkl_leases *out = (zkl_leases *)(uintptr_t)0xdead0, **outp = &out;
  if (chance(6)) outp = NULL, bad(&e, "out is NULL");
  e.allowed = i >= 0 && sems[i].closed ? BIT(ZKL_CLOSED) : BIT(ZKL_OK) | BIT(ZKL_TIMEOUT);
  int rc = zkl_semaphore_acquire(sem, n, timeout, outp);
  check(F_semaphore_acquire, rc, &e, "semaphore");
  if (rc != ZKL_OK || e.n) return;
  taken_slot t = {.handle = out, .client = sems[i].client, .count = 1, .path = {sems[i].path}, .n = {n}};
  count_taken(&t, "zkl_semaphore_acquire");
  set_state(out, LIVE_LEASES);
  if (n_leases < MAX_LEASES) {
    leases_slots[n_leases++] = t;
  } else {
    zkl_leases_free(out);
    set_state(out, FREED_LEASES);
    uncount_taken(&t);
  }
}

static void call_semaphore_misc(int f) {
  expect e = {0};
  int i;
  zkl_semaphore *sem = SEM_ARG(&e, &i, f == F_semaphore_free);
  e.allowed = BIT(ZKL_OK);
  int rc;
  switch (f) {
    case F_semaphore_cancel: check(f, zkl_semaphore_cancel(sem), &e, "semaphore"); break;
    case F_semaphore_set_lost_callback:
      check(f, zkl_semaphore_set_lost_callback(sem, chance(70) ? on_lease_lost : NULL, (void *)(uintptr_t)0x5ca1ab1e), &e, "semaphore");
      break;
    case F_semaphore_max_leases: {
      int64_t max = -1;
      bool null_out = chance(8);
      if (null_out) bad(&e, "out is NULL");
      rc = zkl_semaphore_max_leases(sem, null_out ? NULL : &max);
      check(f, rc, &e, "semaphore");
      if (rc == ZKL_OK && e.n == 0 && max != sem_paths[sems[i].path].max) fail("zkl_semaphore_max_leases gave %" PRId64, max);
      break;
    }
    case F_semaphore_set_shared_count: {
      int max = chance(20) ? -(int)below(5) : 1 + (int)below(5);
      bad(&e, max < 1 ? "max is" : "fixed");
      check(f, zkl_semaphore_set_shared_count(sem, max), &e, "semaphore");
      break;
    }
    case F_semaphore_participants: {
      zkl_semaphore_listing *list = NULL;
      bool null_out = chance(8);
      if (null_out) bad(&e, "out is NULL");
      if (i >= 0 && sems[i].closed) e.allowed = BIT(ZKL_CLOSED);
      rc = zkl_semaphore_participants(sem, null_out ? NULL : &list);
      check(f, rc, &e, "semaphore");
      if (rc != ZKL_OK || e.n) break;
      const sem_path_slot *p = &sem_paths[sems[i].path];
      if (list == NULL || list->leases == NULL || list->queue == NULL || list->waiting_leases > list->leases->count ||
          (long)(list->leases->count - list->waiting_leases) > p->max || (long)list->leases->count < p->held ||
          list->max_leases != p->max)
        fail("zkl_semaphore_participants on %s (max %d, %d held) listed %zu leases, %zu waiting, max %" PRId64, p->text,
             p->max, p->held, list ? list->leases->count : 0, list ? list->waiting_leases : 0, list ? list->max_leases : -1);
      else {
        const zkl_participants *parts[] = {list->leases, list->queue};
        for (int k = 0; k < 2; k++)
          for (size_t j = 0; j < parts[k]->count; j++)
            if (parts[k]->items[j].node == NULL || parts[k]->items[j].node[0] == '\0' || parts[k]->items[j].fencing_token <= 0)
              fail("zkl_semaphore_participants: entry %zu of %s is malformed", j, k ? "queue" : "leases");
      }
      zkl_semaphore_listing_free(list);
      break;
    }
    case F_semaphore_free:
      rc = zkl_semaphore_free(sem);
      check(f, rc, &e, "semaphore");
      if (rc == ZKL_OK && i >= 0) {
        set_state(sem, FREED_SEM);
        sems[i] = sems[--n_sems];
      }
      break;
  }
}

/* Leases: a valid index is below its count; a released one has no token; a closed client's is
 * lost (or about to be). */
/* What a set of holds (leases, a multi-lock guard) may report of itself: released, none; after its
 * client closed, any state up to lost (the news may still be arriving); else held or suspended. */
static bool set_state_fits(zkl_hold_state state, bool released, bool closed) {
  if (released) return state == ZKL_HOLD_NONE;
  if (closed) return state <= ZKL_HOLD_LOST;
  return state == ZKL_HOLD_HELD || state == ZKL_HOLD_SUSPENDED;
}

/* Which of a set of `count` was lost first: -1 (none) or an index, only once the client closed
 * and the set is not released. */
static bool lost_index_fits(int64_t index, int64_t count, bool released, bool closed) {
  return closed && !released ? index >= -1 && index < count : index == -1;
}

static void call_leases_fn(int f) {
  expect e = {0};
  int i;
  zkl_leases *leases = LEASES_ARG(&e, &i, f == F_leases_free);
  taken_slot *t = i >= 0 ? &leases_slots[i] : NULL;
  size_t index = t && chance(85) ? below((uint64_t)t->n[0]) : (size_t)(t ? t->n[0] : 0) + below(3);
  bool indexed = f == F_leases_fencing_token || f == F_leases_node_name || f == F_leases_state;
  if (indexed && t && index >= (size_t)t->n[0]) bad(&e, "out of range");
  bool null_out = chance(6) && f != F_leases_release && f != F_leases_free && f != F_leases_lost_lease;
  if (null_out) bad(&e, "out is NULL");
  e.allowed = BIT(ZKL_OK);
  int rc;
  switch (f) {
    case F_leases_count: {
      size_t count = 0;
      rc = zkl_leases_count(leases, null_out ? NULL : &count);
      check(f, rc, &e, "leases");
      if (rc == ZKL_OK && !e.n && count != (size_t)t->n[0]) fail("zkl_leases_count gave %zu, not %d", count, t->n[0]);
      break;
    }
    case F_leases_fencing_token: {
      int64_t token = 0;
      if (t) e.allowed = t->released ? BIT(ZKL_NOT_OWNER) : t->closed ? BIT(ZKL_OK) | BIT(ZKL_LOCK_LOST) : BIT(ZKL_OK);
      rc = zkl_leases_fencing_token(leases, index, null_out ? NULL : &token);
      check(f, rc, &e, "leases");
      if (rc == ZKL_OK && !e.n && token <= 0) fail("zkl_leases_fencing_token gave %" PRId64, token);
      break;
    }
    case F_leases_node_name: {
      const char *name = NULL;
      rc = zkl_leases_node_name(leases, index, null_out ? NULL : &name);
      check(f, rc, &e, "leases");
      if (rc == ZKL_OK && !e.n && (name == NULL || strncmp(name, "_c_", 3) != 0 || strstr(name, "-lease-") == NULL))
        fail("zkl_leases_node_name gave %s", name ? name : "(null)");
      break;
    }
    case F_leases_state: {
      zkl_hold_state state = 99;
      rc = zkl_leases_state(leases, index, null_out ? NULL : &state);
      check(f, rc, &e, "leases");
      if (rc == ZKL_OK && !e.n && !set_state_fits(state, t->released, t->closed))
        fail("zkl_leases_state gave %d (released %d, closed %d)", (int)state, t->released, t->closed);
      break;
    }
    case F_leases_combined_state: {
      zkl_hold_state state = 99;
      rc = zkl_leases_combined_state(leases, null_out ? NULL : &state);
      check(f, rc, &e, "leases");
      if (rc == ZKL_OK && !e.n && !set_state_fits(state, t->released, t->closed))
        fail("zkl_leases_combined_state gave %d (released %d, closed %d)", (int)state, t->released, t->closed);
      break;
    }
    case F_leases_lost_lease: {
      int64_t lost = 99;
      zkl_lost_reason reason = 0;
      bool null_index = chance(6);
      if (null_index) bad(&e, "index is NULL");
      rc = zkl_leases_lost_lease(leases, null_index ? NULL : &lost, chance(30) ? NULL : &reason);
      check(f, rc, &e, "leases");
      if (rc == ZKL_OK && !e.n && !lost_index_fits(lost, t->n[0], t->released, t->closed))
        fail("zkl_leases_lost_lease gave %" PRId64 " (released %d, closed %d)", lost, t->released, t->closed);
      break;
    }
    case F_leases_release:
      if (t)
        e.allowed = t->released ? BIT(ZKL_NOT_OWNER)
                    : t->closed ? BIT(ZKL_OK) | BIT(ZKL_LOCK_LOST) | BIT(ZKL_CLOSED)
                                : BIT(ZKL_OK);
      rc = zkl_leases_release(leases);
      check(f, rc, &e, "leases");
      if (t && !e.n && rc != ZKL_INVALID_ARGUMENT) {
        uncount_taken(t);
        t->released = true;
      }
      break;
    case F_leases_free:
      rc = zkl_leases_free(leases);
      check(f, rc, &e, "leases");
      if (rc == ZKL_OK && t) {
        uncount_taken(t);
        set_state(leases, FREED_LEASES);
        *t = leases_slots[--n_leases];
      }
      break;
  }
}

/* A multi-lock over one or two semaphores of one client, on different paths (so its guards
 * count in the model), or bad members. Lock members only in bad input: the lock model does not
 * follow holds taken through a multi-lock. */
static void call_multi_lock_new(void) {
  expect e = {0};
  zkl_multi_member members[2] = {{0}, {0}};
  size_t count = 0;
  taken_slot t = {0};
  if (n_sems) {
    int first = (int)below(n_sems);
    members[0] = (zkl_multi_member){.semaphore = sems[first].handle, .leases = 1 + (int)below(sem_paths[sems[first].path].max)};
    t = (taken_slot){.client = sems[first].client, .count = 1, .path = {sems[first].path}, .n = {members[0].leases}, .closed = sems[first].closed};
    count = 1;
    int second = (int)below(n_sems);
    if (chance(50) && sems[second].client == sems[first].client && sems[second].path != sems[first].path) {
      members[1] = (zkl_multi_member){.semaphore = sems[second].handle, .leases = 1 + (int)below(sem_paths[sems[second].path].max)};
      t.path[1] = sems[second].path, t.n[1] = members[1].leases, t.count = 2;
      count = 2;
    }
  } else {
    bad(&e, "neither a lock nor a semaphore");
    count = 1;
  }
  const zkl_multi_member *mp = members;
  switch (below(14)) {
    case 0: count = 0; bad(&e, "count is 0"); break;
    case 1: mp = NULL; bad(&e, "members is NULL"); break;
    case 2: members[0] = (zkl_multi_member){0}; bad(&e, "neither a lock nor a semaphore"); break;
    case 3:
      if (n_locks && members[0].semaphore) members[0].lock = locks[below(n_locks)].handle, bad(&e, "both a lock and a semaphore");
      break;
    case 4: if (members[0].semaphore) members[0].leases = 0, bad(&e, "at least 1 lease"); break;
    case 5: if (members[0].semaphore) members[0].leases = -1 - (int)below(5), bad(&e, "must be at least 1"); break;
    case 6: if (members[0].semaphore) members[0].leases = 4 + (int)below(3), bad(&e, "more than the semaphore's max"); break;
    case 7: if (members[0].semaphore) members[1] = members[0], count = 2, bad(&e, "both on this path"); break;
    case 8: {
      uintptr_t v = any_handle();
      if (state_of((void *)v) == LIVE_SEM) v = 16 * (1 + below(ID_SLOTS - 2)) + 8; /* misaligned: never live */
      members[0] = (zkl_multi_member){.semaphore = (zkl_semaphore *)v, .leases = 1};
      wrong_handle(&e, state_of((void *)v), "zkl_semaphore");
      break;
    }
    case 9:
      if (n_locks) members[0] = (zkl_multi_member){.lock = locks[below(n_locks)].handle, .leases = 1}, bad(&e, "leases are for a semaphore member");
      break;
    default: break;
  }
  zkl_multi_lock *out = (zkl_multi_lock *)(uintptr_t)0xdead0, **outp = &out;
  if (chance(6)) outp = NULL, bad(&e, "out is NULL");
  e.allowed = BIT(ZKL_OK);
  int rc = zkl_multi_lock_new(mp, count, outp);
  check(F_multi_lock_new, rc, &e, "members");
  if (rc != ZKL_OK || e.n) return;
  t.handle = out;
  /* Its members in the order it takes them (by path), as a guard numbers them. */
  if (t.count == 2 && strcmp(sem_paths[t.path[1]].text, sem_paths[t.path[0]].text) < 0) {
    int path = t.path[0], n = t.n[0];
    t.path[0] = t.path[1], t.n[0] = t.n[1], t.path[1] = path, t.n[1] = n;
  }
  set_state(out, LIVE_MULTI);
  if (n_multis < MAX_MULTIS) {
    multis[n_multis++] = t;
  } else {
    zkl_multi_lock_free(out);
    set_state(out, FREED_MULTI);
  }
}

static void call_multi_lock_fn(int f) {
  expect e = {0};
  int i;
  zkl_multi_lock *multi = MULTI_ARG(&e, &i, f == F_multi_lock_free);
  taken_slot *t = i >= 0 ? &multis[i] : NULL;
  e.allowed = BIT(ZKL_OK);
  int rc;
  switch (f) {
    case F_multi_lock_member_count: {
      size_t count = 0;
      bool null_out = chance(8);
      if (null_out) bad(&e, "out is NULL");
      rc = zkl_multi_lock_member_count(multi, null_out ? NULL : &count);
      check(f, rc, &e, "multi");
      if (rc == ZKL_OK && !e.n && count != (size_t)t->count) fail("zkl_multi_lock_member_count gave %zu", count);
      break;
    }
    case F_multi_lock_member: {
      size_t index = t && chance(85) ? below((uint64_t)t->count) : (size_t)(t ? t->count : 0) + below(3);
      if (t && index >= (size_t)t->count) bad(&e, "out of range");
      const char *path = NULL;
      zkl_member_kind kind = 0;
      rc = zkl_multi_lock_member(multi, index, chance(20) ? NULL : &path, chance(20) ? NULL : &kind);
      check(f, rc, &e, "multi");
      if (rc == ZKL_OK && !e.n) {
        bool known = path == NULL;
        for (int m = 0; m < t->count; m++) known |= path && strcmp(path, sem_paths[t->path[m]].text) == 0;
        if (!known || (kind != 0 && kind != ZKL_MEMBER_LEASES)) fail("zkl_multi_lock_member gave %s, kind %d", path ? path : "(null)", (int)kind);
      }
      break;
    }
    case F_multi_lock_acquire:
    case F_multi_lock_acquire_as: {
      int model = 0;
      uint64_t owner = f == F_multi_lock_acquire_as ? owner_arg(&e, &model) : 0;
      int64_t timeout = short_timeout_arg(&e);
      zkl_multi_guard *out = (zkl_multi_guard *)(uintptr_t)0xdead0, **outp = &out;
      if (chance(6)) outp = NULL, bad(&e, "out is NULL");
      if (t) e.allowed = t->closed ? BIT(ZKL_CLOSED) : BIT(ZKL_OK) | BIT(ZKL_TIMEOUT);
      rc = f == F_multi_lock_acquire ? zkl_multi_lock_acquire(multi, timeout, outp)
                                     : zkl_multi_lock_acquire_as(multi, owner, timeout, outp);
      check(f, rc, &e, "multi");
      if (rc != ZKL_OK || e.n) break;
      taken_slot g = *t;
      g.handle = out;
      count_taken(&g, fn_name[f]);
      set_state(out, LIVE_GUARD);
      if (n_guards < MAX_GUARDS) {
        guards[n_guards++] = g;
      } else {
        zkl_multi_guard_free(out);
        set_state(out, FREED_GUARD);
        uncount_taken(&g);
      }
      break;
    }
    case F_multi_lock_cancel: check(f, zkl_multi_lock_cancel(multi), &e, "multi"); break;
    case F_multi_lock_set_lost_callback:
      check(f, zkl_multi_lock_set_lost_callback(multi, chance(70) ? on_multi_lost : NULL, (void *)(uintptr_t)0x5ca1ab1e), &e, "multi");
      break;
    case F_multi_lock_free:
      rc = zkl_multi_lock_free(multi);
      check(f, rc, &e, "multi");
      if (rc == ZKL_OK && t) {
        set_state(multi, FREED_MULTI);
        *t = multis[--n_multis];
      }
      break;
  }
}

static void call_multi_guard_fn(int f) {
  expect e = {0};
  int i;
  zkl_multi_guard *guard = GUARD_ARG(&e, &i, f == F_multi_guard_free);
  taken_slot *t = i >= 0 ? &guards[i] : NULL;
  e.allowed = BIT(ZKL_OK);
  int rc;
  switch (f) {
    case F_multi_guard_state: {
      zkl_hold_state state = 99;
      bool null_out = chance(8);
      if (null_out) bad(&e, "out is NULL");
      rc = zkl_multi_guard_state(guard, null_out ? NULL : &state);
      check(f, rc, &e, "guard");
      if (rc == ZKL_OK && !e.n && !set_state_fits(state, t->released, t->closed))
        fail("zkl_multi_guard_state gave %d (released %d, closed %d)", (int)state, t->released, t->closed);
      break;
    }
    case F_multi_guard_lost_member: {
      int64_t member = 99;
      zkl_lost_reason reason = 0;
      bool null_member = chance(8);
      if (null_member) bad(&e, "member is NULL");
      rc = zkl_multi_guard_lost_member(guard, null_member ? NULL : &member, chance(30) ? NULL : &reason);
      check(f, rc, &e, "guard");
      if (rc == ZKL_OK && !e.n && !lost_index_fits(member, t->count, t->released, t->closed))
        fail("zkl_multi_guard_lost_member gave %" PRId64 " (released %d, closed %d)", member, t->released, t->closed);
      break;
    }
    case F_multi_guard_fencing_token: {
      size_t member = t && chance(85) ? below((uint64_t)t->count) : (size_t)(t ? t->count : 0) + below(2);
      size_t index = t && member < (size_t)t->count && chance(85) ? below((uint64_t)t->n[member]) : 3 + below(2);
      if (t && (member >= (size_t)t->count || index >= (size_t)t->n[member])) bad(&e, "out of range");
      bool null_out = chance(6);
      if (null_out) bad(&e, "out is NULL");
      if (t) e.allowed = t->released ? BIT(ZKL_NOT_OWNER) : t->closed ? BIT(ZKL_OK) | BIT(ZKL_LOCK_LOST) : BIT(ZKL_OK);
      int64_t token = 0;
      rc = zkl_multi_guard_fencing_token(guard, member, index, null_out ? NULL : &token);
      check(f, rc, &e, "guard");
      if (rc == ZKL_OK && !e.n && token <= 0) fail("zkl_multi_guard_fencing_token gave %" PRId64, token);
      break;
    }
    case F_multi_guard_release:
      if (t)
        e.allowed = t->released ? BIT(ZKL_NOT_OWNER)
                    : t->closed ? BIT(ZKL_OK) | BIT(ZKL_LOCK_LOST) | BIT(ZKL_CLOSED)
                                : BIT(ZKL_OK);
      rc = zkl_multi_guard_release(guard);
      check(f, rc, &e, "guard");
      if (t && !e.n && rc != ZKL_INVALID_ARGUMENT) {
        uncount_taken(t);
        t->released = true;
      }
      break;
    case F_multi_guard_free:
      rc = zkl_multi_guard_free(guard);
      check(f, rc, &e, "guard");
      if (rc == ZKL_OK && t) {
        uncount_taken(t);
        set_state(guard, FREED_GUARD);
        *t = guards[--n_guards];
      }
      break;
  }
}

static void call_semaphore_options_init(void) {
  expect e = {.allowed = BIT(ZKL_OK)};
  zkl_acl_entry entry = {ZKL_PERM_ALL, "world", "anyone"};
  zkl_semaphore_options opts = {.max_leases = 9, .shared_count_path = "/x", .shared_count_seed = 9, .identifier = "x",
                                .acl = ZKL_ACL_CUSTOM, .acl_entries = &entry, .acl_entry_count = 1};
  bool null_opts = chance(30);
  if (null_opts) bad(&e, "opts is NULL");
  check(F_semaphore_options_init, zkl_semaphore_options_init(null_opts ? NULL : &opts), &e, "opts");
  if (!null_opts && (opts.max_leases || opts.shared_count_path || opts.shared_count_seed || opts.identifier ||
                     opts.acl != ZKL_ACL_OPEN || opts.acl_entries || opts.acl_entry_count))
    fail("zkl_semaphore_options_init left a field set");
}

/* One call of the semaphore family (a fifth of the calls with a server): each of its 30 kinds of
 * call once first, in turn (so a short run under valgrind calls every entry point), then at
 * random. */
static void call_sem_family(void) {
  static int sweep;
  static const int misc[] = {F_semaphore_cancel, F_semaphore_max_leases, F_semaphore_set_shared_count,
                             F_semaphore_set_lost_callback, F_semaphore_free, F_semaphore_participants};
  int k;
  if (sweep < 32) {
    k = sweep++;
  } else {
    int r = (int)below(100);
    k = r < 10 ? 0 : r < 16 ? 1 : r < 34 ? 2 : r < 60 ? 3 + (int)below(8) : r < 68 ? 11 + (int)below(6) : r < 74 ? 17
        : r < 86 ? 18 + (int)below(6) : r < 88 ? 24 : r < 96 ? 25 + (int)below(5) : r < 98 ? 30 : 31;
  }
  if (k == 0 || k == 1) call_semaphore_new(k == 1);
  else if (k == 2) call_semaphore_acquire();
  else if (k < 11) call_leases_fn(F_leases_count + (k - 3));
  else if (k < 17) call_semaphore_misc(misc[k - 11]);
  else if (k == 17) call_multi_lock_new();
  else if (k < 24) call_multi_lock_fn(F_multi_lock_member_count + (k - 18));
  else if (k == 24) call_multi_lock_fn(F_multi_lock_free);
  else if (k < 30) call_multi_guard_fn(F_multi_guard_state + (k - 25));
  else if (k == 30) calls[F_semaphore_listing_free]++, total_calls++, zkl_semaphore_listing_free(NULL);
  else call_semaphore_options_init();
}

/* Releases and frees everything of the family, then checks that no lease node and no mutex node
 * is left on a semaphore path. */
static void sem_family_tear_down(void) {
  while (n_guards) {
    zkl_multi_guard_free(guards[0].handle);
    set_state(guards[0].handle, FREED_GUARD);
    guards[0] = guards[--n_guards];
  }
  while (n_leases) {
    int rc = zkl_leases_release(leases_slots[0].handle);
    if (rc != ZKL_OK && rc != ZKL_NOT_OWNER && rc != ZKL_LOCK_LOST && rc != ZKL_CLOSED)
      fail("tear-down: zkl_leases_release gave %s (\"%s\")", code_name(rc), zkl_last_error_message());
    if (zkl_leases_free(leases_slots[0].handle) != ZKL_OK) fail("tear-down: zkl_leases_free");
    set_state(leases_slots[0].handle, FREED_LEASES);
    leases_slots[0] = leases_slots[--n_leases];
  }
  while (n_multis) {
    if (zkl_multi_lock_free(multis[0].handle) != ZKL_OK) fail("tear-down: zkl_multi_lock_free");
    set_state(multis[0].handle, FREED_MULTI);
    multis[0] = multis[--n_multis];
  }
  while (n_sems) {
    if (zkl_semaphore_free(sems[0].handle) != ZKL_OK) fail("tear-down: zkl_semaphore_free");
    set_state(sems[0].handle, FREED_SEM);
    sems[0] = sems[--n_sems];
  }
  for (int p = 0; p < n_sem_paths && n_clients; p++) {
    zkl_semaphore *probe = NULL;
    if (zkl_semaphore_new(clients[0].handle, sem_paths[p].text, sem_paths[p].max, &probe) != ZKL_OK) continue;
    size_t leases = 0, queue = 0;
    int64_t give_up = now_ms() + 20000; /* background releases (of freed leases and guards) finish */
    zkl_semaphore_listing *list = NULL;
    while (zkl_semaphore_participants(probe, &list) == ZKL_OK) {
      leases = list->leases->count, queue = list->queue->count;
      zkl_semaphore_listing_free(list);
      if ((leases == 0 && queue == 0) || now_ms() > give_up) break;
      usleep(10000);
    }
    if (leases || queue) fail("tear-down: %zu lease node(s) and %zu mutex node(s) left on %s", leases, queue, sem_paths[p].text);
    zkl_semaphore_free(probe);
  }
}

static void close_client_model(int c) {
  for (int i = 0; i < n_locks; i++) {
    if (locks[i].client != c) continue;
    locks[i].client_closed = true;
    paths[locks[i].path].dirty_until = now_ms() + 3000;
  }
  sem_family_client_closed(clients[c].handle);
  set_state(clients[c].handle, CLOSED_CLIENT);
  clients[c] = clients[--n_clients];
  for (int i = 0; i < n_locks; i++) {
    if (locks[i].client == c) locks[i].client = -1;
    else if (locks[i].client == n_clients) locks[i].client = c;
  }
}

static void call_client_fn(int f) {
  expect e = {0};
  int c;
  zkl_client *client = client_arg(&e, &c, f == F_client_close);
  if (f == F_client_close) {
    if (c >= 0 && (n_clients < 2 || !chance(15))) return; /* closing live clients: rarely */
    e.allowed = BIT(ZKL_OK);
    int rc = zkl_client_close(client);
    check(f, rc, &e, "client");
    if (rc == ZKL_OK && c >= 0) close_client_model(c);
    return;
  }
  if (f == F_client_set_state_callback) {
    e.allowed = BIT(ZKL_OK);
    check(f, zkl_client_set_state_callback(client, chance(50) ? on_state : NULL, (void *)(uintptr_t)0xc0ffee), &e,
          "client");
    return;
  }
  bool null_out = chance(10);
  if (null_out) bad(&e, "out is NULL");
  e.allowed = BIT(ZKL_OK);
  if (f == F_client_state) {
    zkl_session_state s = 0;
    int rc = zkl_client_state(client, null_out ? NULL : &s);
    check(f, rc, &e, "client");
    if (rc == ZKL_OK && (s < ZKL_SESSION_STATE_CONNECTED || s > ZKL_SESSION_STATE_CLOSED))
      fail("zkl_client_state gave %d, not a zkl_session_state", (int)s);
  } else {
    int64_t id = -7;
    int rc = zkl_client_session_id(client, null_out ? NULL : &id);
    check(f, rc, &e, "client");
    if (rc == ZKL_OK && id < 0) fail("zkl_client_session_id gave %" PRId64, id);
  }
}

static void call_lock_new(bool rw) {
  int f = rw ? F_rwlock_new : F_lock_new;
  expect e = {0};
  int c, path_index;
  zkl_client *client = client_arg(&e, &c, false);
  const char *path = path_arg(&e, &path_index, rw);
  zkl_lock *a = (zkl_lock *)(uintptr_t)0xdead0, *b = (zkl_lock *)(uintptr_t)0xdead0;
  zkl_lock **ap = &a, **bp = &b;
  if (chance(6)) ap = NULL, bad(&e, rw ? "read is NULL" : "out is NULL");
  if (rw && chance(6)) bp = NULL, bad(&e, "write is NULL");
  if (e.n == 0 && path_index == -2) { /* random bytes: accepted or refused naming why */
    e.allowed = BIT(ZKL_OK) | BIT(ZKL_INVALID_ARGUMENT);
  } else {
    e.allowed = BIT(ZKL_OK);
  }
  bool room = n_locks + 2 <= MAX_LOCKS, random_path = path_index == -2, acl_checked = false;
  /* With options: bad ones (an out-of-range acl, bad custom entries) are refused naming them; a
   * lock made with an ACL is freed at once (its acquisitions need digest credentials). */
  bool with = chance(35), open_acl = true;
  zkl_lock_options lock_opts, *lo = &lock_opts;
  zkl_acl_entry entries[3];
  if (with) {
    f = rw ? F_rwlock_new_with : F_lock_new_with;
    expect init = {.allowed = BIT(ZKL_OK)};
    bool null = chance(10);
    if (null) bad(&init, "opts is NULL");
    memset(&lock_opts, 0x5a, sizeof lock_opts);
    check(F_lock_options_init, zkl_lock_options_init(null ? NULL : &lock_opts), &init, "opts");
    if (null) zkl_lock_options_init(&lock_opts);
    for (int k = 0; k < 3; k++) entries[k] = (zkl_acl_entry){ZKL_PERM_ALL, "world", "anyone"};
    switch (below(10)) {
      case 0: lo = NULL; break;
      case 1: lock_opts.acl = chance(50) ? ZKL_ACL_CUSTOM + 1 + (int32_t)below(1000) : -1 - (int32_t)below(INT32_MAX); bad(&e, "opts->acl is"); break;
      case 2: lock_opts.acl_entries = entries, lock_opts.acl_entry_count = 1; bad(&e, "only for ZKL_ACL_CUSTOM"); break;
      case 3: lock_opts.acl = ZKL_ACL_CUSTOM; bad(&e, "acl_entry_count is 0"); break;
      case 4: lock_opts.acl = ZKL_ACL_CUSTOM, lock_opts.acl_entry_count = 1 + below(3); bad(&e, "opts->acl_entries is NULL"); break;
      case 5: {
        lock_opts.acl = ZKL_ACL_CUSTOM, lock_opts.acl_entries = entries, lock_opts.acl_entry_count = 3;
        zkl_acl_entry *bad_entry = &entries[below(3)];
        switch (below(4)) {
          case 0: bad_entry->perms = ZKL_PERM_ALL + 1 + (uint32_t)below(UINT32_MAX - ZKL_PERM_ALL); bad(&e, "perms"); break;
          case 1: bad_entry->scheme = NULL; bad(&e, "NULL scheme or id"); break;
          case 2: bad_entry->id = NULL; bad(&e, "NULL scheme or id"); break;
          default: bad_entry->scheme = "wor\xffld"; bad(&e, "scheme is not valid UTF-8"); break;
        }
        break;
      }
      case 6: lock_opts.acl = ZKL_ACL_CUSTOM, lock_opts.acl_entries = entries, lock_opts.acl_entry_count = 1 + below(3); open_acl = false; break;
      case 7: lock_opts.acl = (int32_t)below(3); open_acl = lock_opts.acl == ZKL_ACL_OPEN; break;
      default: break;
    }
    /* An ACL naming the creator on a client without digest auth is refused too (the fuzzer does
     * not know which clients have credentials): either way, OK or a refusal naming why. */
    if (e.n == 0 && !open_acl) e.allowed |= BIT(ZKL_INVALID_ARGUMENT);
    if (e.n && !open_acl) bad(&e, "digest auth"); /* bad input too: named before the rest */
  }
  int rc = !with ? (rw ? zkl_rwlock_new(client, path, ap, bp) : zkl_lock_new(client, path, ap))
           : rw  ? zkl_rwlock_new_with(client, path, lo, ap, bp)
                 : zkl_lock_new_with(client, path, lo, ap);
  if (with && rc == ZKL_INVALID_ARGUMENT && e.n == 0 && !open_acl) {
    bool named = strstr(zkl_last_error_message(), "digest") || strstr(zkl_last_error_message(), "creator");
    for (int k = 0; random_path && path_needles[k]; k++) named |= strstr(zkl_last_error_message(), path_needles[k]) != NULL;
    if (!named) fail("%s refused a well-formed ACL without naming why: \"%s\"", fn_name[f], zkl_last_error_message());
    acl_checked = true;
  }
  if (with && !open_acl) path_index = -1; /* not tracked: freed at once below */
  check(f, rc, &e, path == NULL ? "NULL path" : path_index >= 0 ? "fuzz path" : "bad path");
  if (rc == ZKL_INVALID_ARGUMENT && e.n == 0 && random_path && !acl_checked) {
    bool named = false;
    for (int i = 0; path_needles[i]; i++) named |= strstr(zkl_last_error_message(), path_needles[i]) != NULL;
    if (!named) fail("%s refused random bytes without naming why: \"%s\"", fn_name[f], zkl_last_error_message());
  }
  if (rc != ZKL_OK) {
    if (a != (zkl_lock *)(uintptr_t)0xdead0 || b != (zkl_lock *)(uintptr_t)0xdead0)
      fail("%s failed with %s but wrote an output", fn_name[f], code_name(rc));
    return;
  }
  if (path_index == -2) { /* an accepted random path: a fresh slot, if there is room */
    if (n_paths < MAX_PATHS) {
      snprintf(paths[n_paths].text, sizeof paths[n_paths].text, "%.150s", path);
      paths[n_paths].rw = rw;
      path_index = n_paths++;
    } else {
      path_index = -1;
    }
  }
  if (!room || path_index < 0 || c < 0) { /* no room to track them: free at once */
    expect ok = {.allowed = BIT(ZKL_OK)};
    set_state(a, LIVE_LOCK);
    check(F_lock_free, zkl_lock_free(a), &ok, "new lock");
    set_state(a, FREED_LOCK);
    if (rw) {
      set_state(b, LIVE_LOCK);
      check(F_lock_free, zkl_lock_free(b), &ok, "new lock");
      set_state(b, FREED_LOCK);
    }
    return;
  }
  if (rw) {
    int r = add_lock(a, c, path_index, READ), w = add_lock(b, c, path_index, WRITE);
    locks[r].partner = w, locks[w].partner = r;
  } else {
    add_lock(a, c, path_index, MUTEX);
  }
}

static void call_lock_free(void) {
  expect e = {.allowed = BIT(ZKL_OK)};
  int i;
  zkl_lock *lock = lock_arg(&e, &i, true);
  if (i >= 0 && n_locks > 4 && !chance(30)) return; /* keep some live locks around */
  int rc = zkl_lock_free(lock);
  check(F_lock_free, rc, &e, "lock");
  if (rc == ZKL_OK && i >= 0) {
    set_state(lock, FREED_LOCK);
    bool held = false;
    for (int o = 0; o < OWNERS; o++) held |= locks[i].count[o] != 0;
    if (held) paths[locks[i].path].dirty_until = now_ms() + 3000;
    drop_lock(i);
  }
}

/* The owner of a call: the thread (plain function) or an explicit id (_as). */
typedef struct {
  bool as;
  uint64_t id;
  int model; /* owner index, -1 fresh, -2 bad */
} owner_choice;

static owner_choice pick_owner(expect *e) {
  owner_choice c = {chance(60), 0, 0};
  if (c.as) c.id = owner_arg(e, &c.model);
  return c;
}

static void call_acquire(void) {
  expect e = {0};
  int i;
  zkl_lock *lock = lock_arg(&e, &i, false);
  owner_choice who = pick_owner(&e);
  bool may_wait;
  int64_t timeout = timeout_arg(&e, &may_wait);
  int f = who.as ? F_lock_acquire_as : F_lock_acquire;
  if (e.n == 0 && who.model == -1) return; /* a fresh owner's hold would be untracked */
  int o = who.model;
  if (e.n == 0) {
    lock_slot *l = &locks[i];
    int partner = l->partner;
    bool dirty = paths[l->path].dirty_until > now_ms();
    if (l->client_closed) {
      /* A hold of the owner on the other side is lost too: a read under it is refused as lost,
       * a write as a deadlock, before the closed client is noticed. */
      e.allowed = l->count[o] ? BIT(ZKL_LOCK_LOST) : BIT(ZKL_CLOSED);
      if (!l->count[o] && partner >= 0 && locks[partner].count[o]) {
        e.allowed |= BIT(ZKL_LOCK_LOST) | BIT(ZKL_DEADLOCK);
      }
      /* The holds of a freed other side are released in the background, soon but not at once. */
      if (dirty) e.allowed |= BIT(ZKL_DEADLOCK) | BIT(ZKL_LOCK_LOST);
    } else if (l->count[o]) {
      e.allowed = BIT(ZKL_OK);
    } else if ((partner < 0 || !locks[partner].count[o]) && holds_elsewhere(i, o)) {
      if (may_wait) timeout = 0; /* were the model wrong, never wait for ever on itself */
      e.allowed = BIT(ZKL_DEADLOCK);
      if (dirty) e.allowed |= BIT(ZKL_OK) | BIT(ZKL_TIMEOUT);
      if (paths[l->path].mixed) e.allowed |= BIT(ZKL_INVALID_ARGUMENT) | BIT(ZKL_TIMEOUT);
    } else if (l->kind == WRITE && partner >= 0 && locks[partner].count[o]) {
      e.allowed = BIT(ZKL_DEADLOCK);
    } else if (l->kind == READ && partner >= 0 && locks[partner].count[o] && !locks[partner].client_closed) {
      /* A downgrade: one create of a read node with the write node's sequence, which a timeout
       * of a few ms may not see answered. */
      e.allowed = BIT(ZKL_OK) | (timeout > 0 ? BIT(ZKL_TIMEOUT) : 0);
    } else {
      if (may_wait) timeout = 0; /* never wait for ever where someone may hold */
      /* A free path gives the lock to a try (timeout 0: one round trip); a timeout of a few ms
       * may pass before the round trips do (the first attempt on a path also creates it). */
      e.allowed = others_hold(i, o) ? BIT(ZKL_TIMEOUT) : timeout == 0 ? BIT(ZKL_OK) : BIT(ZKL_OK) | BIT(ZKL_TIMEOUT);
      if (dirty) e.allowed |= BIT(ZKL_OK) | BIT(ZKL_TIMEOUT) | BIT(ZKL_DEADLOCK);
      if (paths[l->path].mixed) e.allowed |= BIT(ZKL_INVALID_ARGUMENT) | BIT(ZKL_TIMEOUT);
    }
  }
  int rc = who.as ? zkl_lock_acquire_as(lock, who.id, timeout) : zkl_lock_acquire(lock, timeout);
  check(f, rc, &e,
        e.n == 0 && locks[i].client_closed && locks[i].kind == READ && locks[i].partner >= 0 && locks[locks[i].partner].count[o]
            ? "the read side, after zkl_client_close, by the owner of the write side"
            : "lock, owner, timeout");
  if (rc == ZKL_INVALID_ARGUMENT && e.n == 0 && !strstr(zkl_last_error_message(), "cannot use this path"))
    fail("acquire: ZKL_INVALID_ARGUMENT for valid input: \"%s\"", zkl_last_error_message());
  if (rc == ZKL_OK && e.n == 0) locks[i].count[o]++;
}

static void call_release(void) {
  expect e = {0};
  int i;
  zkl_lock *lock = lock_arg(&e, &i, false);
  owner_choice who = pick_owner(&e);
  int f = who.as ? F_lock_release_as : F_lock_release;
  /* Releases by owners that hold come most often from the owners' own choice: bias towards them. */
  if (e.n == 0) {
    int o = who.model;
    lock_slot *l = &locks[i];
    if (o == -1 || !l->count[o]) e.allowed = BIT(ZKL_NOT_OWNER);
    else if (l->client_closed) e.allowed = BIT(ZKL_LOCK_LOST);
    else e.allowed = BIT(ZKL_OK);
  }
  int rc = who.as ? zkl_lock_release_as(lock, who.id) : zkl_lock_release(lock);
  if (trace && e.n == 0)
    printf("# release lock %d (kind %d, partner %d, closed %d) owner %d: count %ld, partner's %ld: %s\n", i,
           locks[i].kind, locks[i].partner, locks[i].client_closed, who.model, who.model >= 0 ? locks[i].count[who.model] : -1,
           who.model >= 0 && locks[i].partner >= 0 ? locks[locks[i].partner].count[who.model] : -1, code_name(rc));
  check(f, rc, &e, "lock, owner");
  if ((rc == ZKL_OK || rc == ZKL_LOCK_LOST) && e.n == 0 && who.model >= 0 && locks[i].count[who.model])
    locks[i].count[who.model]--;
}

static void call_query(int kind) { /* 0 is_held, 1 state, 2 fencing token, 3 sequence */
  static const int plain[] = {F_lock_is_held, F_lock_state, F_lock_fencing_token, F_lock_sequence};
  static const int as[] = {F_lock_is_held_as, F_lock_state_as, F_lock_fencing_token_as, F_lock_sequence_as};
  expect e = {0};
  int i;
  const zkl_lock *lock = lock_arg(&e, &i, false);
  owner_choice who = pick_owner(&e);
  int f = who.as ? as[kind] : plain[kind];
  bool null_out = chance(8);
  if (null_out) bad(&e, "out is NULL");
  long count = e.n == 0 && who.model >= 0 ? locks[i].count[who.model] : 0;
  bool lost = e.n == 0 && locks[i].client_closed;
  int rc;
  bool b = false;
  zkl_hold_state s = (zkl_hold_state)99;
  int64_t n = -12345;
  switch (kind) {
    case 0:
      e.allowed = BIT(ZKL_OK);
      rc = who.as ? zkl_lock_is_held_as(lock, who.id, null_out ? NULL : &b) : zkl_lock_is_held(lock, null_out ? NULL : &b);
      check(f, rc, &e, "lock, owner, out");
      if (rc == ZKL_OK && b != (count > 0 && !lost)) fail("%s says %d, the model %ld holds (lost %d)", fn_name[f], b, count, lost);
      break;
    case 1:
      e.allowed = BIT(ZKL_OK);
      rc = who.as ? zkl_lock_state_as(lock, who.id, null_out ? NULL : &s) : zkl_lock_state(lock, null_out ? NULL : &s);
      check(f, rc, &e, "lock, owner, out");
      if (rc == ZKL_OK) {
        zkl_hold_state want = count == 0 ? ZKL_HOLD_NONE : lost ? ZKL_HOLD_LOST : ZKL_HOLD_HELD;
        if (s != want && !(s == ZKL_HOLD_SUSPENDED && count && !lost))
          fail("%s gave %d, expected %d (count %ld, lost %d)", fn_name[f], (int)s, (int)want, count, lost);
      }
      break;
    default:
      e.allowed = count == 0 ? BIT(ZKL_NOT_OWNER) : lost ? BIT(ZKL_LOCK_LOST) : BIT(ZKL_OK);
      if (kind == 2)
        rc = who.as ? zkl_lock_fencing_token_as(lock, who.id, null_out ? NULL : &n) : zkl_lock_fencing_token(lock, null_out ? NULL : &n);
      else
        rc = who.as ? zkl_lock_sequence_as(lock, who.id, null_out ? NULL : &n) : zkl_lock_sequence(lock, null_out ? NULL : &n);
      check(f, rc, &e, "lock, owner, out");
      if (rc == ZKL_OK && n < 0) fail("%s gave %" PRId64 " for a hold", fn_name[f], n);
      if (rc != ZKL_OK && n != -12345) fail("%s failed but wrote *out", fn_name[f]);
  }
}

static void call_listing(int f) {
  expect e = {0};
  int i;
  zkl_lock *lock = lock_arg(&e, &i, false);
  bool null_out = chance(8);
  if (null_out) bad(&e, "out is NULL");
  if (e.n == 0) e.allowed = locks[i].client_closed ? BIT(ZKL_CLOSED) : BIT(ZKL_OK);
  zkl_participants *list = NULL;
  zkl_participants **out = null_out ? NULL : &list;
  int rc = f == F_lock_contenders ? zkl_lock_contenders(lock, out) : f == F_lock_holder ? zkl_lock_holder(lock, out)
                                                                                          : zkl_lock_holders(lock, out);
  check(f, rc, &e, "lock, out");
  if (rc == ZKL_OK) {
    if (f == F_lock_holder && list && list->count > 1) fail("zkl_lock_holder listed %zu", list->count);
    check_list(list, f);
  } else if (list != NULL) {
    fail("%s failed but wrote *out", fn_name[f]);
  }
}

static void call_misc(int f) {
  expect e = {.allowed = BIT(ZKL_OK)};
  switch (f) {
    case F_options_init: {
      zkl_options opts;
      memset(&opts, 0xa5, sizeof opts);
      bool null = chance(30);
      if (null) bad(&e, "opts is NULL");
      int rc = zkl_options_init(null ? NULL : &opts);
      check(f, rc, &e, "opts");
      if (rc == ZKL_OK && (opts.session_timeout_ms || opts.connect_timeout_ms || opts.digest_auth || opts.jute_maxbuffer ||
                           opts.tls || opts.tls_ca_file || opts.tls_cert_file || opts.tls_key_file ||
                           opts.tls_key_password || opts.tls_server_name || opts.sasl_mechanism || opts.sasl_username ||
                           opts.sasl_password || opts.sasl_principal || opts.sasl_keytab || opts.sasl_credential_cache ||
                           opts.sasl_service_name || opts.sasl_host))
        fail("zkl_options_init left a field unset");
      break;
    }
    case F_result_str: {
      int code = chance(50) ? (int)below(CODES + 3) - 1 : (int)rnd();
      const char *s = zkl_result_str(code);
      calls[f]++, total_calls++;
      if (s == NULL || (code >= 0 && code < CODES) != (strcmp(s, "unknown result") != 0))
        fail("zkl_result_str(%d) gave \"%s\"", code, s ? s : "(null)");
      break;
    }
    case F_last_error_message: {
      const char *s = zkl_last_error_message();
      calls[f]++, total_calls++;
      if (s == NULL || (total_calls > 10 && s[0] != '\0' && strncmp(s, "zkl_", 4) != 0)) fail("zkl_last_error_message gave \"%s\"", s ? s : "(null)");
      break;
    }
    case F_last_error_zookeeper_code:
      calls[f]++, total_calls++;
      (void)zkl_last_error_zookeeper_code();
      break;
    case F_version:
      calls[f]++, total_calls++;
      if (strcmp(zkl_version(), ZKL_VERSION) != 0) fail("zkl_version is %s, the header's %s", zkl_version(), ZKL_VERSION);
      break;
    case F_thread_owner:
      calls[f]++, total_calls++;
      if (zkl_thread_owner() != owner_id[0]) fail("zkl_thread_owner changed");
      break;
    case F_participants_free:
      calls[f]++, total_calls++;
      zkl_participants_free(NULL);
      break;
    case F_lock_set_lost_callback: {
      int i;
      zkl_lock *lock = lock_arg(&e, &i, false);
      check(f, zkl_lock_set_lost_callback(lock, chance(70) ? on_lost : NULL, (void *)(uintptr_t)0x5ca1ab1e), &e, "lock");
      break;
    }
  }
}

static long untouched_entry_points(void) {
  long untouched = 0;
  for (int f = 0; f < F_COUNT; f++) untouched += calls[f] == 0;
  return untouched;
}

static void one_call(void) {
  int r = (int)below(1000);
  if (!zk_connect) { /* no server: only what needs none */
    static const int offline[] = {F_options_init, F_result_str, F_last_error_message, F_last_error_zookeeper_code,
                                  F_version, F_thread_owner, F_participants_free};
    if (r < 150) call_connect();
    else if (r < 450) call_misc(offline[below(sizeof offline / sizeof offline[0])]);
    else if (r < 600) call_client_fn(F_client_state + (int)below(3));
    else if (r < 700) call_lock_new(chance(50));
    else if (r < 800) call_acquire();
    else if (r < 900) call_release();
    else call_query((int)below(4));
    return;
  }
  if (chance(20)) call_sem_family();
  else if (r < 15) call_connect();
  else if (r < 30) call_client_fn(F_client_close);
  else if (r < 80) call_client_fn(F_client_state + (int)below(3));
  else if (r < 180) call_lock_new(chance(40));
  else if (r < 230) call_lock_free();
  else if (r < 450) call_acquire();
  else if (r < 650) call_release();
  else if (r < 850) call_query((int)below(4));
  else if (r < 880) call_listing(F_lock_contenders + (int)below(3));
  else if (r < 900) call_misc(F_lock_set_lost_callback);
  else {
    static const int misc[] = {F_options_init, F_result_str, F_last_error_message, F_last_error_zookeeper_code,
                               F_version, F_thread_owner, F_participants_free};
    call_misc(misc[below(sizeof misc / sizeof misc[0])]);
  }
}

/* Releases every tracked hold, frees every lock and closes every client; checks the server kept
 * no node of ours. */
static void tear_down(void) {
  sem_family_tear_down();
  expect ok = {.allowed = BIT(ZKL_OK)};
  zkl_lock *probe = NULL;
  int probe_client = n_clients ? 0 : -1;
  for (int i = 0; i < n_locks; i++) {
    for (int o = 0; o < OWNERS; o++) {
      while (locks[i].count[o] > 0) {
        int rc = zkl_lock_release_as(locks[i].handle, owner_id[o]);
        if (rc != ZKL_OK && rc != ZKL_LOCK_LOST)
          fail("tear-down: release of a tracked hold gave %s (\"%s\")", code_name(rc), zkl_last_error_message());
        if (rc != ZKL_OK && rc != ZKL_LOCK_LOST) break;
        locks[i].count[o]--;
      }
    }
  }
  for (int p = 0; p < n_paths && probe_client >= 0; p++) {
    /* Every hold released, every attempt over: no node may be left on a fuzz path. */
    if (zkl_lock_new(clients[probe_client].handle, paths[p].text, &probe) != ZKL_OK) continue;
    long left = -1;
    int64_t give_up = now_ms() + 20000; /* background releases (of freed locks) finish */
    zkl_participants *list = NULL;
    while (zkl_lock_contenders(probe, &list) == ZKL_OK) {
      left = (long)list->count;
      if (left == 0 || now_ms() > give_up) break;
      zkl_participants_free(list);
      list = NULL;
      usleep(10000);
    }
    if (left != 0) {
      fail("tear-down: %ld node(s) left on %s", left, paths[p].text);
      for (size_t k = 0; list && k < list->count; k++) {
        const zkl_participant *n = &list->items[k];
        printf("#   left: %s, session %#" PRIx64 ", owner %s\n", n->node, (uint64_t)n->session_id, n->owner ? n->owner : "?");
      }
    }
    zkl_participants_free(list);
    zkl_lock_free(probe);
  }
  for (int c = 0; c < n_clients && failures; c++) {
    int64_t id = 0;
    zkl_client_session_id(clients[c].handle, &id);
    printf("#   live client %d: session %#" PRIx64 "\n", c, (uint64_t)id);
  }
  for (int i = 0; i < n_locks && failures; i++) {
    printf("#   lock %d: kind %d, path %s, client %d%s, counts %ld %ld %ld %ld\n", i, locks[i].kind, paths[locks[i].path].text,
           locks[i].client, locks[i].client_closed ? " (closed)" : "", locks[i].count[0], locks[i].count[1], locks[i].count[2],
           locks[i].count[3]);
  }
  while (n_locks) {
    check(F_lock_free, zkl_lock_free(locks[0].handle), &ok, "tear-down");
    drop_lock(0);
  }
  while (n_clients) {
    check(F_client_close, zkl_client_close(clients[0].handle), &ok, "tear-down");
    close_client_model(0);
  }
}

int main(int argc, char **argv) {
  const char *env_seconds = getenv("FUZZ_SECONDS"), *env_seed = getenv("FUZZ_SEED");
  double seconds = argc > 1 ? atof(argv[1]) : env_seconds ? atof(env_seconds) : 10;
  seed = argc > 2 ? strtoull(argv[2], NULL, 0) : env_seed && *env_seed ? strtoull(env_seed, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
  rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
  while (CODES < MAX_CODES && strcmp(zkl_result_str(CODES), "unknown result") != 0) CODES++;
  zk_connect = getenv("ZK_CONNECT");
  trace = getenv("FUZZ_TRACE") && *getenv("FUZZ_TRACE") == '1';
  if (zk_connect && !*zk_connect) zk_connect = NULL;
  printf("# fuzz_abi: seed %" PRIu64 ", %.0f s, %s\n", seed, seconds, zk_connect ? zk_connect : "no server (ZK_CONNECT unset)");
  fflush(stdout);
  snprintf(base, sizeof base, "/zklock-fuzz/%d-%" PRIu64, (int)getpid(), seed);
  owner_id[0] = zkl_thread_owner();
  owner_id[1] = 7, owner_id[2] = 1ULL << 40, owner_id[3] = (1ULL << 63) - 1;
  if (owner_id[0] < (1ULL << 63)) fail("zkl_thread_owner gave %" PRIu64 ", below 2^63", owner_id[0]);
  if (zk_connect) {
    zkl_client *client = NULL;
    if (zkl_client_connect(zk_connect, NULL, &client) != ZKL_OK) {
      printf("not ok - fuzz_abi: cannot connect to %s: %s\n", zk_connect, zkl_last_error_message());
      return 1;
    }
    add_client(client);
  }
  int64_t deadline = now_ms() + (int64_t)(seconds * 1000);
  while (now_ms() < deadline && failures < 1000) one_call();
  /* Under valgrind on a loaded machine the time allows a few hundred calls, too few to reach every
   * entry point by chance: go on until each is called once, for at most three times as long again. */
  int64_t extended_deadline = deadline + (int64_t)(seconds * 3000);
  while (zk_connect && untouched_entry_points() && now_ms() < extended_deadline && failures < 1000) one_call();
  if (now_ms() > deadline + 1000) printf("# ran %.1f s past the %.0f s asked, to call every entry point\n", (now_ms() - deadline) / 1000.0, seconds);
  tear_down();
  if (atomic_load(&callback_problems)) fail("%ld callbacks got a bad argument or saw a lost hold held", atomic_load(&callback_problems));

  printf("# %-34s %8s %8s  %s\n", "function", "calls", "bad", "codes seen");
  for (int f = 0; f < F_COUNT; f++) {
    char seen[512] = "";
    size_t len = 0;
    for (int c = 0; c <= CODES; c++)
      if (codes[f][c]) len += (size_t)snprintf(seen + len, sizeof seen - len, " %s=%ld", c <= ZKL_DEADLOCK ? code_name(c) + 4 : c < CODES ? code_name(c) : "OTHER", codes[f][c]);
    printf("# %-34s %8ld %8ld %s\n", fn_name[f], calls[f], bad_inputs[f], seen);
  }
  printf("# callbacks: %ld lost, %ld session state\n", atomic_load(&lost_callbacks), atomic_load(&state_callbacks));
  long untouched = untouched_entry_points();
  for (int f = 0; f < F_COUNT; f++)
    if (!calls[f]) printf("# never called: %s\n", fn_name[f]);
  if (untouched && zk_connect && seconds >= 5) fail("%ld entry points were never called", untouched);
  printf("fuzz_abi: %ld calls, %ld failed\n", total_calls, failures);
  printf(failures ? "not ok\n" : "ok\n");
  return failures ? 1 : 0;
}
