/* The basics: version macros, result codes, connect, acquire/release, hold queries, the
 * holder/contenders lists, reentrancy, the runtime's thread names, and the session callback. */
#include "harness.h"

#include <dirent.h>

#ifndef ZKL_EXPECTED_VERSION
#error "compile with -DZKL_EXPECTED_VERSION='\"x.y.z\"' (the version cargo metadata reports)"
#endif

static void test_version(void) {
  char composed[64];
  snprintf(composed, sizeof composed, "%d.%d.%d", ZKL_VERSION_MAJOR, ZKL_VERSION_MINOR, ZKL_VERSION_PATCH);
  CHECK(strcmp(ZKL_VERSION, ZKL_EXPECTED_VERSION) == 0, "version: ZKL_VERSION matches Cargo.toml");
  CHECK(strcmp(composed, ZKL_VERSION) == 0, "version: MAJOR.MINOR.PATCH macros make ZKL_VERSION");
  CHECK(strcmp(zkl_version(), ZKL_VERSION) == 0, "version: the library's zkl_version() matches the header");
}

static void test_result_codes(void) {
  /* The documented, stable numbers. */
  int stable = ZKL_OK == 0 && ZKL_TIMEOUT == 1 && ZKL_NOT_OWNER == 2 && ZKL_SESSION_EXPIRED == 3 &&
               ZKL_LOCK_LOST == 4 && ZKL_CONNECTION_LOSS == 5 && ZKL_AUTH_FAILED == 6 && ZKL_CLOSED == 7 &&
               ZKL_INVALID_ARGUMENT == 8 && ZKL_ZOOKEEPER == 9 && ZKL_PANIC == 10 && ZKL_DEADLOCK == 11 &&
               ZKL_PERMISSION_DENIED == 12 && ZKL_CANCELLED == 13;
  CHECK(stable, "result codes: stable numbers, ZKL_OK = 0 and ZKL_CANCELLED last");
  int all_described = 1, all_distinct = 1;
  for (int rc = ZKL_OK; rc <= ZKL_CANCELLED; rc++) {
    const char *text = zkl_result_str(rc);
    if (text == NULL || *text == '\0' || strcmp(text, "unknown result") == 0) all_described = 0;
    for (int other = ZKL_OK; other < rc; other++)
      if (text != NULL && strcmp(text, zkl_result_str(other)) == 0) all_distinct = 0;
  }
  CHECK(all_described, "result codes: zkl_result_str describes every code");
  CHECK(all_distinct, "result codes: every description is distinct");
  CHECK(strcmp(zkl_result_str(ZKL_TIMEOUT), "timed out") == 0, "result codes: ZKL_TIMEOUT reads \"timed out\"");
  CHECK(strcmp(zkl_result_str(ZKL_DEADLOCK), "would deadlock") == 0,
        "result codes: ZKL_DEADLOCK reads \"would deadlock\"");
  CHECK(strcmp(zkl_result_str(ZKL_PERMISSION_DENIED), "permission denied") == 0,
        "result codes: ZKL_PERMISSION_DENIED reads \"permission denied\"");
  CHECK(strcmp(zkl_result_str(ZKL_CANCELLED + 1), "unknown result") == 0 && strcmp(zkl_result_str(-1), "unknown result") == 0,
        "result codes: any other int is \"unknown result\"");
}

