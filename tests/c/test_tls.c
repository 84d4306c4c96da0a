/* TLS from C (zkl_options.tls and its tls_ files), against a real ZooKeeper serving TLS with
 * client certificates required (scripts/zk run --tls: ZK_TLS_CONNECT, ZK_TLS_DIR, and ZK_CONNECT
 * for its plaintext port): a lock held and released over mutual TLS, seen from the plaintext port;
 * an encrypted key with its password (a wrong one, or none, refused at once, naming the file and
 * never the password); each refused handshake naming its cause (untrusted CA, another host's
 * name, no client certificate); the server-name override, ZKL_TLS_VERIFY_CA and ZKL_TLS_NO_VERIFY;
 * bad options refused before any network traffic; no secret in the lock node. */
#define _GNU_SOURCE
#include "harness.h"

static const char *tls_connect(void) {
  const char *connect = getenv("ZK_TLS_CONNECT");
  h_require(connect != NULL && *connect != '\0', "ZK_TLS_CONNECT is set (scripts/zk run --tls)");
  return connect;
}

/* ZK_TLS_DIR/name, in a static buffer of its own per slot. */
static const char *file(int slot, const char *name) {
  static char paths[8][512];
  const char *dir = getenv("ZK_TLS_DIR");
  h_require(dir != NULL && *dir != '\0', "ZK_TLS_DIR is set (scripts/zk run --tls)");
  snprintf(paths[slot], sizeof paths[slot], "%s/%s", dir, name);
  return paths[slot];
}

/* The first line of alice-encrypted.password. */
static const char *key_password(void) {
  static char password[128];
  FILE *f = fopen(file(5, "alice-encrypted.password"), "r");
  h_require(f != NULL && fgets(password, sizeof password, f) != NULL, "read alice-encrypted.password");
  fclose(f);
  password[strcspn(password, "\n")] = '\0';
  return password;
}

/* Options for mutual TLS as alice, with full verification against the test CA. */
static zkl_options alice(void) {
  zkl_options opts;
  zkl_options_init(&opts);
  opts.tls = ZKL_TLS_VERIFY_FULL;
  opts.tls_ca_file = file(0, "ca.pem");
  opts.tls_cert_file = file(1, "alice.pem");
  opts.tls_key_file = file(2, "alice.key");
  opts.connect_timeout_ms = 10000;
  return opts;
}

/* The port of the first host of ZK_TLS_CONNECT ("localhost:PORT[,...]"). */
static int tls_port(void) {
  const char *colon = strchr(tls_connect(), ':');
  return colon == NULL ? 0 : atoi(colon + 1);
}

static void test_lock_over_mutual_tls(void) {
  char path[256];
  h_unique_path(path, sizeof path, "tls-lock");
  zkl_options opts = alice();
  zkl_client *client = NULL;
  CHECK_RC(zkl_client_connect(tls_connect(), &opts, &client), ZKL_OK, "mutual TLS: connects");
  if (client == NULL) return;
  zkl_lock *lock = NULL, *observed = NULL;
  zkl_client *plain = h_connect();
  CHECK_RC(zkl_lock_new(client, path, &lock), ZKL_OK, "mutual TLS: a lock");
  CHECK_RC(zkl_lock_acquire(lock, 10000), ZKL_OK, "mutual TLS: acquired");
  CHECK_RC(zkl_lock_new(plain, path, &observed), ZKL_OK, "mutual TLS: the lock from the plaintext port");
  CHECK(h_contenders(observed) == 1, "mutual TLS: the plaintext port sees the holder's node");
  CHECK_RC(zkl_lock_acquire(observed, 0), ZKL_TIMEOUT, "mutual TLS: another client cannot take it");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "mutual TLS: released");
  CHECK(h_wait_contenders(observed, 0, 10000), "mutual TLS: the node is gone");
  zkl_lock_free(observed);
  zkl_lock_free(lock);
  zkl_client_close(plain);
  zkl_client_close(client);
}

