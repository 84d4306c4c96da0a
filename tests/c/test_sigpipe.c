/* No write of the library raises SIGPIPE. A child runs the checks with SIGPIPE at its default
 * disposition (which kills the process), and the parent checks how it ended. The client is told
 * the servers take 16 MB requests (they take 1 MB), so a 6 MB lock path is sent, and the server
 * closes the connection while the client is still writing it, every time it is sent: without MSG_NOSIGNAL this died of SIGPIPE (exit 141) in 2 of
 * 3 runs.
 * The writes to the closed socket must come back as errors (EPIPE), and the request the server
 * keeps refusing must end in ZKL_CONNECTION_LOSS, not a reconnect storm or a dead process. */
#define _GNU_SOURCE
#include "harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* The checks, in a child whose SIGPIPE is at its default action (death); it sends its counts
 * back through `counts` before it exits. */
static void child(int counts) {
  signal(SIGPIPE, SIG_DFL);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.jute_maxbuffer = 16 << 20;
  zkl_client *client = NULL;
  h_require(zkl_client_connect(h_zk_connect(), &opts, &client) == ZKL_OK, "connect");
  size_t n = 6 << 20;
  char *path = malloc(n + 200);
  h_unique_path(path, 200, "sigpipe");
  size_t base = strlen(path);
  memset(path + base, 'p', n);
  path[base + n] = '\0';
  zkl_lock *big = NULL, *small = NULL;
  h_require(zkl_lock_new(client, path, &big) == ZKL_OK, "a 6 MB path, within the client's limit");
  free(path);
  int64_t started = h_now_ms();
  CHECK_ERR(zkl_lock_acquire(big, 180000), ZKL_CONNECTION_LOSS, "jute.maxbuffer",
            "a request the server keeps refusing ends in ZKL_CONNECTION_LOSS naming the packet limit");
  CHECK(h_now_ms() - started < 100000, "after a few reconnections, not at the deadline");
  char small_path[200];
  h_unique_path(small_path, sizeof small_path, "sigpipe-small");
  h_require(zkl_lock_new(client, small_path, &small) == ZKL_OK, "small lock");
  CHECK_RC(zkl_lock_acquire(small, 10000), ZKL_OK, "the client goes on working");
  CHECK_RC(zkl_lock_release(small), ZKL_OK, "release");
  zkl_lock_free(small);
  zkl_lock_free(big);
  zkl_client_close(client);
  int sent[2] = {h_passed, h_failed};
  _exit(write(counts, sent, sizeof sent) == (ssize_t)sizeof sent ? 0 : 3);
}

int main(void) {
  int counts[2];
  h_require(pipe(counts) == 0, "a pipe for the child's counts");
  pid_t pid = fork();
  h_require(pid >= 0, "fork");
  if (pid == 0) {
    close(counts[0]);
    child(counts[1]);
  }
  close(counts[1]);
  int got[2] = {0, 0}, status = 0;
  ssize_t n = read(counts[0], got, sizeof got);
  h_require(waitpid(pid, &status, 0) == pid, "waitpid");
  h_passed += got[0], h_failed += got[1];
  CHECK(!(WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE), "the child was not killed by SIGPIPE");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && n == (ssize_t)sizeof got,
        "the child went on to the end and exited 0");
  return h_done();
}