static int count_runtime_threads(void) {
  int count = 0;
  DIR *tasks = opendir("/proc/self/task");
  struct dirent *task;
  while (tasks != NULL && (task = readdir(tasks)) != NULL) {
    char path[300], comm[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", task->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    if (fgets(comm, sizeof comm, f) != NULL && strncmp(comm, "zklock-", 7) == 0) count++;
    fclose(f);
  }
  if (tasks != NULL) closedir(tasks);
  return count;
}

static h_event states_seen = H_EVENT_INIT;
static zkl_session_state last_state;
static zkl_client *state_client_seen;

static void on_state(void *userdata, zkl_client *client, zkl_session_state state) {
  *(int *)userdata += 1;
  last_state = state;
  state_client_seen = client;
  h_event_fire(&states_seen);
}

static void test_lock_lifecycle(void) {
  CHECK(count_runtime_threads() == 0, "runtime: no zklock thread before the first call");
  zkl_client *client = h_connect();
  CHECK(count_runtime_threads() >= 1, "runtime: started on first use, its threads named zklock-*");
  zkl_session_state state = 0;
  CHECK_RC(zkl_client_state(client, &state), ZKL_OK, "client: state");
  CHECK(state == ZKL_SESSION_STATE_CONNECTED, "client: connected after zkl_client_connect");
  int64_t session = 0;
  CHECK_RC(zkl_client_session_id(client, &session), ZKL_OK, "client: session id");
  CHECK(session != 0, "client: has a session id");
  int state_calls = 0;
  CHECK_RC(zkl_client_set_state_callback(client, on_state, &state_calls), ZKL_OK, "client: set state callback");

  char path[200];
  h_unique_path(path, sizeof path, "basic");
  zkl_lock *lock = NULL;
  CHECK_RC(zkl_lock_new(client, path, &lock), ZKL_OK, "lock: new");
  h_require(lock != NULL, "lock: new");

  bool held = true;
  zkl_hold_state hold = ZKL_HOLD_LOST;
  CHECK_RC(zkl_lock_is_held(lock, &held), ZKL_OK, "lock: is_held before acquiring");
  CHECK(!held, "lock: not held before acquiring");
  CHECK_RC(zkl_lock_state(lock, &hold), ZKL_OK, "lock: state before acquiring");
  CHECK(hold == ZKL_HOLD_NONE, "lock: state NONE before acquiring");
  zkl_participants *list = NULL;
  CHECK_RC(zkl_lock_holder(lock, &list), ZKL_OK, "lock: holder of a never-used path");
  CHECK(list != NULL && list->count == 0, "lock: nobody holds a never-used path");
  CHECK(list != NULL && list->items == NULL, "lock: an empty list's items are NULL, as the header says");
  zkl_participants_free(list);

  CHECK_RC(zkl_lock_acquire(lock, -1), ZKL_OK, "lock: acquire");
  CHECK_RC(zkl_lock_is_held(lock, &held), ZKL_OK, "lock: is_held");
  CHECK(held, "lock: held after acquire");
  CHECK_RC(zkl_lock_state(lock, &hold), ZKL_OK, "lock: state");
  CHECK(hold == ZKL_HOLD_HELD, "lock: state HELD after acquire");
  int64_t token = 0, sequence = -1;
  CHECK_RC(zkl_lock_fencing_token(lock, &token), ZKL_OK, "lock: fencing token");
  CHECK(token > 0, "lock: fencing token is positive (a zxid)");
  CHECK_RC(zkl_lock_sequence(lock, &sequence), ZKL_OK, "lock: sequence");
  CHECK(sequence >= 0, "lock: sequence is set");

  list = NULL;
  CHECK_RC(zkl_lock_holder(lock, &list), ZKL_OK, "holder: list");
  if (list != NULL && list->count == 1) {
    const zkl_participant *me = &list->items[0];
    CHECK(strncmp(me->node, "_c_", 3) == 0 && strstr(me->node, "-lock-") != NULL, "holder: Curator-style node name");
    CHECK(me->has_sequence && me->sequence == sequence, "holder: same sequence as zkl_lock_sequence");
    CHECK(me->fencing_token == token, "holder: same fencing token as zkl_lock_fencing_token");
    CHECK(me->session_id == session, "holder: our session");
    CHECK(me->host != NULL && *me->host != '\0', "holder: identity has the host");
    CHECK(me->pid == (uint32_t)getpid(), "holder: identity has our pid");
    CHECK(me->lang != NULL && strcmp(me->lang, "c") == 0, "holder: identity language is \"c\"");
    CHECK(me->owner != NULL && strncmp(me->owner, "thread:", 7) == 0, "holder: owner labelled thread:<name>");
    CHECK(me->identifier == NULL, "holder: no identifier");
    CHECK(me->data != NULL && me->data_len > 0, "holder: raw node data");
  } else {
    CHECK(0, "holder: exactly one holder");
  }
  zkl_participants_free(list);

  /* Reentrancy: the same thread acquires again, even with timeout 0, with no new node. */
  CHECK_RC(zkl_lock_acquire(lock, 0), ZKL_OK, "reentrancy: acquire again with timeout 0");
  CHECK(h_contenders(lock) == 1, "reentrancy: no second node");
  int64_t again = 0;
  zkl_lock_fencing_token(lock, &again);
  CHECK(again == token, "reentrancy: same hold, same fencing token");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "reentrancy: release the inner level");
  zkl_lock_is_held(lock, &held);
  CHECK(held && h_contenders(lock) == 1, "reentrancy: still held after the inner release, node kept");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "reentrancy: release the outer level");
  zkl_lock_is_held(lock, &held);
  zkl_lock_state(lock, &hold);
  CHECK(!held && hold == ZKL_HOLD_NONE, "reentrancy: not held after the last release");
  CHECK(h_contenders(lock) == 0, "release: the node is gone when release returns");
  CHECK_ERR(zkl_lock_fencing_token(lock, &again), ZKL_NOT_OWNER, "holds nothing", "release: no fencing token after");
  CHECK_ERR(zkl_lock_release(lock), ZKL_NOT_OWNER, "does not hold", "release: a second release is ZKL_NOT_OWNER");

  CHECK_RC(zkl_lock_acquire(lock, 1000), ZKL_OK, "lock: acquire again");
  int64_t next = 0;
  zkl_lock_fencing_token(lock, &next);
  CHECK(next > token, "fencing: the next hold has a higher token");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "lock: release again");

  CHECK_RC(zkl_lock_free(lock), ZKL_OK, "lock: free");
  int calls_before_close = state_calls;
  CHECK_RC(zkl_client_close(client), ZKL_OK, "client: close");
  CHECK(state_calls == calls_before_close + 1 && last_state == ZKL_SESSION_STATE_CLOSED && state_client_seen == client,
        "session callback: CLOSED delivered, with the client, before close returns");
  CHECK(zkl_lock_free(NULL) == ZKL_OK && zkl_client_close(NULL) == ZKL_OK, "free: NULL is a no-op");
  zkl_participants_free(NULL);
}

static void test_options(void) {
  zkl_options opts;
  CHECK_RC(zkl_options_init(&opts), ZKL_OK, "options: init");
  CHECK(opts.session_timeout_ms == 0 && opts.connect_timeout_ms == 0 && opts.digest_auth == NULL,
        "options: defaults are zeros and no auth");
  opts.session_timeout_ms = 6000;
  opts.connect_timeout_ms = 5000;
  opts.digest_auth = "zklock:secret";
  zkl_client *client = NULL;
  CHECK_RC(zkl_client_connect(h_zk_connect(), &opts, &client), ZKL_OK, "options: connect with timeouts and digest auth");
  CHECK_RC(zkl_client_close(client), ZKL_OK, "options: close");
}

int main(void) {
  test_version();
  test_result_codes();
  test_lock_lifecycle(); /* first: it checks that the runtime starts on first use */
  test_options();
  return h_done();
}