static void test_encrypted_key(void) {
  char path[256];
  h_unique_path(path, sizeof path, "tls-encrypted-key");
  char password[128];
  snprintf(password, sizeof password, "%s", key_password());
  zkl_options opts = alice();
  opts.tls_key_file = file(2, "alice-encrypted.key");
  opts.tls_key_password = password;
  zkl_client *client = NULL;
  CHECK_RC(zkl_client_connect(tls_connect(), &opts, &client), ZKL_OK, "encrypted key: connects with its password");
  /* The caller may wipe the password once connected: it was only read during the call. */
  memset(password, 0, sizeof password);
  if (client != NULL) {
    zkl_lock *lock = NULL;
    zkl_lock_new(client, path, &lock);
    CHECK_RC(zkl_lock_acquire(lock, 10000), ZKL_OK, "encrypted key: acquired");
    zkl_participants *list = NULL;
    CHECK_RC(zkl_lock_contenders(lock, &list), ZKL_OK, "encrypted key: contenders listed");
    if (list != NULL && list->count == 1) {
      const zkl_participant *p = &list->items[0];
      char data[4096];
      snprintf(data, sizeof data, "%.*s", (int)p->data_len, (const char *)p->data);
      CHECK(strstr(data, key_password()) == NULL && strstr(data, "PRIVATE") == NULL && strstr(data, "\"c\"") != NULL,
            "encrypted key: the lock node's identity holds no secret");
    }
    zkl_participants_free(list);
    CHECK_RC(zkl_lock_release(lock), ZKL_OK, "encrypted key: released");
    zkl_lock_free(lock);
    zkl_client_close(client);
  }

  /* Refused before any traffic: nothing listens on localhost:1, so reaching the network would
   * end in ZKL_TIMEOUT after the connect timeout (a long one here: valgrind is slow to decrypt). */
  opts.tls_key_password = "not-the-password";
  opts.connect_timeout_ms = 60000;
  client = NULL;
  int64_t started = h_now_ms();
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "could not be decrypted",
            "encrypted key: a wrong password is ZKL_INVALID_ARGUMENT");
  CHECK(strstr(zkl_last_error_message(), "alice-encrypted.key") != NULL &&
            strstr(zkl_last_error_message(), "not-the-password") == NULL,
        "encrypted key: the message names the key's file, never the password");
  CHECK(h_now_ms() - started < 30000 && client == NULL, "encrypted key: refused before any traffic");
  opts.tls_key_password = NULL;
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "no password is given",
            "encrypted key: no password is ZKL_INVALID_ARGUMENT");
}

/* Connecting with opts to connect fails with ZKL_AUTH_FAILED whose message says cause, at once:
 * every server refused the handshake for that certificate reason, which the connect timeout (30 s
 * here) would not change (before: ZKL_TIMEOUT after it). At once: well within it, even under
 * valgrind, which is slow to decrypt. */
static void refused(const char *connect, zkl_options *opts, const char *cause, const char *name) {
  zkl_client *client = NULL;
  opts->connect_timeout_ms = 30000;
  int64_t start = h_now_ms();
  CHECK_ERR(zkl_client_connect(connect, opts, &client), ZKL_AUTH_FAILED, cause, name);
  char at_once[200];
  snprintf(at_once, sizeof at_once, "%s: at once, not after the connect timeout", name);
  CHECK(h_now_ms() - start < 15000, at_once);
  if (client != NULL) zkl_client_close(client);
}

static void test_refused_handshakes(void) {
  char by_address[64];
  snprintf(by_address, sizeof by_address, "127.0.0.1:%d", tls_port());
  zkl_options opts = alice();
  opts.tls_ca_file = file(0, "other-ca.pem");
  refused(tls_connect(), &opts, "not signed by a trusted CA", "refused: an untrusted server certificate");
  opts = alice();
  refused(by_address, &opts, "does not name the host 127.0.0.1 (name mismatch: it names localhost)",
          "refused: a certificate for another host");
  opts = alice();
  opts.tls_cert_file = NULL;
  opts.tls_key_file = NULL;
  refused(tls_connect(), &opts, "requires a client certificate and none is configured",
          "refused: no client certificate where the server requires one");
  opts = alice();
  opts.tls_server_name = "zk.example.com";
  refused(by_address, &opts, "does not name the host zk.example.com", "refused: a server name the certificate lacks");
}

static void test_verification_choices(void) {
  char by_address[64];
  snprintf(by_address, sizeof by_address, "127.0.0.1:%d", tls_port());
  zkl_client *client = NULL;
  zkl_options opts = alice();
  opts.tls_server_name = "localhost";
  CHECK_RC(zkl_client_connect(by_address, &opts, &client), ZKL_OK,
           "server name: reached by address, verified as localhost");
  if (client != NULL) zkl_client_close(client);
  client = NULL;
  opts = alice();
  opts.tls = ZKL_TLS_VERIFY_CA;
  CHECK_RC(zkl_client_connect(by_address, &opts, &client), ZKL_OK, "ZKL_TLS_VERIFY_CA: any host name passes");
  if (client != NULL) zkl_client_close(client);
  client = NULL;
  opts.tls_ca_file = file(0, "other-ca.pem");
  refused(by_address, &opts, "not signed by a trusted CA", "ZKL_TLS_VERIFY_CA: the chain is still verified");
  opts = alice();
  opts.tls = ZKL_TLS_NO_VERIFY;
  opts.tls_ca_file = NULL;
  CHECK_RC(zkl_client_connect(by_address, &opts, &client), ZKL_OK,
           "ZKL_TLS_NO_VERIFY: no CA, any certificate (for tests only)");
  if (client != NULL) {
    char path[256];
    h_unique_path(path, sizeof path, "tls-no-verify");
    zkl_lock *lock = NULL;
    zkl_lock_new(client, path, &lock);
    CHECK_RC(zkl_lock_acquire(lock, 10000), ZKL_OK, "ZKL_TLS_NO_VERIFY: a lock is acquired");
    CHECK_RC(zkl_lock_release(lock), ZKL_OK, "ZKL_TLS_NO_VERIFY: and released");
    zkl_lock_free(lock);
    zkl_client_close(client);
  }
}

