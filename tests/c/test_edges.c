/* The core's hardening, seen from C: requests over the packet limit, connect errors that say
 * why, a missing chroot, out-of-range session timeouts, and callbacks that block without
 * stalling anyone's session. Runs with SIGPIPE at its default disposition, as a C host does. */
#define _GNU_SOURCE
#include "harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

/* A loopback port that nothing listens on (bound, then closed). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  h_require(bind(fd, (struct sockaddr *)&addr, sizeof addr) == 0 &&
                getsockname(fd, (struct sockaddr *)&addr, &len) == 0,
            "bind a loopback port");
  close(fd);
  return ntohs(addr.sin_port);
}

static void oversized_requests(void) {
  zkl_client *client = h_connect();
  size_t n = 1100000;
  char *path = malloc(n + 32);
  strcpy(path, "/zklock-c-tests/");
  memset(path + strlen(path), 'p', n);
  path[16 + n] = '\0';
  zkl_lock *lock = NULL;
  int64_t started = h_now_ms();
  CHECK_ERR(zkl_lock_new(client, path, &lock), ZKL_INVALID_ARGUMENT, "jute.maxbuffer",
            "a 1.1 MB lock path is refused up front, naming the packet limit");
  CHECK(h_now_ms() - started < 5000, "refused at once (zkl_lock_new sends nothing)");
  free(path);

  /* The limit follows the servers': a small one refuses a path that a default one accepts. */
  char small_path[1200];
  h_unique_path(small_path, 200, "edges-limit");
  size_t base = strlen(small_path);
  memset(small_path + base, 'q', 1000);
  small_path[base + 1000] = '\0';
  zkl_options opts;
  zkl_options_init(&opts);
  opts.jute_maxbuffer = 1024;
  zkl_client *small = NULL;
  CHECK_RC(zkl_client_connect(h_zk_connect(), &opts, &small), ZKL_OK, "connect with jute_maxbuffer 1024");
  CHECK_ERR(zkl_lock_new(small, small_path, &lock), ZKL_INVALID_ARGUMENT, "packet limit of 1024 bytes",
            "a 1 KB path is over a 1 KB packet limit");
  CHECK_RC(zkl_lock_new(client, small_path, &lock), ZKL_OK, "and fits the default limit");
  CHECK_RC(zkl_lock_acquire(lock, 10000), ZKL_OK, "which the server accepts");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "release");
  zkl_lock_free(lock);
  opts.jute_maxbuffer = 10;
  zkl_client *tiny = NULL;
  CHECK_ERR(zkl_client_connect(h_zk_connect(), &opts, &tiny), ZKL_INVALID_ARGUMENT, "jute_maxbuffer",
            "a packet limit too small for any lock is refused");
  opts.jute_maxbuffer = (int64_t)1 << 40;
  CHECK_ERR(zkl_client_connect(h_zk_connect(), &opts, &tiny), ZKL_INVALID_ARGUMENT, "jute_maxbuffer",
            "a packet limit past 32 bits is refused");
  zkl_client_close(small);
  zkl_client_close(client);
}

static void connect_errors(void) {
  zkl_options opts;
  zkl_options_init(&opts);
  opts.connect_timeout_ms = 2000;
  char refused[64];
  snprintf(refused, sizeof refused, "127.0.0.1:%d", free_port());
  zkl_client *client = NULL;
  CHECK_ERR(zkl_client_connect(refused, &opts, &client), ZKL_TIMEOUT, "connection refused",
            "a refused port is named as such");
  CHECK(strstr(zkl_last_error_message(), refused) != NULL, "the message carries the connect string");
  CHECK_ERR(zkl_client_connect("no-such-host.invalid:2181", &opts, &client), ZKL_TIMEOUT, "cannot resolve",
            "an unknown host is named as such");

  char chrooted[512];
  snprintf(chrooted, sizeof chrooted, "%s/zklock-c-no-such-chroot-%d", h_zk_connect(), (int)getpid());
  CHECK_ERR(zkl_client_connect(chrooted, NULL, &client), ZKL_ZOOKEEPER, "does not exist",
            "a missing chroot says so");
  CHECK(zkl_last_error_zookeeper_code() == -101, "as NoNode");

  zkl_options_init(&opts);
  opts.session_timeout_ms = 2147484000;
  CHECK_ERR(zkl_client_connect("127.0.0.1:1", &opts, &client), ZKL_INVALID_ARGUMENT, "session timeout",
            "a session timeout past 2^31 ms is refused, not wrapped");
}

