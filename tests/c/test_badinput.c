/* Every kind of bad input gets the right code and a message naming what was wrong, before any
 * network traffic: NULL pointers, invalid paths, connect strings, options, timeouts and owner
 * ids, closed, freed, forged and wrong-kind handles, blocking calls from a callback, and handles
 * used in a forked child (also while another thread uses handles). */
#define _GNU_SOURCE
#include "harness.h"
#include <zklock.h> /* a second include: the header's include guard must make it harmless */

#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define NULL_ARG(call, what) CHECK_ERR(call, ZKL_INVALID_ARGUMENT, what " is NULL", #call)

static void null_arguments(zkl_client *client, zkl_lock *lock) {
  zkl_client *c = NULL;
  zkl_lock *l = NULL;
  zkl_participants *p = NULL;
  zkl_session_state s;
  zkl_hold_state h;
  int64_t n;
  bool b;
  NULL_ARG(zkl_options_init(NULL), "opts");
  NULL_ARG(zkl_client_connect(NULL, NULL, &c), "hosts");
  NULL_ARG(zkl_client_connect(h_zk_connect(), NULL, NULL), "out");
  NULL_ARG(zkl_client_state(NULL, &s), "client");
  NULL_ARG(zkl_client_state(client, NULL), "out");
  NULL_ARG(zkl_client_session_id(NULL, &n), "client");
  NULL_ARG(zkl_client_session_id(client, NULL), "out");
  NULL_ARG(zkl_client_set_state_callback(NULL, NULL, NULL), "client");
  NULL_ARG(zkl_lock_new(NULL, "/x", &l), "client");
  NULL_ARG(zkl_lock_new(client, NULL, &l), "path");
  NULL_ARG(zkl_lock_new(client, "/x", NULL), "out");
  NULL_ARG(zkl_lock_acquire(NULL, 0), "lock");
  NULL_ARG(zkl_lock_acquire_as(NULL, 1, 0), "lock");
  NULL_ARG(zkl_lock_release(NULL), "lock");
  NULL_ARG(zkl_lock_release_as(NULL, 1), "lock");
  NULL_ARG(zkl_lock_is_held(NULL, &b), "lock");
  NULL_ARG(zkl_lock_is_held(lock, NULL), "out");
  NULL_ARG(zkl_lock_is_held_as(NULL, 1, &b), "lock");
  NULL_ARG(zkl_lock_is_held_as(lock, 1, NULL), "out");
  NULL_ARG(zkl_lock_state(NULL, &h), "lock");
  NULL_ARG(zkl_lock_state(lock, NULL), "out");
  NULL_ARG(zkl_lock_state_as(NULL, 1, &h), "lock");
  NULL_ARG(zkl_lock_state_as(lock, 1, NULL), "out");
  NULL_ARG(zkl_lock_fencing_token(NULL, &n), "lock");
  NULL_ARG(zkl_lock_fencing_token(lock, NULL), "out");
  NULL_ARG(zkl_lock_fencing_token_as(NULL, 1, &n), "lock");
  NULL_ARG(zkl_lock_fencing_token_as(lock, 1, NULL), "out");
  NULL_ARG(zkl_lock_sequence(NULL, &n), "lock");
  NULL_ARG(zkl_lock_sequence(lock, NULL), "out");
  NULL_ARG(zkl_lock_sequence_as(NULL, 1, &n), "lock");
  NULL_ARG(zkl_lock_sequence_as(lock, 1, NULL), "out");
  NULL_ARG(zkl_lock_set_lost_callback(NULL, NULL, NULL), "lock");
  NULL_ARG(zkl_lock_contenders(NULL, &p), "lock");
  NULL_ARG(zkl_lock_contenders(lock, NULL), "out");
  NULL_ARG(zkl_lock_holder(NULL, &p), "lock");
  NULL_ARG(zkl_lock_holder(lock, NULL), "out");
  CHECK(c == NULL && l == NULL && p == NULL, "NULL arguments: no output written on failure");
  CHECK(strncmp(zkl_last_error_message(), "zkl_lock_holder: ", 17) == 0, "messages: name the function");
}

