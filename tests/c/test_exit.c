/* Process exit and the end of a client while zklock's callbacks run (issue 45, item 5, as the
 * Python suite's test_exit.py does for Python): short child processes (this program run again
 * with a trigger), each set up so that a callback is running, busy for good, or just due on the
 * client's callback thread (zklock-callback) when the process ends, by exit() from main, exit()
 * from inside the callback, or a return from main with the client left open; and a close or a
 * lock's free racing a running callback whose userdata is freed as soon as it returns. Each
 * child must end by itself with EXIT_CODE: no crash (a signal), no hang (killed after
 * ZKL_EXIT_CHILD_TIMEOUT_MS), no other status. ZKL_EXIT_RUNS runs per trigger (default 40, 4
 * at a time); the valgrind pass runs a few per trigger with the children under valgrind too
 * (scripts/test-c), where an error exits 99. */
#define _GNU_SOURCE
#include "harness.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#define EXIT_CODE 7
#define MAGIC 0x7a6b6c6fu

/* ------------------------------------------------------------------------------ child side */

typedef struct {
  _Atomic unsigned magic; /* MAGIC while the userdata is live; the callback aborts on anything else */
  h_event started;
  zkl_client *client;
  zkl_lock *lock;
  _Atomic int calls;
} userdata_t;

static userdata_t *new_userdata(void) {
  userdata_t *u = calloc(1, sizeof *u);
  pthread_mutex_init(&u->started.mutex, NULL);
  pthread_cond_init(&u->started.cond, NULL);
  atomic_store(&u->magic, MAGIC);
  return u;
}

/* The callback's own check that its userdata is live: zklock promises that once the unregistering
 * call (or the close, or the free) returns, the callback is not running and never runs again. */
static void check_live(userdata_t *u) {
  if (atomic_load(&u->magic) != MAGIC) {
    static const char message[] = "callback ran with freed userdata\n";
    (void)!write(2, message, sizeof message - 1);
    abort();
  }
}

/* Forever inside the callback, calling into zklock (calls allowed there) as the process ends. */
static void busy(userdata_t *u) {
  h_event_fire(&u->started);
  for (;;) {
    zkl_session_state state;
    zkl_hold_state hold;
    if (u->client != NULL) zkl_client_state(u->client, &state);
    if (u->lock != NULL) zkl_lock_state_as(u->lock, zkl_thread_owner(), &hold);
  }
}

/* A short spell of work inside the callback, its userdata checked before and after. */
static void brief_work(userdata_t *u) {
  check_live(u);
  int64_t until = h_now_ms() + (rand() % 3);
  while (h_now_ms() < until) check_live(u);
  atomic_fetch_add(&u->calls, 1);
  check_live(u);
}

static const char *trigger;

static void on_state(void *userdata, zkl_client *client, zkl_session_state state) {
  (void)client;
  (void)state;
  userdata_t *u = userdata;
  if (strcmp(trigger, "state-busy") == 0) busy(u);
  if (strcmp(trigger, "state-exit-inside") == 0) exit(EXIT_CODE);
  brief_work(u);
}

static void on_lost(void *userdata, zkl_lock *lock, uint64_t owner, zkl_lost_reason reason) {
  (void)lock;
  (void)owner;
  (void)reason;
  userdata_t *u = userdata;
  if (strcmp(trigger, "lost-busy") == 0) busy(u);
  if (strcmp(trigger, "lost-exit-inside") == 0) exit(EXIT_CODE);
  brief_work(u);
}

static void *close_client(void *arg) {
  zkl_client_close(arg);
  return NULL;
}

static zkl_client *child_connect(void) {
  zkl_client *client = NULL;
  if (zkl_client_connect(h_zk_connect(), NULL, &client) != ZKL_OK) {
    fprintf(stderr, "connect: %s\n", zkl_last_error_message());
    exit(3);
  }
  return client;
}

/* A client holding the lock at path, with a state and a lost callback on u. */
static void hold_with_callbacks(userdata_t *u, const char *path) {
  u->client = child_connect();
  if (zkl_lock_new(u->client, path, &u->lock) != ZKL_OK || zkl_lock_acquire(u->lock, 10000) != ZKL_OK) {
    fprintf(stderr, "acquire: %s\n", zkl_last_error_message());
    exit(3);
  }
  zkl_client_set_state_callback(u->client, on_state, u);
  zkl_lock_set_lost_callback(u->lock, on_lost, u);
}

