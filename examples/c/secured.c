/* Security, TLS and SASL in C: compiled by the suite, not run (a secured ensemble's hosts and
 * files). tests/c/test_tls.c, test_sasl.c and test_kerberos.c run the same options against real
 * servers. */
#include <zklock.h>

int connect_tls(const char *password, zkl_client **client) {
  /* ANCHOR: tls */
  zkl_options opts;
  zkl_options_init(&opts);
  opts.tls = ZKL_TLS_VERIFY_FULL; /* or ZKL_TLS_VERIFY_CA; ZKL_TLS_NO_VERIFY for tests */
  opts.tls_ca_file = "/etc/zk/ca.pem";
  opts.tls_cert_file = "/etc/zk/client.pem"; /* mutual TLS */
  opts.tls_key_file = "/etc/zk/client.key";
  opts.tls_key_password = password; /* if it is encrypted; NULL otherwise */
  return zkl_client_connect("zk1.example.com:2281,zk2.example.com:2281", &opts, client);
  /* ANCHOR_END: tls */
}

int connect_sasl(const char *password, zkl_client **client) {
  /* ANCHOR: sasl */
  zkl_options opts;
  zkl_options_init(&opts);
  opts.sasl_mechanism = "DIGEST-MD5"; /* or "GSSAPI" with opts.sasl_principal, sasl_keytab, ... */
  opts.sasl_username = "alice";
  opts.sasl_password = password; /* borrowed for zkl_client_connect only */
  return zkl_client_connect("zk1.example.com:2181", &opts, client); /* ZKL_AUTH_FAILED if refused */
  /* ANCHOR_END: sasl */
}

int main(void) { return 0; }