static void test_bad_options(void) {
  zkl_client *client = NULL;
  zkl_options opts;
  zkl_options_init(&opts);
  CHECK(opts.tls == ZKL_TLS_OFF && opts.tls_ca_file == NULL && opts.tls_key_password == NULL,
        "bad options: zkl_options_init leaves TLS off");
  opts.tls_ca_file = file(0, "ca.pem");
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "opts->tls is ZKL_TLS_OFF",
            "bad options: a tls_ file with TLS off");
  opts = alice();
  opts.tls = 7;
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "opts->tls is 7",
            "bad options: an unknown opts->tls");
  opts = alice();
  opts.tls_ca_file = NULL;
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "opts->tls_ca_file is NULL",
            "bad options: verification without a CA bundle");
  opts = alice();
  opts.tls_ca_file = file(0, "no-such-ca.pem");
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "no-such-ca.pem",
            "bad options: a CA file that cannot be read is named");
  opts = alice();
  opts.tls_key_file = NULL;
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "needs its private key",
            "bad options: a certificate without its key");
  opts = alice();
  opts.tls_ca_file = file(0, "alice.key");
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "no usable PEM certificate",
            "bad options: a CA file without a certificate");
  CHECK(strstr(zkl_last_error_message(), "PRIVATE") == NULL, "bad options: the message quotes no key");
  opts = alice();
  opts.tls_server_name = "not a host";
  CHECK_ERR(zkl_client_connect("localhost:1", &opts, &client), ZKL_INVALID_ARGUMENT, "no valid host name",
            "bad options: a server name that is no host name");
  CHECK(client == NULL, "bad options: nothing written to out");
}

/* carol's certificate is X.509 v1 (no extensions, what `openssl x509 -req` makes by default):
 * presented as given, and the server knows carol by its subject (a creator ACL keeps alice out). */
static void test_v1_client_certificate(void) {
  char path[256];
  h_unique_path(path, sizeof path, "tls-x509-v1");
  zkl_options carol_opts = alice();
  carol_opts.tls_cert_file = file(6, "carol.pem");
  carol_opts.tls_key_file = file(7, "carol.key");
  zkl_options alice_opts = alice();
  zkl_client *carol = NULL, *other = NULL;
  CHECK_RC(zkl_client_connect(tls_connect(), &carol_opts, &carol), ZKL_OK, "v1 certificate: connects");
  CHECK_RC(zkl_client_connect(tls_connect(), &alice_opts, &other), ZKL_OK, "v1 certificate: alice connects too");
  if (carol == NULL || other == NULL) return;
  zkl_lock_options lock_opts;
  zkl_lock_options_init(&lock_opts);
  lock_opts.acl = ZKL_ACL_CREATOR_ALL;
  zkl_lock *lock = NULL, *theirs = NULL;
  CHECK_RC(zkl_lock_new_with(carol, path, &lock_opts, &lock), ZKL_OK, "v1 certificate: a creator-only lock");
  CHECK_RC(zkl_lock_acquire(lock, 10000), ZKL_OK, "v1 certificate: acquired");
  CHECK_RC(zkl_lock_new_with(other, path, &lock_opts, &theirs), ZKL_OK, "v1 certificate: alice's handle");
  CHECK_ERR(zkl_lock_acquire(theirs, 5000), ZKL_PERMISSION_DENIED, "NoAuth",
            "v1 certificate: alice may not queue (the server knows carol by her certificate)");
  CHECK_RC(zkl_lock_release(lock), ZKL_OK, "v1 certificate: released");
  zkl_lock_free(theirs);
  zkl_lock_free(lock);
  zkl_client_close(other);
  zkl_client_close(carol);
}

int main(void) {
  test_bad_options();
  test_lock_over_mutual_tls();
  test_v1_client_certificate();
  test_encrypted_key();
  test_refused_handshakes();
  test_verification_choices();
  return h_done();
}