static void bad_paths(zkl_client *client) {
  static const struct {
    const char *path, *why;
  } cases[] = {
      {"", "lock path is empty"},
      {"relative/path", "is relative"},
      {"/", "is the root"},
      {"/a/", "ends with '/'"},
      {"/a//b", "empty segment"},
      {"/a/../b", "relative segment"},
      {"/a/./b", "relative segment"},
      {"/a\x01", "U+0001"},
      {"/probe/\xf0\x9f\x94\x92", "U+1F512 (outside the Basic Multilingual Plane)"},
      {"/zookeeper", "under /zookeeper"},
      {"/zookeeper/quota", "under /zookeeper"},
      {"/bad-\xff-utf8", "not valid UTF-8"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zkl_lock *lock = NULL;
    char name[128];
    snprintf(name, sizeof name, "invalid path: %s", cases[i].why);
    CHECK_ERR(zkl_lock_new(client, cases[i].path, &lock), ZKL_INVALID_ARGUMENT, cases[i].why, name);
  }
}

/* Input over the limits that keep one client from harming a shared server (a 300,000-deep path
 * once had the client create every parent until the server died): refused at once, naming the
 * limit, with nothing sent (the lock's node count at the end of main). */
static void over_the_limits(zkl_client *client, const char *base) {
  size_t deep_len = 2 * 300000 + 1;
  char *deep = malloc(deep_len);
  h_require(deep != NULL, "allocate a deep path");
  for (size_t i = 0; i < 300000; i++) memcpy(deep + 2 * i, "/a", 2);
  deep[deep_len - 1] = '\0';
  zkl_lock *lock = NULL;
  int64_t start = h_now_ms();
  CHECK_ERR(zkl_lock_new(client, deep, &lock), ZKL_INVALID_ARGUMENT,
            "300000 segments deep, over zklock's limit of 64 segments", "limits: a 300,000-deep path");
  CHECK(h_now_ms() - start < 1000, "limits: the deep path is refused at once");
  CHECK(lock == NULL, "limits: no lock made");
  /* base is 2 deep: 62 more segments make it ZKL_MAX_PATH_DEPTH, 63 one over. */
  char at[512], over[512];
  snprintf(at, sizeof at, "%s", base);
  for (int i = 0; i < ZKL_MAX_PATH_DEPTH - 2; i++) strcat(at, "/a");
  strcpy(over, at);
  strcat(over, "/a");
  CHECK_ERR(zkl_lock_new(client, over, &lock), ZKL_INVALID_ARGUMENT, "65 segments deep", "limits: one segment over");
  CHECK_RC(zkl_lock_new(client, at, &lock), ZKL_OK, "limits: a path at the limit is taken");
  zkl_lock_free(lock);
  lock = NULL;

  char identifier[ZKL_MAX_IDENTIFIER_BYTES + 2];
  memset(identifier, 'i', sizeof identifier - 1);
  identifier[sizeof identifier - 1] = '\0';
  zkl_semaphore *semaphore = NULL;
  zkl_semaphore_options sopts;
  zkl_semaphore_options_init(&sopts);
  sopts.max_leases = 2;
  sopts.identifier = identifier;
  CHECK_ERR(zkl_semaphore_new_with(client, base, &sopts, &semaphore), ZKL_INVALID_ARGUMENT,
            "identifier of 1025 bytes, over zklock's limit of 1024 bytes", "limits: a long identifier");
  CHECK(semaphore == NULL, "limits: no semaphore made");

  zkl_acl_entry entries[ZKL_MAX_ACL_ENTRIES + 1];
  for (size_t i = 0; i < ZKL_MAX_ACL_ENTRIES + 1; i++) {
    entries[i].perms = ZKL_PERM_ALL;
    entries[i].scheme = "world";
    entries[i].id = "anyone";
  }
  zkl_lock_options opts;
  zkl_lock_options_init(&opts);
  opts.acl = ZKL_ACL_CUSTOM;
  opts.acl_entries = entries;
  opts.acl_entry_count = ZKL_MAX_ACL_ENTRIES + 1;
  CHECK_ERR(zkl_lock_new_with(client, base, &opts, &lock), ZKL_INVALID_ARGUMENT,
            "ACL has 33 entries, over zklock's limit of 32 entries", "limits: a long ACL");

  zkl_leases *leases = NULL;
  h_require(zkl_semaphore_new(client, base, INT32_MAX, &semaphore) == ZKL_OK, "make a semaphore");
  CHECK_ERR(zkl_semaphore_acquire(semaphore, ZKL_MAX_LEASES_PER_ACQUISITION + 1, 0, &leases), ZKL_INVALID_ARGUMENT,
            "1025 leases asked for at once, over zklock's limit of 1024 leases", "limits: too many leases at once");
  CHECK(leases == NULL, "limits: no leases");
  zkl_semaphore_free(semaphore);
  free(deep);
}

static void bad_connect(void) {
  static const struct {
    const char *hosts, *why;
  } cases[] = {
      {"", "connect string is empty"},
      {"/chroot", "names no host"},
      {"127.0.0.1:0", "bad port"},
      {"127.0.0.1:99999", "bad port"},
      {"127.0.0.1:2181/app/", "bad chroot"},
      {"127.0.0.1:2181/zookeeper", "under /zookeeper"},
  };
  int64_t start = h_now_ms();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zkl_client *client = NULL;
    char name[128];
    snprintf(name, sizeof name, "invalid connect string: %s", cases[i].why);
    CHECK_ERR(zkl_client_connect(cases[i].hosts, NULL, &client), ZKL_INVALID_ARGUMENT, cases[i].why, name);
  }
  zkl_options opts;
  zkl_options_init(&opts);
  opts.session_timeout_ms = -1;
  zkl_client *client = NULL;
  CHECK_ERR(zkl_client_connect(h_zk_connect(), &opts, &client), ZKL_INVALID_ARGUMENT, "opts->session_timeout_ms is -1",
            "options: a negative session timeout");
  zkl_options_init(&opts);
  opts.connect_timeout_ms = -5;
  CHECK_ERR(zkl_client_connect(h_zk_connect(), &opts, &client), ZKL_INVALID_ARGUMENT, "opts->connect_timeout_ms is -5",
            "options: a negative connect timeout");
  zkl_options_init(&opts);
  opts.digest_auth = "no-colon";
  CHECK_ERR(zkl_client_connect(h_zk_connect(), &opts, &client), ZKL_INVALID_ARGUMENT, "user:password",
            "options: digest auth without user:password");
  /* Nothing listens on port 1: a short connect timeout must give up with ZKL_TIMEOUT. */
  zkl_options_init(&opts);
  opts.connect_timeout_ms = 300;
  CHECK(h_now_ms() - start < 1000, "invalid input is refused before any network traffic (fast)");
  CHECK_ERR(zkl_client_connect("127.0.0.1:1", &opts, &client), ZKL_TIMEOUT, "connect timeout",
            "connect: no server within the connect timeout is ZKL_TIMEOUT");
  CHECK(client == NULL, "connect: no client on failure");
}

