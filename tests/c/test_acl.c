/* Access control on lock nodes (zkl_lock_new_with, zkl_lock_options.acl): a lock made with
 * ZKL_ACL_CREATOR_ALL_WORLD_READ lets other clients (unauthenticated, or authenticated as
 * someone else) list its queue and read who holds, but their acquisitions fail with
 * ZKL_PERMISSION_DENIED naming the ACL problem and the path, leave nothing behind, and take
 * nothing from the holder; clients of the owner's credentials queue together; the owner releases
 * and its node goes. Also: the read/write lock, a custom ACL naming two users, a lock path made
 * open in advance, the bad options refused before any network traffic, and a semaphore with an
 * ACL (zkl_semaphore_options.acl) on its nodes and its shared count. (The direct delete of
 * a holder's node with a plain ZooKeeper client is tried in core/tests/acl.rs.) */
#define _GNU_SOURCE
#include "harness.h"

#define ALICE "alice:alice-secret"
#define BOB "bob:bob-secret"

static zkl_client *connect_as(const char *digest_auth) {
  zkl_options opts;
  zkl_options_init(&opts);
  opts.digest_auth = digest_auth;
  zkl_client *client = NULL;
  h_require(zkl_client_connect(h_zk_connect(), &opts, &client) == ZKL_OK, "connect with digest auth");
  return client;
}

static zkl_lock_options preset(int acl) {
  zkl_lock_options opts;
  zkl_lock_options_init(&opts);
  opts.acl = acl;
  return opts;
}

/* The owner label of the first contender, or "" (copied into buf). */
static const char *first_owner(zkl_lock *lock, char *buf, size_t len) {
  zkl_participants *list = NULL;
  buf[0] = '\0';
  if (zkl_lock_contenders(lock, &list) == ZKL_OK) {
    if (list->count > 0 && list->items[0].owner != NULL) snprintf(buf, len, "%s", list->items[0].owner);
    zkl_participants_free(list);
  }
  return buf;
}

static void test_world_read(void) {
  char path[256];
  h_unique_path(path, sizeof path, "acl-world-read");
  zkl_client *alice = connect_as(ALICE);
  zkl_lock_options opts = preset(ZKL_ACL_CREATOR_ALL_WORLD_READ);
  zkl_lock *lock = NULL;
  CHECK_RC(zkl_lock_new_with(alice, path, &opts, &lock), ZKL_OK, "world read: alice makes a protected lock");
  CHECK_RC(zkl_lock_acquire_as(lock, 1, -1), ZKL_OK, "world read: alice acquires");
  int64_t token = 0;
  zkl_lock_fencing_token_as(lock, 1, &token);

  /* An unauthenticated client with an ordinary (open) lock: sees the queue, cannot queue. */
  zkl_client *anonymous = h_connect();
  zkl_lock *open_lock = NULL;
  CHECK_RC(zkl_lock_new(anonymous, path, &open_lock), ZKL_OK, "world read: an open lock on the path");
  char owner[64];
  CHECK(h_contenders(open_lock) == 1 && strcmp(first_owner(open_lock, owner, sizeof owner), "owner:1") == 0,
        "world read: an unauthenticated client lists the queue and reads who holds");
  CHECK_ERR(zkl_lock_acquire(open_lock, 10000), ZKL_PERMISSION_DENIED, "NoAuth",
            "world read: an unauthenticated client's acquire is ZKL_PERMISSION_DENIED, saying NoAuth");
  CHECK(strstr(zkl_last_error_message(), path) != NULL && strstr(zkl_last_error_message(), "ACL") != NULL,
        "world read: the message names the path and the ACL");
  CHECK(zkl_last_error_zookeeper_code() == -102, "world read: ZooKeeper's code is NoAuth (-102)");
  CHECK_ERR(zkl_lock_acquire(open_lock, 0), ZKL_PERMISSION_DENIED, "NoAuth", "world read: a try too");

  /* Bob, with the same preset: the path is alice's. */
  zkl_client *bob = connect_as(BOB);
  zkl_lock *bob_lock = NULL;
  CHECK_RC(zkl_lock_new_with(bob, path, &opts, &bob_lock), ZKL_OK, "world read: bob makes a protected lock");
  CHECK_ERR(zkl_lock_acquire(bob_lock, 10000), ZKL_PERMISSION_DENIED, "does not grant this client (digest user bob)",
            "world read: bob's acquire is ZKL_PERMISSION_DENIED, naming what the ACL lacks for him");
  CHECK(h_contenders(bob_lock) == 1, "world read: nothing of the others' attempts was left behind");
  zkl_hold_state state = ZKL_HOLD_NONE;
  int64_t token_after = 0;
  zkl_lock_state_as(lock, 1, &state);
  zkl_lock_fencing_token_as(lock, 1, &token_after);
  CHECK(state == ZKL_HOLD_HELD && token_after == token, "world read: alice still holds, with the same token");

  /* Alice's other client queues behind her. */
  zkl_client *alice2 = connect_as(ALICE);
  zkl_lock *lock2 = NULL;
  CHECK_RC(zkl_lock_new_with(alice2, path, &opts, &lock2), ZKL_OK, "world read: alice's second client");
  CHECK_RC(zkl_lock_acquire_as(lock2, 2, 0), ZKL_TIMEOUT, "world read: alice's second client finds it held");

  CHECK_RC(zkl_lock_release_as(lock, 1), ZKL_OK, "world read: alice releases");
  CHECK(h_wait_contenders(open_lock, 0, 10000), "world read: her node is gone");
  CHECK_RC(zkl_lock_acquire_as(lock2, 2, 10000), ZKL_OK, "world read: alice's second client acquires then");
  CHECK_RC(zkl_lock_release_as(lock2, 2), ZKL_OK, "world read: and releases");

  zkl_lock_free(open_lock);
  zkl_lock_free(bob_lock);
  zkl_lock_free(lock2);
  zkl_lock_free(lock);
  zkl_client_close(anonymous);
  zkl_client_close(bob);
  zkl_client_close(alice2);
  zkl_client_close(alice);
}

