#!/usr/bin/env bash
# Security: the zklock command against a secured ensemble. Checked by the suite (bash -n, and each
# option accepted by `zklock exec --help`), not run: it names a secured ensemble's hosts and files.
# cli/tests/tls.rs and cli/tests/sasl.rs run the same options against real servers.
set -euo pipefail
# ANCHOR: tls
export ZKLOCK_TLS_CA=/etc/zk/ca.pem ZKLOCK_TLS_CERT=/etc/zk/client.pem ZKLOCK_TLS_KEY=/etc/zk/client.key
zklock exec --zk zk1.example.com:2281 --tls-key-password-file /etc/zk/key.password /locks/deploy -- ./deploy.sh
zklock status --zk zk1.example.com:2281 /locks/deploy
# ANCHOR_END: tls
# ANCHOR: sasl
# The password only from a file or the environment, never an argument (ps shows those to everyone).
ZKLOCK_SASL_PASSWORD=... zklock exec --sasl-mechanism DIGEST-MD5 --sasl-user alice /locks/report -- ./report.sh
zklock status --sasl-mechanism DIGEST-MD5 --sasl-user alice --sasl-password-file /etc/zk/alice.pw /locks/report
zklock exec --sasl-mechanism GSSAPI --sasl-principal alice@EXAMPLE.COM --sasl-keytab /etc/zk/alice.keytab /locks/report -- ./report.sh
# ANCHOR_END: sasl
