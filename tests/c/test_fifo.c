/* FIFO across two processes: waiters from this process and a forked child, queued alternately,
 * get the lock in exactly the order they queued, with rising fencing tokens. Each process makes
 * its own client (handles made before fork() are refused in the child). */
#define _GNU_SOURCE
#include "harness.h"

#include <sys/wait.h>

#define WAITERS 4 /* queued as child, parent, child, parent */

static int order_fd; /* write end of the pipe where each waiter reports when it got the lock */

typedef struct {
  zkl_lock *lock;
  char name[8];
  int rc;
} waiter;

static void *wait_then_report(void *arg) {
  waiter *w = arg;
  w->rc = zkl_lock_acquire(w->lock, 60000);
  if (w->rc == ZKL_OK) {
    int64_t token = 0;
    zkl_lock_fencing_token(w->lock, &token);
    char line[64];
    int n = snprintf(line, sizeof line, "%s %" PRId64 "\n", w->name, token);
    /* One write below PIPE_BUF: atomic, so the two processes' lines never interleave. */
    if (write(order_fd, line, (size_t)n) != n) w->rc = -1;
    w->rc = zkl_lock_release(w->lock);
  }
  return NULL;
}

/* The child: one waiter thread per line read from `commands`; exits once they all finished. */
static int child(int commands, const char *path) {
  zkl_client *client = NULL;
  zkl_lock *lock = NULL;
  if (zkl_client_connect(h_zk_connect(), NULL, &client) != ZKL_OK || zkl_lock_new(client, path, &lock) != ZKL_OK) return 10;
  waiter waiters[WAITERS];
  pthread_t threads[WAITERS];
  int started = 0;
  char name[8];
  FILE *in = fdopen(commands, "r");
  while (started < WAITERS && fgets(name, sizeof name, in) != NULL) {
    name[strcspn(name, "\n")] = '\0';
    waiters[started] = (waiter){lock, "", -1};
    snprintf(waiters[started].name, sizeof waiters[started].name, "%s", name);
    pthread_create(&threads[started], NULL, wait_then_report, &waiters[started]);
    started++;
  }
  int failed = 0;
  for (int i = 0; i < started; i++) {
    pthread_join(threads[i], NULL);
    failed |= waiters[i].rc != ZKL_OK;
  }
  fclose(in);
  zkl_lock_free(lock);
  zkl_client_close(client);
  return failed ? 11 : 0;
}

int main(void) {
  char path[200];
  h_unique_path(path, sizeof path, "fifo");
  int commands[2], order[2];
  h_require(pipe(commands) == 0 && pipe(order) == 0, "pipes");
  order_fd = order[1];
  fflush(stdout);
  pid_t pid = fork();
  h_require(pid >= 0, "fork");
  if (pid == 0) {
    close(commands[1]);
    close(order[0]);
    _exit(child(commands[0], path));
  }
  close(commands[0]);

  zkl_client *client = h_connect();
  zkl_lock *lock = NULL;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "make the lock");
  h_require(zkl_lock_acquire(lock, -1) == ZKL_OK, "the parent's main thread holds the lock");

  const char *queue[WAITERS] = {"c1", "p1", "c2", "p2"};
  waiter waiters[WAITERS];
  pthread_t threads[WAITERS];
  int parents = 0;
  for (int i = 0; i < WAITERS; i++) {
    if (queue[i][0] == 'c') {
      char line[8];
      int n = snprintf(line, sizeof line, "%s\n", queue[i]);
      h_require(write(commands[1], line, (size_t)n) == n, "command the child");
    } else {
      waiters[parents] = (waiter){lock, "", -1};
      snprintf(waiters[parents].name, sizeof waiters[parents].name, "%s", queue[i]);
      pthread_create(&threads[parents], NULL, wait_then_report, &waiters[parents]);
      parents++;
    }
    char what[64];
    snprintf(what, sizeof what, "queue: %s is queued (contender %d)", queue[i], i + 2);
    CHECK(h_wait_contenders(lock, i + 2, 15000), what);
  }
  close(commands[1]);
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "the holder releases");

  FILE *in = fdopen(order[0], "r");
  char line[64];
  int got = 0, in_order = 1;
  int64_t last_token = 0;
  int tokens_rise = 1;
  while (got < WAITERS && fgets(line, sizeof line, in) != NULL) {
    char name[8];
    int64_t token = 0;
    if (sscanf(line, "%7s %" SCNd64, name, &token) != 2) break;
    printf("# got the lock: %s (fencing token %" PRId64 ")\n", name, token);
    if (strcmp(name, queue[got]) != 0) in_order = 0;
    if (token <= last_token) tokens_rise = 0;
    last_token = token;
    got++;
  }
  CHECK(got == WAITERS, "fifo: every waiter got the lock");
  CHECK(in_order, "fifo: in the order they queued, across both processes");
  CHECK(tokens_rise, "fifo: fencing tokens rise in that order");
  for (int i = 0; i < parents; i++) pthread_join(threads[i], NULL);
  close(order[1]);
  CHECK(waiters[0].rc == ZKL_OK && waiters[1].rc == ZKL_OK, "fifo: the parent's waiters released cleanly");
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fifo: the child process's waiters finished cleanly");
  CHECK(h_contenders(lock) == 0, "nothing left behind");
  fclose(in);
  zkl_lock_free(lock);
  zkl_client_close(client);
  return h_done();
}
