"""SASL GSSAPI (Kerberos) from Python, kazoo's `sasl_options={"mechanism": "GSSAPI", ...}`, against
the real MIT KDC and the Kerberos server that `scripts/zk run --kerberos` starts beside the suite's
server (ZK_KRB5_CONNECT, the keytabs in ZK_KRB5_KEYTABS, KRB5_CONFIG): a lock held and released with
keytabs, a sasl-ACL'd lock that another principal cannot take, and a wrong principal refused at
once with AuthFailedError. Without that server these tests fail: scripts/test-python starts it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

import zklock
from conftest import hand_over


def env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.fail(f"{name} is not set: run through scripts/test-python (scripts/zk run --kerberos)")
    return value


def kerberos(name: str, keytab_of: str | None = None) -> dict[str, str]:
    keytab = os.path.join(env("ZK_KRB5_KEYTABS"), f"{keytab_of or name}.keytab")
    return {"mechanism": "GSSAPI", "principal": f"{name}@ZKLOCK.TEST", "keytab": keytab}


def connect_as(name: str) -> zklock.Client:
    return zklock.Client(env("ZK_KRB5_CONNECT"), connect_timeout=10, sasl_options=kerberos(name))


@pytest.fixture
def observer() -> Iterator[KazooClient]:
    """kazoo, unauthenticated, on the Kerberos server."""
    zk = KazooClient(hosts=env("ZK_KRB5_CONNECT"))
    zk.start(timeout=15)
    yield zk
    zk.stop()
    zk.close()


def test_a_lock_is_held_and_released_over_kerberos(observer: KazooClient, path: str) -> None:
    with connect_as("alice") as alice, connect_as("bob") as bob:
        hand_over(alice, bob, observer, path)


def test_a_kerberos_acl_keeps_another_principal_out(observer: KazooClient, path: str) -> None:
    with connect_as("alice") as alice, connect_as("bob") as bob:
        lock = alice.lock(path, acl="creator_all_world_read")
        assert lock.acquire()
        # The creator preset became alice's principal (kazoo, unauthenticated, may read it).
        acl, _ = observer.get_acls(path)
        assert [(entry.id.scheme, entry.id.id) for entry in acl] == [("sasl", "alice@ZKLOCK.TEST"), ("world", "anyone")]
        with pytest.raises(zklock.PermissionDeniedError, match="SASL identity bob@ZKLOCK.TEST"):
            bob.lock(path, acl="creator_all_world_read").acquire(blocking=False)
        with pytest.raises(zklock.PermissionDeniedError):
            bob.lock(path).acquire(timeout=5)
        assert lock.state == "held"
        lock.release()


@pytest.mark.parametrize(
    ("name", "keytab_of", "words"),
    [
        ("mallory", "alice", "could not get the credentials of mallory@ZKLOCK.TEST from the keytab"),
        ("gone", "gone", "not found in Kerberos database"),
    ],
    ids=["principal-not-in-keytab", "principal-unknown-to-the-kdc"],
)
def test_a_wrong_principal_is_refused_at_once(name: str, keytab_of: str, words: str) -> None:
    started = time.monotonic()
    with pytest.raises(zklock.AuthFailedError, match=words):
        zklock.Client(env("ZK_KRB5_CONNECT"), connect_timeout=10, sasl_options=kerberos(name, keytab_of))
    assert time.monotonic() - started < 5, "refused at once, not retried"