static void test_creator_all(void) {
  char path[256];
  h_unique_path(path, sizeof path, "acl-private");
  zkl_client *alice = connect_as(ALICE);
  zkl_lock_options opts = preset(ZKL_ACL_CREATOR_ALL);
  zkl_lock *lock = NULL;
  zkl_lock_new_with(alice, path, &opts, &lock);
  CHECK_RC(zkl_lock_acquire(lock, -1), ZKL_OK, "private: alice acquires");
  zkl_client *anonymous = h_connect();
  zkl_lock *open_lock = NULL;
  zkl_lock_new(anonymous, path, &open_lock);
  zkl_participants *list = NULL;
  CHECK_ERR(zkl_lock_contenders(open_lock, &list), ZKL_PERMISSION_DENIED, "listing the contenders",
            "private: others cannot even list the queue");
  CHECK(h_contenders(lock) == 1, "private: alice lists it");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "private: alice releases");
  CHECK(h_wait_contenders(lock, 0, 10000), "private: her node is gone");
  zkl_lock_free(open_lock);
  zkl_lock_free(lock);
  zkl_client_close(anonymous);
  zkl_client_close(alice);
}

static void test_rwlock(void) {
  char path[256];
  h_unique_path(path, sizeof path, "acl-rwlock");
  zkl_client *alice = connect_as(ALICE);
  zkl_client *bob = connect_as(BOB);
  zkl_lock_options opts = preset(ZKL_ACL_CREATOR_ALL_WORLD_READ);
  zkl_lock *read = NULL, *write = NULL, *bob_read = NULL, *bob_write = NULL;
  CHECK_RC(zkl_rwlock_new_with(alice, path, &opts, &read, &write), ZKL_OK, "rwlock: alice makes a protected one");
  CHECK_RC(zkl_rwlock_new_with(bob, path, &opts, &bob_read, &bob_write), ZKL_OK, "rwlock: so does bob");
  CHECK_RC(zkl_lock_acquire(read, -1), ZKL_OK, "rwlock: alice reads");
  zkl_participants *list = NULL;
  int modes_seen = 0;
  if (zkl_lock_holders(bob_read, &list) == ZKL_OK) {
    modes_seen = list->count == 1 && strcmp(list->items[0].mode, "read") == 0;
    zkl_participants_free(list);
  }
  CHECK(modes_seen, "rwlock: bob sees alice's read hold, with its mode");
  CHECK_ERR(zkl_lock_acquire(bob_write, 10000), ZKL_PERMISSION_DENIED, "digest user bob",
            "rwlock: bob's writer cannot queue");
  CHECK_ERR(zkl_lock_acquire(bob_read, 0), ZKL_PERMISSION_DENIED, "digest user bob", "rwlock: nor his reader");
  CHECK(h_contenders(read) == 1, "rwlock: nothing of bob's was left");
  CHECK_RC(zkl_lock_release(read), ZKL_OK, "rwlock: alice releases");
  CHECK_RC(zkl_lock_acquire(write, 10000), ZKL_OK, "rwlock: alice writes");
  CHECK_RC(zkl_lock_release(write), ZKL_OK, "rwlock: and releases");
  CHECK(h_wait_contenders(read, 0, 10000), "rwlock: no node left");
  zkl_lock_free(read);
  zkl_lock_free(write);
  zkl_lock_free(bob_read);
  zkl_lock_free(bob_write);
  zkl_client_close(bob);
  zkl_client_close(alice);
}

