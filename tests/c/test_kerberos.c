/* SASL GSSAPI (Kerberos) from C (zkl_options.sasl_*), against the real MIT KDC and the Kerberos
 * server that `scripts/zk run --kerberos` starts beside the suite's server (ZK_KRB5_CONNECT, the
 * keytabs in ZK_KRB5_KEYTABS, KRB5_CONFIG): a lock held and released with keytabs, a creator ACL that
 * another principal cannot pass, and a wrong principal refused at once with ZKL_AUTH_FAILED. */
#define _GNU_SOURCE
#include "harness.h"

static const char *env_or_die(const char *name) {
  const char *value = getenv(name);
  h_require(value != NULL && *value != '\0', name); /* set by scripts/test-c (zk run --kerberos) */
  return value;
}

/* The options of `name`@ZKLOCK.TEST with the keytab `keytab_of`.keytab; the strings in bufs. */
static zkl_options kerberos(const char *name, const char *keytab_of, char principal[128], char keytab[512]) {
  snprintf(principal, 128, "%s@ZKLOCK.TEST", name);
  snprintf(keytab, 512, "%s/%s.keytab", env_or_die("ZK_KRB5_KEYTABS"), keytab_of);
  zkl_options opts;
  zkl_options_init(&opts);
  opts.sasl_mechanism = "GSSAPI";
  opts.sasl_principal = principal;
  opts.sasl_keytab = keytab;
  opts.connect_timeout_ms = 10000;
  return opts;
}

static zkl_client *connect_as(const char *name) {
  char principal[128], keytab[512];
  zkl_options opts = kerberos(name, name, principal, keytab);
  zkl_client *client = NULL;
  h_require(zkl_client_connect(env_or_die("ZK_KRB5_CONNECT"), &opts, &client) == ZKL_OK, "connect with Kerberos");
  return client;
}

static void test_lock_over_kerberos(void) {
  char path[256];
  h_unique_path(path, sizeof path, "krb-lock");
  zkl_client *alice = connect_as("alice");
  zkl_client *bob = connect_as("bob");
  h_hand_over(alice, bob, path, "kerberos: alice to bob");
  zkl_client_close(alice);
  zkl_client_close(bob);
}

static void test_creator_acl(void) {
  char path[256];
  h_unique_path(path, sizeof path, "krb-acl");
  zkl_client *alice = connect_as("alice");
  zkl_client *bob = connect_as("bob");
  zkl_lock_options acl;
  zkl_lock_options_init(&acl);
  acl.acl = ZKL_ACL_CREATOR_ALL_WORLD_READ; /* bob may list the queue, so the refusal is his node's */
  zkl_lock *lock = NULL, *bobs = NULL, *plain = NULL;
  CHECK_RC(zkl_lock_new_with(alice, path, &acl, &lock), ZKL_OK, "kerberos acl: alice makes a creator-only lock");
  CHECK_RC(zkl_lock_acquire(lock, -1), ZKL_OK, "kerberos acl: alice acquires");
  CHECK_RC(zkl_lock_new_with(bob, path, &acl, &bobs), ZKL_OK, "kerberos acl: bob makes one too");
  CHECK_ERR(zkl_lock_acquire(bobs, 0), ZKL_PERMISSION_DENIED, "SASL identity bob@ZKLOCK.TEST",
            "kerberos acl: bob, as himself, cannot queue (the error names him)");
  CHECK_RC(zkl_lock_new(bob, path, &plain), ZKL_OK, "kerberos acl: bob makes an open lock on the path");
  CHECK_RC(zkl_lock_acquire(plain, 5000), ZKL_PERMISSION_DENIED, "kerberos acl: nor with an open lock");
  bool held = false;
  CHECK(zkl_lock_is_held(lock, &held) == ZKL_OK && held, "kerberos acl: alice still holds it");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "kerberos acl: alice releases");
  zkl_lock_free(lock);
  zkl_lock_free(bobs);
  zkl_lock_free(plain);
  zkl_client_close(alice);
  zkl_client_close(bob);
}

/* Connecting with these options is refused with ZKL_AUTH_FAILED well before the connect timeout,
 * the message naming `cause`. */
static void refused(const zkl_options *opts, const char *cause, const char *name) {
  zkl_client *client = NULL;
  int64_t started = h_now_ms();
  CHECK_ERR(zkl_client_connect(env_or_die("ZK_KRB5_CONNECT"), opts, &client), ZKL_AUTH_FAILED, cause, name);
  CHECK(h_now_ms() - started < 5000, "kerberos refused: at once, not retried");
  CHECK(client == NULL, "kerberos refused: no client");
}

static void test_wrong_principal(void) {
  char principal[128], keytab[512];
  zkl_options opts = kerberos("mallory", "alice", principal, keytab);
  refused(&opts, "could not get the credentials of mallory@ZKLOCK.TEST from the keytab",
          "kerberos: a principal the keytab has no key for: ZKL_AUTH_FAILED");
  opts = kerberos("gone", "gone", principal, keytab);
  refused(&opts, "not found in Kerberos database", "kerberos: a principal the KDC does not know: ZKL_AUTH_FAILED");
}

int main(void) {
  test_lock_over_kerberos();
  test_creator_acl();
  test_wrong_principal();
  return h_done();
}
