/* The lost-lock callback on a real session expiry: the client talks to ZooKeeper through the
 * testkit's fault proxy (ZKLOCK_PROXY, started here), which is told to stall; the client sees
 * no traffic, declares its hold lost, and the server expires the session and deletes the node.
 * Also: callbacks run on zklock threads where blocking calls are refused, the session callback
 * sees the expiry, and a callback is never called once unregistered. First, without faults: a
 * callback registered while another thread holds covers that hold, once, when another client
 * deletes its node (with ZooKeeper's zkCli.sh). */
#define _GNU_SOURCE
#include "harness.h"

#include "proxy.h"

#include <signal.h>

typedef struct {
  h_event event;
  int calls;
  zkl_lock *lock;
  uint64_t owner;
  zkl_lost_reason reason;
  zkl_hold_state state_inside; /* what zkl_lock_state_as said from inside the callback */
  int blocking_rc;             /* what a blocking call returned from inside the callback */
  char blocking_message[256];
  char thread_name[32];
  int free_inside; /* whether the callback frees its own lock */
  int free_rc;
} lost_record;

static void on_lost(void *userdata, zkl_lock *lock, uint64_t owner, zkl_lost_reason reason) {
  lost_record *r = userdata;
  r->lock = lock;
  r->owner = owner;
  r->reason = reason;
  zkl_lock_state_as(lock, owner, &r->state_inside);
  r->blocking_rc = zkl_lock_acquire(lock, 0);
  snprintf(r->blocking_message, sizeof r->blocking_message, "%s", zkl_last_error_message());
  pthread_getname_np(pthread_self(), r->thread_name, sizeof r->thread_name);
  if (r->free_inside) r->free_rc = zkl_lock_free(lock);
  r->calls++;
  h_event_fire(&r->event);
}

typedef struct {
  h_event disconnected, expired;
  zkl_lock *lock;
  uint64_t owner; /* the main thread, which holds the lock; the callback runs elsewhere */
  zkl_hold_state state_when_disconnected; /* the hold's state as DISCONNECTED is reported */
} state_record;

static void on_state(void *userdata, zkl_client *client, zkl_session_state state) {
  (void)client;
  state_record *r = userdata;
  if (state == ZKL_SESSION_STATE_DISCONNECTED) {
    /* Only the first report: the client gives the session up later, and the hold goes LOST. */
    if (r->state_when_disconnected == ZKL_HOLD_NONE) zkl_lock_state_as(r->lock, r->owner, &r->state_when_disconnected);
    h_event_fire(&r->disconnected);
  }
  if (state == ZKL_SESSION_STATE_EXPIRED) h_event_fire(&r->expired);
}

/* Deletes the node at path (under ZK_CONNECT's chroot, if any) from outside zklock, with
 * ZooKeeper's own command-line client (Debian's zkCli.sh, or ZKL_ZKCLI): another client taking
 * a holder's node away. 1 if it did. */
