"""SASL DIGEST-MD5 from Python, kazoo's `sasl_options`, against the test server, which
`scripts/zk run --sasl` starts with a JAAS DigestLoginModule for the users of ZK_SASL_USERS: a lock
held and released, a wrong password refused at once with AuthFailedError (never showing it), a
sasl-ACL'd lock that another user cannot take (kazoo seeing its sasl identity), and bad options
refused before any traffic, GSSAPI's keys too. (Kerberos against a real KDC: test_kerberos.py.)"""

from __future__ import annotations

import os
import time

import pytest
from kazoo.client import KazooClient

import zklock
from conftest import hand_over


def users() -> dict[str, str]:
    spec = os.environ.get("ZK_SASL_USERS")
    if not spec:
        pytest.skip("the server authenticates no SASL users: run through scripts/test-python (scripts/zk run --sasl)")
    return dict(entry.split(":", 1) for entry in spec.split(","))


def sasl(user: str, password: str) -> dict[str, str]:
    return {"mechanism": "DIGEST-MD5", "username": user, "password": password}


def connect_as(zk_connect: str, user: str) -> zklock.Client:
    return zklock.Client(zk_connect, sasl_options=sasl(user, users()[user]))


def test_a_lock_is_held_and_released_over_sasl_digest_md5(zk_connect: str, kazoo: KazooClient, path: str) -> None:
    with connect_as(zk_connect, "alice") as alice, connect_as(zk_connect, "bob") as bob:
        hand_over(alice, bob, kazoo, path)


def test_a_wrong_password_is_refused_at_once(zk_connect: str) -> None:
    users()
    started = time.monotonic()
    with pytest.raises(zklock.AuthFailedError) as refused:
        zklock.Client(zk_connect, connect_timeout=10, sasl_options=sasl("alice", "not-alices-pw"))
    assert time.monotonic() - started < 5, "refused at once, not retried"
    message = str(refused.value)
    assert "the server refused the SASL DIGEST-MD5 authentication" in message
    assert "not-alices-pw" not in message and "not-alices-pw" not in repr(refused.value)


def test_a_sasl_acl_keeps_another_user_out(zk_connect: str, kazoo: KazooClient, path: str) -> None:
    with connect_as(zk_connect, "alice") as alice, connect_as(zk_connect, "bob") as bob:
        lock = alice.lock(path, acl="creator_all_world_read")
        assert lock.acquire()
        # The creator preset became alice's SASL identity (kazoo, unauthenticated, may read it).
        acl, _ = kazoo.get_acls(path)
        assert [(entry.id.scheme, entry.id.id) for entry in acl] == [("sasl", "alice"), ("world", "anyone")]
        with pytest.raises(zklock.PermissionDeniedError):
            bob.lock(path, acl="creator_all_world_read").acquire(blocking=False)
        with pytest.raises(zklock.PermissionDeniedError):
            bob.lock(path).acquire(timeout=5)
        assert lock.state == "held"
        lock.release()


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ("DIGEST-MD5", "must be a dict"),
        ({"username": "alice", "password": "SECRET-PW"}, '"mechanism" is missing'),
        ({"mechanism": "PLAIN", "username": "alice", "password": "SECRET-PW"}, 'the mechanism "PLAIN"'),
        ({"mechanism": "DIGEST-MD5", "username": "alice"}, 'needs "username" and "password"'),
        ({"mechanism": "DIGEST-MD5", "username": "", "password": "SECRET-PW"}, "username is empty"),
        ({"mechanism": "DIGEST-MD5", "username": "a", "password": "SECRET-PW", "realm": "x"}, '"realm" is not an option'),
        ({"mechanism": "DIGEST-MD5", "username": "alice", "password": 7}, '"password" must be a str'),
        ({"mechanism": "GSSAPI", "service": "zookeeper"}, 'GSSAPI needs "principal"'),
        ({"mechanism": "GSSAPI", "principal": "alice@R", "keytab": "/nonexistent.keytab"}, "cannot read the keytab"),
    ],
)
def test_bad_sasl_options_are_refused_before_any_traffic(options: object, words: str) -> None:
    # A port nothing listens on: these fail before trying it.
    with pytest.raises(zklock.InvalidArgumentError) as refused:
        zklock.Client("127.0.0.1:1", sasl_options=options)  # type: ignore[arg-type]
    assert words in str(refused.value)
    assert "SECRET-PW" not in str(refused.value)