/* The digest id of ALICE and BOB: user:base64(sha1("user:password")), as the server stores it. */
#define ALICE_ID "alice:JYdjG/dL2+v79QyuS8/0gpT+rQQ="
#define BOB_ID "bob:j7ZGIvWbIQ1LANfL4BJ8Ibdfqsk="

static void test_custom(void) {
  char path[256];
  h_unique_path(path, sizeof path, "acl-custom");
  zkl_acl_entry entries[] = {
      /* Each with ADMIN: only then does the server show a client the digest hashes it checks. */
      {ZKL_PERM_ALL, "digest", ALICE_ID},
      {ZKL_PERM_ALL, "digest", BOB_ID},
      {ZKL_PERM_READ, "world", "anyone"},
  };
  zkl_lock_options opts = preset(ZKL_ACL_CUSTOM);
  opts.acl_entries = entries;
  opts.acl_entry_count = 3;
  zkl_client *alice = connect_as(ALICE), *bob = connect_as(BOB), *carol = connect_as("carol:carol-secret");
  zkl_lock *alice_lock = NULL, *bob_lock = NULL, *carol_lock = NULL;
  CHECK_RC(zkl_lock_new_with(alice, path, &opts, &alice_lock), ZKL_OK, "custom: alice's lock");
  CHECK_RC(zkl_lock_new_with(bob, path, &opts, &bob_lock), ZKL_OK, "custom: bob's lock");
  CHECK_RC(zkl_lock_new(carol, path, &carol_lock), ZKL_OK, "custom: carol's (open) lock");
  CHECK_RC(zkl_lock_acquire(alice_lock, -1), ZKL_OK, "custom: alice acquires");
  CHECK_RC(zkl_lock_acquire(bob_lock, 0), ZKL_TIMEOUT, "custom: bob queues (a try: held by alice)");
  CHECK_ERR(zkl_lock_acquire(carol_lock, 0), ZKL_PERMISSION_DENIED, "NoAuth", "custom: carol cannot queue");
  CHECK_RC(zkl_lock_release(alice_lock), ZKL_OK, "custom: alice releases");
  CHECK_RC(zkl_lock_acquire(bob_lock, 10000), ZKL_OK, "custom: bob acquires");
  CHECK_RC(zkl_lock_release(bob_lock), ZKL_OK, "custom: bob releases");
  CHECK(h_wait_contenders(alice_lock, 0, 10000), "custom: no node left");
  zkl_lock_free(alice_lock);
  zkl_lock_free(bob_lock);
  zkl_lock_free(carol_lock);
  zkl_client_close(alice);
  zkl_client_close(bob);
  zkl_client_close(carol);
}

static void test_open_path_refused(void) {
  char path[256];
  h_unique_path(path, sizeof path, "acl-squatted");
  /* An open lock makes the path a world-writable container, and holds it. */
  zkl_client *anonymous = h_connect();
  zkl_lock *open_lock = NULL;
  zkl_lock_new(anonymous, path, &open_lock);
  CHECK_RC(zkl_lock_acquire(open_lock, -1), ZKL_OK, "open path: an open lock holds the path");
  zkl_client *alice = connect_as(ALICE);
  zkl_lock_options opts = preset(ZKL_ACL_CREATOR_ALL_WORLD_READ);
  zkl_lock *lock = NULL;
  zkl_lock_new_with(alice, path, &opts, &lock);
  CHECK_ERR(zkl_lock_acquire(lock, 10000), ZKL_PERMISSION_DENIED, "world:anyone ALL",
            "open path: a protected lock refuses a path whose ACL grants more than asked, naming the entry");
  CHECK(h_contenders(lock) == 1, "open path: nothing was made under it");
  zkl_lock_release(open_lock);
  zkl_lock_free(open_lock);
  zkl_lock_free(lock);
  zkl_client_close(anonymous);
  zkl_client_close(alice);
}