static h_event lost_called = H_EVENT_INIT;
static h_event unblock = H_EVENT_INIT;

static void blocking_lost(void *userdata, zkl_lock *lock, uint64_t owner, zkl_lost_reason reason) {
  (void)userdata, (void)lock, (void)owner, (void)reason;
  h_event_fire(&lost_called);
  h_event_wait(&unblock, 1, 20000);
}

static void *close_client(void *client) {
  zkl_client_close(client); /* returns once the callbacks due before Closed have run */
  return NULL;
}

/* Two lost-lock callbacks that block must not stall another client: callbacks run on their
 * client's own callback thread, one after the other. */
static void blocking_callbacks(void) {
  zkl_client *victim = h_connect(), *bystander = h_connect();
  char path[200], other_path[220];
  h_unique_path(path, sizeof path, "edges-callbacks");
  zkl_lock *locks[2];
  for (int i = 0; i < 2; i++) {
    char p[240];
    snprintf(p, sizeof p, "%s-%d", path, i);
    h_require(zkl_lock_new(victim, p, &locks[i]) == ZKL_OK && zkl_lock_acquire(locks[i], 10000) == ZKL_OK,
              "hold two locks");
    zkl_lock_set_lost_callback(locks[i], blocking_lost, NULL);
  }
  pthread_t closer; /* closing loses both holds: both callbacks block in turn */
  h_require(pthread_create(&closer, NULL, close_client, victim) == 0, "start closing");
  CHECK(h_event_wait(&lost_called, 1, 10000), "a lost-lock callback runs");
  snprintf(other_path, sizeof other_path, "%s-other", path);
  zkl_lock *other = NULL;
  h_require(zkl_lock_new(bystander, other_path, &other) == ZKL_OK, "bystander lock");
  int64_t started = h_now_ms();
  CHECK_RC(zkl_lock_acquire(other, 5000), ZKL_OK, "another client acquires while callbacks block");
  CHECK(h_now_ms() - started < 2000, "without waiting on the blocked callbacks");
  CHECK_RC(zkl_lock_release(other), ZKL_OK, "and releases");
  zkl_session_state state;
  zkl_client_state(bystander, &state);
  CHECK(state == ZKL_SESSION_STATE_CONNECTED, "its session stays connected");
  CHECK(lost_called.fired == 1, "the second callback waits for the first (one thread, in order)");
  h_event_fire(&unblock);
  CHECK(h_event_wait(&lost_called, 2, 10000), "then runs");
  pthread_join(closer, NULL);
  zkl_lock_free(other);
  for (int i = 0; i < 2; i++) zkl_lock_free(locks[i]);
  zkl_client_close(bystander);
}

/* After zkl_client_close the hold is lost: not held, and its fencing token is refused. */
static void lost_is_not_held(void) {
  zkl_client *client = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "edges-lost");
  zkl_lock *lock = NULL;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK && zkl_lock_acquire(lock, 10000) == ZKL_OK, "hold");
  bool held = false;
  int64_t token = 0;
  CHECK(zkl_lock_is_held(lock, &held) == ZKL_OK && held, "held before the close");
  CHECK_RC(zkl_lock_fencing_token(lock, &token), ZKL_OK, "with a fencing token");
  zkl_client_close(client);
  CHECK(zkl_lock_is_held(lock, &held) == ZKL_OK && !held, "a lost hold is not held");
  zkl_hold_state state;
  CHECK(zkl_lock_state(lock, &state) == ZKL_OK && state == ZKL_HOLD_LOST, "its state says lost");
  CHECK_ERR(zkl_lock_fencing_token(lock, &token), ZKL_LOCK_LOST, "lost", "and its fencing token is refused");
  CHECK_RC(zkl_lock_release(lock), ZKL_LOCK_LOST, "releasing it says lost");
  CHECK_RC(zkl_lock_fencing_token(lock, &token), ZKL_NOT_OWNER, "after which nothing is held");
  zkl_lock_free(lock);
}

int main(void) {
  signal(SIGPIPE, SIG_DFL);
  lost_is_not_held();
  oversized_requests();
  connect_errors();
  blocking_callbacks();
  return h_done();
}