static void use_after_close(void) {
  zkl_client *client = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "closed");
  zkl_lock *lock = NULL, *held = NULL;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "make a lock");
  CHECK_ERR(zkl_lock_acquire((zkl_lock *)client, 0), ZKL_INVALID_ARGUMENT, "is a zkl_client, not a zkl_lock",
            "wrong kind: a client passed as a lock");
  CHECK_ERR(zkl_client_state((zkl_client *)lock, &(zkl_session_state){0}), ZKL_INVALID_ARGUMENT,
            "is a zkl_lock, not a zkl_client", "wrong kind: a lock passed as a client");
  CHECK_ERR(zkl_lock_free((zkl_lock *)client), ZKL_INVALID_ARGUMENT, "not a zkl_lock", "wrong kind: freeing a client as a lock");
  CHECK_ERR(zkl_lock_acquire((zkl_lock *)(uintptr_t)0x12345670, 0), ZKL_INVALID_ARGUMENT, "not a live zkl_lock",
            "forged handle: refused, never dereferenced");

  h_require(zkl_lock_new(client, path, &held) == ZKL_OK && zkl_lock_acquire(held, -1) == ZKL_OK, "hold a lock");
  CHECK_RC(zkl_client_close(client), ZKL_OK, "close the client");
  zkl_session_state state;
  CHECK_ERR(zkl_client_state(client, &state), ZKL_INVALID_ARGUMENT, "not a live zkl_client", "use after close: state");
  CHECK_ERR(zkl_lock_new(client, path, &(zkl_lock *){NULL}), ZKL_INVALID_ARGUMENT, "not a live zkl_client",
            "use after close: zkl_lock_new");
  CHECK_ERR(zkl_client_close(client), ZKL_INVALID_ARGUMENT, "not a live zkl_client", "use after close: a second close");
  CHECK_ERR(zkl_lock_acquire(lock, 0), ZKL_CLOSED, "the client was closed", "a lock of a closed client: ZKL_CLOSED");
  zkl_hold_state hold = ZKL_HOLD_HELD;
  zkl_lock_state(held, &hold);
  CHECK(hold == ZKL_HOLD_LOST, "a lock of a closed client: its hold is LOST");
  CHECK_ERR(zkl_lock_release(held), ZKL_LOCK_LOST, "closed", "a lock of a closed client: release is ZKL_LOCK_LOST");
  CHECK_RC(zkl_lock_free(lock), ZKL_OK, "free a lock after its client was closed");
  CHECK_RC(zkl_lock_free(held), ZKL_OK, "free the other one");
  CHECK_ERR(zkl_lock_acquire(lock, 0), ZKL_INVALID_ARGUMENT, "not a live zkl_lock", "use after free: acquire");
  CHECK_ERR(zkl_lock_release(lock), ZKL_INVALID_ARGUMENT, "not a live zkl_lock", "use after free: release");
  bool b;
  CHECK_ERR(zkl_lock_is_held(lock, &b), ZKL_INVALID_ARGUMENT, "not a live zkl_lock", "use after free: is_held");
  CHECK_ERR(zkl_lock_free(lock), ZKL_INVALID_ARGUMENT, "not a live zkl_lock", "use after free: a second free");
}