static int delete_from_outside(const char *path) {
  const char *connect = h_zk_connect(), *chroot = strchr(connect, '/');
  const char *cli = getenv("ZKL_ZKCLI");
  if (cli == NULL || *cli == '\0') cli = "/usr/share/zookeeper/bin/zkCli.sh";
  char server[256], node[512];
  snprintf(server, sizeof server, "%s", connect);
  server[strcspn(server, ",/")] = '\0';
  snprintf(node, sizeof node, "%s%s", chroot != NULL ? chroot : "", path);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  char *argv[] = {(char *)cli, "-server", server, "delete", node, NULL};
  pid_t pid;
  int spawned = posix_spawn(&pid, cli, &actions, NULL, argv, environ) == 0;
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  return spawned && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Deletes the node of the lock's one contender from outside. */
static int delete_the_holders_node(zkl_lock *lock, const char *path) {
  zkl_participants *list = NULL;
  char node[400] = "";
  if (zkl_lock_contenders(lock, &list) == ZKL_OK && list->count == 1)
    snprintf(node, sizeof node, "%s/%s", path, list->items[0].node);
  zkl_participants_free(list);
  return *node != '\0' && delete_from_outside(node);
}

typedef struct {
  zkl_lock *lock;
  uint64_t owner;
  h_event holding, go_on;
  int releases[2];
} other_thread;

/* Holds the lock (two levels) until told to go on, then releases both levels. */
static void *hold_in_another_thread(void *arg) {
  other_thread *t = arg;
  t->owner = zkl_thread_owner();
  h_require(zkl_lock_acquire(t->lock, -1) == ZKL_OK && zkl_lock_acquire(t->lock, -1) == ZKL_OK,
            "another thread holds (two levels)");
  h_event_fire(&t->holding);
  h_event_wait(&t->go_on, 1, 60000);
  for (int i = 0; i < 2; i++) t->releases[i] = zkl_lock_release(t->lock);
  return NULL;
}

/* A callback registered while another thread holds covers that hold (the core's rule, as in
 * Python and Node): called with the reason when another client deletes its node, once for the
 * hold whatever its levels. */
static void test_registered_while_another_thread_holds(void) {
  zkl_client *client = h_connect();
  char path[200];
  h_unique_path(path, sizeof path, "lost-registered-later");
  zkl_lock *lock = NULL;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "make the lock");
  other_thread other = {.lock = lock, .holding = H_EVENT_INIT, .go_on = H_EVENT_INIT};
  pthread_t thread;
  h_require(pthread_create(&thread, NULL, hold_in_another_thread, &other) == 0, "start a thread");
  h_require(h_event_wait(&other.holding, 1, 20000), "the other thread holds");

  lost_record lost = {.event = H_EVENT_INIT};
  CHECK_RC(zkl_lock_set_lost_callback(lock, on_lost, &lost), ZKL_OK, "registered later: set the lost callback");
  CHECK(delete_the_holders_node(lock, path), "registered later: another client deletes the holder's node");
  CHECK(h_event_wait(&lost.event, 1, 20000), "registered later: the callback covers the other thread's hold");
  CHECK(lost.calls == 1 && lost.lock == lock && lost.owner == other.owner && lost.reason == ZKL_LOST_NODE_DELETED,
        "registered later: called with the lock, the other thread's owner and ZKL_LOST_NODE_DELETED");
  h_event_fire(&other.go_on);
  pthread_join(thread, NULL);
  CHECK(other.releases[0] == ZKL_LOCK_LOST && other.releases[1] == ZKL_LOCK_LOST,
        "registered later: each level's release reports the loss");

  /* Once: a later hold's loss comes after the first's, with no second call for the first between. */
  CHECK_RC(zkl_lock_acquire(lock, 10000), ZKL_OK, "registered later: this thread holds next");
  CHECK(delete_the_holders_node(lock, path), "registered later: its node deleted too");
  CHECK(h_event_wait(&lost.event, 2, 20000) && lost.calls == 2 && lost.owner == zkl_thread_owner(),
        "registered later: the first hold was reported once, then this one");
  CHECK_ERR(zkl_lock_release(lock), ZKL_LOCK_LOST, "nothing was deleted", "registered later: its release reports the loss");
  zkl_lock_free(lock);
  zkl_client_close(client);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  test_registered_while_another_thread_holds();
  proxy p;
  proxy_start(&p);
  zkl_options opts;
  zkl_options_init(&opts);
  /* Short, so the expiry comes quickly; long enough for a loaded machine (or valgrind) not to
   * miss heartbeats while the proxy passes traffic. */
  opts.session_timeout_ms = 4000;
  zkl_client *client = proxy_connect(&p, &opts);
  char path[200];
  h_unique_path(path, sizeof path, "lost");
  zkl_lock *lock = NULL;
  h_require(zkl_lock_new(client, path, &lock) == ZKL_OK, "make the lock");

  lost_record lost = {.event = H_EVENT_INIT};
  state_record states = {H_EVENT_INIT, H_EVENT_INIT, lock, zkl_thread_owner(), ZKL_HOLD_NONE};
  CHECK_RC(zkl_lock_set_lost_callback(lock, on_lost, &lost), ZKL_OK, "set the lost callback");
  CHECK_RC(zkl_client_set_state_callback(client, on_state, &states), ZKL_OK, "set the session callback");
  h_require(zkl_lock_acquire(lock, -1) == ZKL_OK, "acquire through the proxy");
  int64_t session = 0;
  zkl_client_session_id(client, &session);

  CHECK(proxy_command(&p, "stall"), "the proxy stalls the connection");
  CHECK(h_event_wait(&states.disconnected, 1, 20000), "session callback: DISCONNECTED");
  CHECK(states.state_when_disconnected == ZKL_HOLD_SUSPENDED,
        "while disconnected, before the client gives up, the hold is SUSPENDED");
  CHECK(h_event_wait(&lost.event, 1, 30000), "lost callback: called when the session is lost");
  CHECK(lost.calls == 1, "lost callback: called once");
  CHECK(lost.lock == lock && lost.owner == zkl_thread_owner(), "lost callback: with the lock and the owner");
  CHECK(lost.reason == ZKL_LOST_DISCONNECTED_TOO_LONG || lost.reason == ZKL_LOST_SESSION_EXPIRED,
        "lost callback: the reason is the session");
  CHECK(lost.state_inside == ZKL_HOLD_LOST, "lost callback: the hold reads LOST inside it");
  CHECK(strncmp(lost.thread_name, "zklock-", 7) == 0, "lost callback: runs on a zklock-* thread");
  CHECK(lost.blocking_rc == ZKL_INVALID_ARGUMENT && strstr(lost.blocking_message, "callback") != NULL,
        "lost callback: a blocking call inside it is refused with ZKL_INVALID_ARGUMENT");
  CHECK(h_event_wait(&states.expired, 1, 20000), "session callback: EXPIRED");
  zkl_hold_state state = ZKL_HOLD_HELD;
  zkl_lock_state(lock, &state);
  CHECK(state == ZKL_HOLD_LOST, "the hold is LOST");
  CHECK_ERR(zkl_lock_release(lock), ZKL_LOCK_LOST, "nothing was deleted", "release of a lost hold: ZKL_LOCK_LOST");

  /* The server expired the session for real: its node is gone, so another client gets the lock. */
  zkl_client *other = h_connect();
  zkl_lock *other_lock = NULL;
  zkl_lock_new(other, path, &other_lock);
  CHECK_RC(zkl_lock_acquire(other_lock, 20000), ZKL_OK, "expiry: the server deleted the node; another client acquires");
  zkl_participants *list = NULL;
  if (CHECK_RC(zkl_lock_holder(other_lock, &list), ZKL_OK, "expiry: the holder is listed") == ZKL_OK)
    CHECK(list->count == 1 && list->items[0].session_id != session, "expiry: the holder is the other session");
  zkl_participants_free(list);
  CHECK_RC(zkl_lock_release(other_lock), ZKL_OK, "expiry: the other client releases");

  /* Traffic flows again: the same client starts a new session on its next acquisition. */
  CHECK(proxy_command(&p, "pass"), "the proxy passes traffic again");
  CHECK_RC(zkl_lock_acquire(lock, 20000), ZKL_OK, "after expiry: the same client acquires in a new session");
  int64_t renewed = 0;
  zkl_client_session_id(client, &renewed);
  CHECK(renewed != 0 && renewed != session, "after expiry: a new session id");

  /* Unregistered callbacks are never called: closing the client loses this hold. */
  CHECK_RC(zkl_lock_set_lost_callback(lock, NULL, NULL), ZKL_OK, "unregister the lost callback");
  char second_path[200];
  h_unique_path(second_path, sizeof second_path, "lost-second");
  zkl_lock *second = NULL;
  zkl_lock_new(client, second_path, &second);
  lost_record closed = {.event = H_EVENT_INIT, .free_inside = 1, .free_rc = -1};
  zkl_lock_set_lost_callback(second, on_lost, &closed);
  CHECK_RC(zkl_lock_acquire_as(second, 7, -1), ZKL_OK, "a second lock, held by an explicit owner");
  CHECK_RC(zkl_client_close(client), ZKL_OK, "close the client (its holds are lost)");
  CHECK(h_event_wait(&closed.event, 1, 10000) && closed.reason == ZKL_LOST_CLOSED && closed.owner == 7,
        "lost callback: CLOSED when the client is closed");
  CHECK(closed.free_rc == ZKL_OK, "lost callback: may free its own lock");
  CHECK_ERR(zkl_lock_free(second), ZKL_INVALID_ARGUMENT, "not a live zkl_lock", "lost callback: that lock is freed");
  h_sleep_ms(200); /* give a wrongly delivered callback time to show up */
  CHECK(lost.calls == 1, "lost callback: never called once unregistered");

  zkl_lock_free(lock);
  zkl_lock_free(other_lock);
  zkl_client_close(other);
  proxy_stop(&p);
  return h_done();
}
