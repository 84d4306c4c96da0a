/* SASL DIGEST-MD5 from C (zkl_options.sasl_*), against the test server, which `scripts/zk run
 * --sasl` starts with a JAAS DigestLoginModule for the users of ZK_SASL_USERS: a lock held and
 * released, a wrong password refused at once with ZKL_AUTH_FAILED (its message never showing the
 * password), a creator ACL that another user cannot pass, and incomplete options refused before
 * any network traffic, GSSAPI's too. (Kerberos against a real KDC: test_kerberos.c.) */
#define _GNU_SOURCE
#include "harness.h"

/* The password of `user` in ZK_SASL_USERS ("user:password,..."), copied into buf. */
static const char *password_of(const char *user, char *buf, size_t len) {
  const char *users = getenv("ZK_SASL_USERS");
  h_require(users != NULL && *users != '\0', "ZK_SASL_USERS names the server's SASL users (scripts/test-c runs zk run --sasl)");
  size_t n = strlen(user);
  for (const char *entry = users; entry != NULL; entry = strchr(entry, ',') ? strchr(entry, ',') + 1 : NULL) {
    if (strncmp(entry, user, n) == 0 && entry[n] == ':') {
      const char *end = strchr(entry + n + 1, ',');
      size_t size = end ? (size_t)(end - entry - n - 1) : strlen(entry + n + 1);
      snprintf(buf, len, "%.*s", (int)size, entry + n + 1);
      return buf;
    }
  }
  h_require(0, "the user is in ZK_SASL_USERS");
  return NULL;
}

static zkl_options digest(const char *user, const char *password) {
  zkl_options opts;
  zkl_options_init(&opts);
  opts.sasl_mechanism = "DIGEST-MD5";
  opts.sasl_username = user;
  opts.sasl_password = password;
  return opts;
}

static zkl_client *connect_as(const char *user) {
  char password[128];
  zkl_options opts = digest(user, password_of(user, password, sizeof password));
  zkl_client *client = NULL;
  h_require(zkl_client_connect(h_zk_connect(), &opts, &client) == ZKL_OK, "connect with SASL DIGEST-MD5");
  return client;
}

static void test_lock_over_sasl(void) {
  char path[256];
  h_unique_path(path, sizeof path, "sasl-lock");
  zkl_client *alice = connect_as("alice");
  zkl_client *bob = connect_as("bob");
  h_hand_over(alice, bob, path, "sasl: alice to bob");
  zkl_client_close(alice);
  zkl_client_close(bob);
}

static void test_wrong_password(void) {
  zkl_options opts = digest("alice", "not-alices-pw");
  opts.connect_timeout_ms = 10000;
  zkl_client *client = NULL;
  int64_t started = h_now_ms();
  CHECK_ERR(zkl_client_connect(h_zk_connect(), &opts, &client), ZKL_AUTH_FAILED,
            "the server refused the SASL DIGEST-MD5 authentication", "wrong password: ZKL_AUTH_FAILED, saying why");
  CHECK(h_now_ms() - started < 5000, "wrong password: refused at once, not retried");
  CHECK(strstr(zkl_last_error_message(), "not-alices-pw") == NULL, "wrong password: the message never shows it");
  CHECK(client == NULL, "wrong password: no client");
}

static void test_creator_acl(void) {
  char path[256];
  h_unique_path(path, sizeof path, "sasl-acl");
  zkl_client *alice = connect_as("alice");
  zkl_client *bob = connect_as("bob");
  zkl_lock_options acl;
  zkl_lock_options_init(&acl);
  acl.acl = ZKL_ACL_CREATOR_ALL;
  zkl_lock *lock = NULL, *bobs = NULL;
  CHECK_RC(zkl_lock_new_with(alice, path, &acl, &lock), ZKL_OK, "sasl acl: alice makes a creator-only lock");
  CHECK_RC(zkl_lock_acquire(lock, -1), ZKL_OK, "sasl acl: alice acquires");
  CHECK_RC(zkl_lock_new_with(bob, path, &acl, &bobs), ZKL_OK, "sasl acl: bob makes one too");
  CHECK_ERR(zkl_lock_acquire(bobs, 5000), ZKL_PERMISSION_DENIED, "NoAuth", "sasl acl: bob cannot queue");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "sasl acl: alice releases");
  zkl_lock_free(lock);
  zkl_lock_free(bobs);
  zkl_client_close(alice);
  zkl_client_close(bob);
}

static void test_bad_options(void) {
  zkl_client *client = NULL;
  zkl_options opts = digest("alice", NULL);
  opts.sasl_password = NULL;
  CHECK_ERR(zkl_client_connect("127.0.0.1:1", &opts, &client), ZKL_INVALID_ARGUMENT, "sasl_password",
            "bad options: DIGEST-MD5 without a password");
  opts = digest("alice", "SECRET-PW");
  opts.sasl_mechanism = "PLAIN";
  CHECK_ERR(zkl_client_connect("127.0.0.1:1", &opts, &client), ZKL_INVALID_ARGUMENT, "\"PLAIN\"",
            "bad options: an unknown mechanism");
  opts = digest("", "SECRET-PW");
  CHECK_ERR(zkl_client_connect("127.0.0.1:1", &opts, &client), ZKL_INVALID_ARGUMENT, "username is empty",
            "bad options: an empty user");
  CHECK(strstr(zkl_last_error_message(), "SECRET-PW") == NULL, "bad options: the password is never shown");
  zkl_options_init(&opts);
  opts.sasl_mechanism = "GSSAPI";
  opts.sasl_principal = "alice@EXAMPLE.COM";
  opts.sasl_keytab = "/nonexistent.keytab";
  CHECK_ERR(zkl_client_connect("127.0.0.1:1", &opts, &client), ZKL_INVALID_ARGUMENT, "cannot read the keytab",
            "bad options: GSSAPI with a keytab that is not there");
  CHECK(client == NULL, "bad options: no client");
}

int main(void) {
  test_lock_over_sasl();
  test_wrong_password();
  test_creator_acl();
  test_bad_options();
  return h_done();
}