static void test_bad_options(void) {
  char path[256];
  h_unique_path(path, sizeof path, "acl-bad");
  zkl_client *anonymous = h_connect();
  zkl_lock *lock = NULL, *read = NULL, *write = NULL;
  zkl_lock_options opts = preset(ZKL_ACL_CREATOR_ALL_WORLD_READ);
  CHECK_ERR(zkl_lock_new_with(anonymous, path, &opts, &lock), ZKL_INVALID_ARGUMENT, "digest auth",
            "bad options: a creator ACL on a client without credentials");
  CHECK_ERR(zkl_rwlock_new_with(anonymous, path, &opts, &read, &write), ZKL_INVALID_ARGUMENT, "digest auth",
            "bad options: the same for a read/write lock");
  opts.acl = 7;
  CHECK_ERR(zkl_lock_new_with(anonymous, path, &opts, &lock), ZKL_INVALID_ARGUMENT, "opts->acl is 7",
            "bad options: an unknown preset");
  opts = preset(ZKL_ACL_CUSTOM);
  CHECK_ERR(zkl_lock_new_with(anonymous, path, &opts, &lock), ZKL_INVALID_ARGUMENT, "acl_entry_count is 0",
            "bad options: a custom ACL without entries");
  zkl_acl_entry entries[] = {{64, "world", "anyone"}, {ZKL_PERM_ALL, NULL, "anyone"}, {ZKL_PERM_READ, "world", "anyone"}};
  opts.acl_entries = entries;
  opts.acl_entry_count = 1;
  CHECK_ERR(zkl_lock_new_with(anonymous, path, &opts, &lock), ZKL_INVALID_ARGUMENT, "acl_entries[0].perms is 0x40",
            "bad options: permission bits outside ZKL_PERM_ALL");
  opts.acl_entries = entries + 1;
  CHECK_ERR(zkl_lock_new_with(anonymous, path, &opts, &lock), ZKL_INVALID_ARGUMENT, "NULL scheme or id",
            "bad options: a NULL scheme");
  opts.acl_entries = entries + 2;
  CHECK_ERR(zkl_lock_new_with(anonymous, path, &opts, &lock), ZKL_INVALID_ARGUMENT, "READ, CREATE and DELETE",
            "bad options: an ACL that would shut this client out");
  opts = preset(ZKL_ACL_OPEN);
  opts.acl_entry_count = 1;
  CHECK_ERR(zkl_lock_new_with(anonymous, path, &opts, &lock), ZKL_INVALID_ARGUMENT, "only for ZKL_ACL_CUSTOM",
            "bad options: entries without ZKL_ACL_CUSTOM");
  CHECK(lock == NULL && read == NULL && write == NULL, "bad options: nothing written to out");
  CHECK_ERR(zkl_lock_options_init(NULL), ZKL_INVALID_ARGUMENT, "opts is NULL", "bad options: init of NULL");
  CHECK_RC(zkl_lock_new_with(anonymous, path, NULL, &lock), ZKL_OK, "options NULL: an open lock, as zkl_lock_new");
  CHECK_RC(zkl_lock_acquire(lock, -1), ZKL_OK, "options NULL: it works");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "options NULL: and releases");
  zkl_lock_free(lock);
  zkl_client_close(anonymous);
}

/* A semaphore takes a lock's ACL (zkl_semaphore_options.acl), on every node it makes: another
 * client, unauthenticated, reads the max and the leases (world READ), but can neither change the
 * max (the shared count's ACL) nor take a lease (its mutex's and lease parent's); a protected
 * semaphore refuses a path an open one made. */