/* A session callback that tries blocking calls (refused) and a cheap one (allowed). */
typedef struct {
  zkl_lock *lock;
  int acquire_rc, contenders_rc, connect_rc, is_held_rc;
  char message[256];
} callback_calls;

static void on_state_try_blocking(void *userdata, zkl_client *client, zkl_session_state state) {
  (void)client;
  callback_calls *calls = userdata;
  if (state != ZKL_SESSION_STATE_CLOSED) return;
  zkl_participants *list = NULL;
  zkl_client *other = NULL;
  bool held;
  calls->acquire_rc = zkl_lock_acquire(calls->lock, 0);
  snprintf(calls->message, sizeof calls->message, "%s", zkl_last_error_message());
  calls->contenders_rc = zkl_lock_contenders(calls->lock, &list);
  calls->connect_rc = zkl_client_connect(h_zk_connect(), NULL, &other);
  calls->is_held_rc = zkl_lock_is_held(calls->lock, &held);
}

static void blocking_in_callback(void) {
  zkl_client *client = h_connect(), *second = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "callback");
  callback_calls calls = {NULL, -1, -1, -1, -1, ""};
  h_require(zkl_lock_new(second, path, &calls.lock) == ZKL_OK, "make a lock");
  zkl_client_set_state_callback(client, on_state_try_blocking, &calls);
  CHECK_RC(zkl_client_close(client), ZKL_OK, "callbacks: close delivers CLOSED to the callback");
  CHECK(calls.acquire_rc == ZKL_INVALID_ARGUMENT && strstr(calls.message, "callback") != NULL,
        "callbacks: a blocking acquire inside one is ZKL_INVALID_ARGUMENT, saying why");
  CHECK(calls.contenders_rc == ZKL_INVALID_ARGUMENT && calls.connect_rc == ZKL_INVALID_ARGUMENT,
        "callbacks: so are contenders and connect");
  CHECK(calls.is_held_rc == ZKL_OK, "callbacks: non-blocking queries work inside one");
  CHECK(h_contenders(calls.lock) == 0, "callbacks: the refused acquire left nothing behind");
  zkl_lock_free(calls.lock);
  zkl_client_close(second);
}

