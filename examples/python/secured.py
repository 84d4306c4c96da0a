"""Security, TLS and SASL in Python: byte-compiled by the suite, not run (a secured ensemble's
hosts and files). bindings-python/tests/test_tls.py, test_sasl.py and test_kerberos.py run the
same arguments against real servers."""
import os

import zklock


def tls() -> None:
    # ANCHOR: tls
    with zklock.Client(
        "zk1.example.com:2281,zk2.example.com:2281",
        use_ssl=True,
        ca="/etc/zk/ca.pem",
        certfile="/etc/zk/client.pem",  # mutual TLS
        keyfile="/etc/zk/client.key",
        keyfile_password=os.environ.get("ZK_KEY_PASSWORD"),  # if it is encrypted
    ) as client:
        with client.lock("/locks/report", acl=[(zklock.PERM_ALL, "x509", "CN=app,O=example")]):
            pass
    # ANCHOR_END: tls


def sasl(hosts: str, pw: str) -> None:
    # ANCHOR: sasl
    client = zklock.Client(hosts, sasl_options={"mechanism": "DIGEST-MD5", "username": "alice", "password": pw})
    client = zklock.Client(  # kazoo's names, and ours
        hosts,
        sasl_options={"mechanism": "GSSAPI", "principal": "alice@EXAMPLE.COM", "keytab": "/etc/zk/alice.keytab"},
    )
    # ANCHOR_END: sasl
    client.close()