static void test_semaphore(void) {
  char path[256], count[300], opened[300];
  h_unique_path(path, sizeof path, "acl-semaphore");
  snprintf(count, sizeof count, "%s-max/count", path); /* its own parent, made with the ACL */
  snprintf(opened, sizeof opened, "%s-opened", path);
  zkl_client *alice = connect_as(ALICE), *anonymous = h_connect();
  zkl_semaphore_options opts;
  zkl_semaphore_options_init(&opts);
  opts.shared_count_path = count;
  opts.shared_count_seed = 2;
  opts.acl = ZKL_ACL_CREATOR_ALL_WORLD_READ;
  zkl_semaphore *sem = NULL, *outsider = NULL, *open_sem = NULL, *refusing = NULL;
  zkl_leases *leases = NULL, *theirs = NULL;
  CHECK_RC(zkl_semaphore_new_with(alice, path, &opts, &sem), ZKL_OK, "semaphore: alice makes a protected one");
  CHECK_RC(zkl_semaphore_acquire(sem, 1, -1, &leases), ZKL_OK, "semaphore: alice takes a lease");

  zkl_semaphore_options open_opts;
  zkl_semaphore_options_init(&open_opts);
  open_opts.shared_count_path = count;
  open_opts.shared_count_seed = 2;
  CHECK_RC(zkl_semaphore_new_with(anonymous, path, &open_opts, &outsider), ZKL_OK, "semaphore: an open one on it");
  int64_t max = 0;
  CHECK(zkl_semaphore_max_leases(outsider, &max) == ZKL_OK && max == 2, "semaphore: others read the max");
  zkl_semaphore_listing *list = NULL;
  size_t held = 0;
  if (zkl_semaphore_participants(outsider, &list) == ZKL_OK) {
    held = list->leases->count;
    zkl_semaphore_listing_free(list);
  }
  CHECK(held == 1, "semaphore: others list the leases");
  CHECK_ERR(zkl_semaphore_set_shared_count(outsider, 100), ZKL_PERMISSION_DENIED, "NoAuth",
            "semaphore: others cannot change the max");
  CHECK_ERR(zkl_semaphore_acquire(outsider, 1, 10000, &theirs), ZKL_PERMISSION_DENIED, "NoAuth",
            "semaphore: nor take a lease");
  CHECK(zkl_semaphore_max_leases(sem, &max) == ZKL_OK && max == 2, "semaphore: the max is alice's still");
  CHECK_RC(zkl_leases_release(leases), ZKL_OK, "semaphore: alice releases");

  /* An open semaphore made the path (an open container): a protected one refuses it. */
  zkl_semaphore_options fixed;
  zkl_semaphore_options_init(&fixed);
  fixed.max_leases = 2;
  zkl_semaphore_new_with(anonymous, opened, &fixed, &open_sem);
  CHECK_RC(zkl_semaphore_acquire(open_sem, 1, -1, &theirs), ZKL_OK, "opened semaphore: an open one holds a lease");
  fixed.acl = ZKL_ACL_CREATOR_ALL_WORLD_READ;
  zkl_semaphore_new_with(alice, opened, &fixed, &refusing);
  CHECK_ERR(zkl_semaphore_acquire(refusing, 1, 10000, &leases), ZKL_PERMISSION_DENIED, "world:anyone ALL",
            "opened semaphore: a protected one refuses its path, naming the entry");
  fixed.acl = 7;
  zkl_semaphore *bad = NULL;
  CHECK_ERR(zkl_semaphore_new_with(alice, path, &fixed, &bad), ZKL_INVALID_ARGUMENT, "opts->acl is 7",
            "semaphore: an unknown preset is refused");
  fixed.acl = ZKL_ACL_CREATOR_ALL;
  CHECK_ERR(zkl_semaphore_new_with(anonymous, path, &fixed, &bad), ZKL_INVALID_ARGUMENT, "digest auth",
            "semaphore: a creator ACL on a client without credentials");
  CHECK(bad == NULL, "semaphore: nothing written to out");
  zkl_leases_release(theirs);
  zkl_leases_free(theirs);
  zkl_leases_free(leases);
  zkl_semaphore_free(refusing);
  zkl_semaphore_free(open_sem);
  zkl_semaphore_free(outsider);
  zkl_semaphore_free(sem);
  zkl_client_close(anonymous);
  zkl_client_close(alice);
}

int main(void) {
  test_bad_options();
  test_world_read();
  test_creator_all();
  test_rwlock();
  test_custom();
  test_open_path_refused();
  test_semaphore();
  return h_done();
}