/* Ends a forked child with `status`, through exec: what the parent's threads owned is
 * unreachable in the child (they do not exist there), which valgrind's leak check at exit would
 * report as lost. */
static void exit_through_exec(int status) {
  char code[16];
  snprintf(code, sizeof code, "exit %d", status);
  execl("/bin/sh", "sh", "-c", code, (char *)NULL);
  _exit(127);
}

/* In the forked child: a new client connects, and a lock of its own is acquired, held and
 * released. 1 if every step worked; otherwise prints the step that failed. */
static int fork_child_new_client(void) {
  char path[200];
  h_unique_path(path, sizeof path, "fork-child");
  zkl_client *client = NULL;
  zkl_lock *lock = NULL;
  bool held = false, released = true;
  const char *failed = NULL;
  if (zkl_client_connect(h_zk_connect(), NULL, &client) != ZKL_OK) failed = "connect";
  else if (zkl_lock_new(client, path, &lock) != ZKL_OK) failed = "zkl_lock_new";
  else if (zkl_lock_acquire(lock, 10000) != ZKL_OK) failed = "acquire";
  else if (zkl_lock_is_held(lock, &held) != ZKL_OK || !held) failed = "is_held while held";
  else if (zkl_lock_release(lock) != ZKL_OK) failed = "release";
  else if (zkl_lock_is_held(lock, &released) != ZKL_OK || released) failed = "is_held after release";
  if (failed != NULL) printf("# fork child: new client: %s failed: \"%s\"\n", failed, zkl_last_error_message());
  if (lock != NULL && zkl_lock_free(lock) != ZKL_OK && failed == NULL) failed = "zkl_lock_free";
  if (client != NULL && zkl_client_close(client) != ZKL_OK && failed == NULL) failed = "zkl_client_close";
  return failed == NULL;
}

/* In a child forked after zklock was in use, the parent's handles are refused at once with a
 * message saying why (they belong to the parent's runtime and sessions, whose threads the child
 * does not have); a new client there works, on the fresh runtime the child starts. */
static void handles_across_fork(void) {
  zkl_client *client = h_connect();
  zkl_lock *lock = NULL;
  char path[200];
  h_unique_path(path, sizeof path, "fork");
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "make a lock");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    zkl_session_state state;
    int handles_refused = zkl_client_state(client, &state) == ZKL_INVALID_ARGUMENT &&
                          strstr(zkl_last_error_message(), "before fork()") != NULL &&
                          zkl_lock_acquire(lock, 0) == ZKL_INVALID_ARGUMENT;
    if (!handles_refused) printf("# fork child: parent's handles: last error \"%s\"\n", zkl_last_error_message());
    int new_client_works = fork_child_new_client();
    fflush(stdout);
    exit_through_exec((handles_refused ? 0 : 1) | (new_client_works ? 0 : 2));
  }
  int status = -1;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status)) printf("# fork child: wait status %#x\n", (unsigned)status);
  CHECK(WIFEXITED(status) && (WEXITSTATUS(status) & 1) == 0, "fork: the parent's handles are refused in the child");
  CHECK(WIFEXITED(status) && (WEXITSTATUS(status) & 2) == 0, "fork: a new client in the child connects, acquires and releases");
  CHECK_RC(zkl_lock_acquire(lock, 10000), ZKL_OK, "fork: the parent's handles still work in the parent");
  zkl_lock_release(lock);
  zkl_lock_free(lock);
  zkl_client_close(client);
}