static int child(const char *path) {
  userdata_t *u = new_userdata();
  hold_with_callbacks(u, path);
  pthread_t closer;
  if (strcmp(trigger, "state-busy") == 0 || strcmp(trigger, "lost-busy") == 0) {
    /* The close (on a thread of its own: it waits for the callbacks) makes the Closed state and
     * the lost hold due; the callback that runs never returns; main exits. */
    pthread_create(&closer, NULL, close_client, u->client);
    if (!h_event_wait(&u->started, 1, 10000)) return 4;
    exit(EXIT_CODE);
  }
  if (strcmp(trigger, "state-exit-inside") == 0 || strcmp(trigger, "lost-exit-inside") == 0) {
    /* The callback calls exit() while main waits in the close. */
    zkl_client_close(u->client);
    return 5; /* the close returned: the callback never called exit() */
  }
  if (strcmp(trigger, "exit-while-due") == 0) {
    /* The callbacks just due (the close under way on another thread) as main exits. */
    pthread_create(&closer, NULL, close_client, u->client);
    exit(EXIT_CODE);
  }
  if (strcmp(trigger, "return-open") == 0) {
    /* main returns with the client open, the lock held and both callbacks registered. */
    return EXIT_CODE;
  }
  if (strcmp(trigger, "close-race") == 0) {
    /* The close from another thread makes both callbacks due (each works a little, checking its
     * userdata); main unregisters them at a random moment and frees the userdata at once. */
    pthread_create(&closer, NULL, close_client, u->client);
    h_sleep_ms(rand() % 3);
    zkl_lock_set_lost_callback(u->lock, NULL, NULL);
    zkl_client_set_state_callback(u->client, NULL, NULL); /* ZKL_INVALID_ARGUMENT once closed: then it returned */
    pthread_join(closer, NULL);
    atomic_store(&u->magic, 0);
    free(u);
    return EXIT_CODE;
  }
  if (strcmp(trigger, "free-race") == 0) {
    /* zkl_lock_free racing the lost callback the close made due: once it returns the callback
     * is not running, so its userdata goes at once, before the close has ended. (The state
     * callback, which the close calls last, is unregistered first.) */
    zkl_client_set_state_callback(u->client, NULL, NULL);
    pthread_create(&closer, NULL, close_client, u->client);
    h_sleep_ms(rand() % 3);
    zkl_lock_free(u->lock);
    atomic_store(&u->magic, 0);
    pthread_join(closer, NULL);
    free(u);
    return EXIT_CODE;
  }
  fprintf(stderr, "unknown trigger %s\n", trigger);
  return 2;
}

/* ------------------------------------------------------------------------------ parent side */

static const char *TRIGGERS[] = {"state-busy",  "lost-busy",  "state-exit-inside", "lost-exit-inside",
                                 "exit-while-due", "return-open", "close-race", "free-race"};
#define NTRIGGERS (sizeof TRIGGERS / sizeof TRIGGERS[0])

typedef struct {
  pid_t pid;
  size_t trigger;
  int64_t started;
} running_t;

static int env_int(const char *name, int fallback) {
  const char *value = getenv(name);
  return value != NULL && *value != '\0' ? atoi(value) : fallback;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--child") == 0) {
    trigger = argv[2];
    srand((unsigned)getpid());
    return child(argv[3]);
  }
  /* This program's own path (under valgrind, the program's, not valgrind's). */
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  h_require(len > 0, "readlink /proc/self/exe");
  self[len] = '\0';
  int runs = env_int("ZKL_EXIT_RUNS", 40), timeout_ms = env_int("ZKL_EXIT_CHILD_TIMEOUT_MS", 20000);
  /* Under scripts/test-c's valgrind pass, each child runs under valgrind too (its command here). */
  const char *wrapper = getenv("ZKL_EXIT_CHILD_VALGRIND");
  int crashed[NTRIGGERS] = {0}, hung[NTRIGGERS] = {0}, other[NTRIGGERS] = {0}, clean[NTRIGGERS] = {0};
  char detail[NTRIGGERS][160];
  memset(detail, 0, sizeof detail);
  size_t total = (size_t)runs * NTRIGGERS, next = 0, done = 0;
  running_t pool[4] = {0};
  int64_t slowest = 0;
  while (done < total) {
    for (size_t slot = 0; slot < 4 && next < total; slot++) {
      if (pool[slot].pid != 0) continue;
      size_t t = next++ % NTRIGGERS;
      char path[200];
      h_unique_path(path, sizeof path, "exit");
      pid_t pid = fork();
      if (pid == 0) {
        if (wrapper != NULL && *wrapper != '\0') {
          execl("/bin/sh", "sh", "-c", "exec $ZKL_EXIT_CHILD_VALGRIND \"$0\" --child \"$1\" \"$2\"", self, TRIGGERS[t], path,
                (char *)NULL);
        } else {
          execl(self, self, "--child", TRIGGERS[t], path, (char *)NULL);
        }
        _exit(127);
      }
      pool[slot] = (running_t){pid, t, h_now_ms()};
    }
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) {
      h_sleep_ms(2);
      for (size_t slot = 0; slot < 4; slot++) {
        if (pool[slot].pid != 0 && h_now_ms() - pool[slot].started > timeout_ms) kill(pool[slot].pid, SIGKILL);
      }
      continue;
    }
    for (size_t slot = 0; slot < 4; slot++) {
      if (pool[slot].pid != pid) continue;
      size_t t = pool[slot].trigger;
      int64_t took = h_now_ms() - pool[slot].started;
      if (took > slowest) slowest = took;
      if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && took > timeout_ms) {
        if (hung[t]++ == 0) snprintf(detail[t], sizeof detail[t], "hung (killed after %d ms)", timeout_ms);
      } else if (WIFSIGNALED(status)) {
        if (crashed[t]++ == 0) snprintf(detail[t], sizeof detail[t], "died of signal %d", WTERMSIG(status));
      } else if (WEXITSTATUS(status) != EXIT_CODE) {
        if (other[t]++ == 0) snprintf(detail[t], sizeof detail[t], "exit status %d", WEXITSTATUS(status));
      } else {
        clean[t]++;
      }
      pool[slot].pid = 0;
      done++;
    }
  }
  for (size_t t = 0; t < NTRIGGERS; t++) {
    char name[200];
    snprintf(name, sizeof name, "%s: %d runs, each ends by itself with exit status %d (no crash, no hang)", TRIGGERS[t],
             runs, EXIT_CODE);
    h_report(clean[t] == runs, name, "%d crashed, %d hung, %d other status; first: %s", crashed[t], hung[t], other[t],
             detail[t]);
  }
  printf("# slowest child: %" PRId64 " ms\n", slowest);
  return h_done();
}