/* Another thread keeps making and freeing lock handles, each of which takes the handle
 * registry's lock, while this one forks. A child's first zkl_ call must not find that lock held
 * by a thread the child does not have: it answers at once instead of hanging. */
static atomic_bool churning;

static void *churn_handles(void *arg) {
  zkl_client *client = arg;
  while (atomic_load(&churning)) {
    zkl_lock *lock = NULL;
    if (zkl_lock_new(client, "/zklock-test/fork-churn", &lock) == ZKL_OK) zkl_lock_free(lock);
  }
  return NULL;
}

/* Waits for the child to end. 1 if it exited 0; a child that hung was ended by its alarm. */
static int child_exited_ok(pid_t pid) {
  int status = -1;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM) printf("# fork child %d: hung, ended by its alarm\n", (int)pid);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* How many children the churn forks: ZKL_FORK_CHURN if set (scripts/test-c asks for a few under
 * valgrind, where forks are slow), else 200 (natively well under a second; before the fix, 7 of
 * 20 children hung). */
static int churn_forks(void) {
  const char *forks = getenv("ZKL_FORK_CHURN");
  int n = forks != NULL ? atoi(forks) : 200;
  h_require(n > 0, "ZKL_FORK_CHURN is a positive number of forks");
  return n;
}

static void fork_while_another_thread_uses_handles(void) {
  const int forks = churn_forks();
  zkl_client *client = h_connect();
  atomic_store(&churning, true);
  pthread_t thread;
  h_require(pthread_create(&thread, NULL, churn_handles, client) == 0, "start the churning thread");
  int answered = 0;
  for (int i = 0; i < forks; i++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(20); /* a child stuck on an inherited lock is ended, and counted as not answering */
      zkl_session_state state;
      /* Looks the parent's handle up in the registry: refused at once, as made before fork(). */
      exit_through_exec(zkl_client_state(client, &state) == ZKL_INVALID_ARGUMENT ? 0 : 1);
    }
    answered += pid > 0 && child_exited_ok(pid);
  }
  atomic_store(&churning, false);
  pthread_join(thread, NULL);
  zkl_client_close(client);
  if (answered != forks) printf("# %d of %d children answered\n", answered, forks);
  CHECK(answered == forks, "fork: children forked while another thread uses handles answer at once");
}

int main(void) {
  zkl_client *client = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "badinput");
  zkl_lock *lock = NULL;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "make a lock");
  null_arguments(client, lock);
  bad_paths(client);
  over_the_limits(client, path);
  bad_connect();
  CHECK_ERR(zkl_lock_acquire(lock, -7), ZKL_INVALID_ARGUMENT, "timeout_ms is -7", "timeout: below -1");
  CHECK_ERR(zkl_lock_acquire_as(lock, UINT64_MAX, 0), ZKL_INVALID_ARGUMENT, "neither an explicit id", "owner: a bad id");
  CHECK(h_contenders(lock) == 0, "bad input: no node was ever made");
  zkl_lock_free(lock);
  zkl_client_close(client);
  use_after_close();
  blocking_in_callback();
  handles_across_fork();
  fork_while_another_thread_uses_handles();
  return h_done();
}
