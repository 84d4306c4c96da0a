"""TLS from Python with kazoo's argument names (use_ssl, ca, certfile, keyfile, keyfile_password,
verify_certs, check_hostname), against a real ZooKeeper serving TLS with client certificates
required, started for these tests by `scripts/zk run --tls`: the same arguments given to kazoo's
KazooClient and to zklock.Client connect both, and their locks exclude each other; an encrypted
key with its password; each refused handshake naming its cause; the verification switches; bad
arguments refused before any network traffic; no secret in messages, reprs or lock nodes."""

from __future__ import annotations

import json
import os
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import wait_children
from kazoo.client import KazooClient
from kazoo.recipe.lock import Lock as KazooLock

import zklock

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class TlsServer:
    plain: str  # its plaintext port, for observers
    connect: str  # localhost:<secure port>, the name its certificate has
    dir: Path  # the certificates of `scripts/zk tls-certs`

    @property
    def port(self) -> int:
        return int(self.connect.split(",")[0].rsplit(":", 1)[1])

    def alice(self, **extra: Any) -> dict[str, Any]:
        """kazoo's TLS arguments for alice's certificate, verified against the test CA."""
        return dict(use_ssl=True, ca=str(self.dir / "ca.pem"), certfile=str(self.dir / "alice.pem"),
                    keyfile=str(self.dir / "alice.key"), **extra)

    def password(self) -> str:
        return (self.dir / "alice-encrypted.password").read_text().splitlines()[0]


@pytest.fixture(scope="module")
def tls() -> Iterator[TlsServer]:
    env = {k: v for k, v in os.environ.items() if k not in ("ZK_CONNECT", "ZK_TLS_CONNECT", "ZK_TLS_DIR")}
    server = subprocess.Popen(
        [str(ROOT / "scripts" / "zk"), "run", "--tls", "--", "sh", "-c",
         'echo "$ZK_CONNECT $ZK_TLS_CONNECT $ZK_TLS_DIR"; exec cat >/dev/null'],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
    )
    assert server.stdout is not None and server.stdin is not None
    fields = server.stdout.readline().split()
    assert len(fields) == 3, f"scripts/zk run --tls said {fields!r}"
    yield TlsServer(fields[0], fields[1], Path(fields[2]))
    server.stdin.close()  # the `cat` ends, and scripts/zk stops the server
    server.wait(timeout=60)
    server.stdout.close()


@pytest.fixture
def observer(tls: TlsServer) -> Iterator[KazooClient]:
    kazoo = KazooClient(hosts=tls.plain)
    kazoo.start(timeout=15)
    yield kazoo
    kazoo.stop()
    kazoo.close()


def refused_at_once(**arguments: Any) -> zklock.InvalidArgumentError:
    """zklock.Client refuses `arguments` with InvalidArgumentError before any traffic: nothing
    listens on localhost:1, so reaching the network would end in a timeout instead."""
    started = time.monotonic()
    with pytest.raises(zklock.InvalidArgumentError) as refused:
        zklock.Client("localhost:1", **arguments)
    assert time.monotonic() - started < 2, "refused before any traffic"
    return refused.value


def handshake_refused(connect: str, cause: str, **arguments: Any) -> None:
    """AuthFailedError naming `cause`, at once: every server refused the handshake for that
    certificate reason, which the connect timeout (10 s here) would not change (before: a
    LockTimeout after it)."""
    started = time.monotonic()
    with pytest.raises(zklock.AuthFailedError) as refused:
        zklock.Client(connect, connect_timeout=10, **arguments)
    assert cause in str(refused.value), str(refused.value)
    assert time.monotonic() - started < 5, "refused at once, not after the connect timeout"


def test_kazoos_arguments_connect_kazoo_and_zklock_alike_and_their_locks_exclude_each_other(
    tls: TlsServer, observer: KazooClient, path: str
) -> None:
    arguments = tls.alice()
    kazoo = KazooClient(hosts=tls.connect, **arguments)
    kazoo.start(timeout=15)
    try:
        with zklock.Client(tls.connect, **arguments) as client:
            lock = client.lock(path)
            with lock:
                names = wait_children(observer, path, 1)
                # kazoo (told of Curator's names) sees zklock's holder, over TLS too.
                assert not KazooLock(kazoo, path, extra_lock_patterns=["-lock-"]).acquire(blocking=False)
                assert wait_children(observer, path, 1) == names
            wait_children(observer, path, 0)
            kazoo_lock = KazooLock(kazoo, path, extra_lock_patterns=["-lock-"])
            assert kazoo_lock.acquire(timeout=10)
            assert not lock.acquire(blocking=False), "kazoo holds it"
            kazoo_lock.release()
            assert lock.acquire(timeout=10)
            lock.release()
    finally:
        kazoo.stop()
        kazoo.close()


def test_an_encrypted_key_with_its_password_and_no_secret_anywhere(
    tls: TlsServer, observer: KazooClient, path: str
) -> None:
    password = tls.password()
    arguments = {**tls.alice(), "keyfile": str(tls.dir / "alice-encrypted.key"), "keyfile_password": password}
    with zklock.Client(tls.connect, **arguments) as client:
        with client.lock(path):
            [name] = wait_children(observer, path, 1)
            data, _ = observer.get(f"{path}/{name}")
            assert password.encode() not in data and b"PRIVATE" not in data
            assert json.loads(data)["lang"] == "python"
        assert password not in repr(client)
    wrong = refused_at_once(**{**arguments, "keyfile_password": "not-the-password"})
    shown = f"{wrong} {wrong!r} {wrong.args!r}"
    assert "alice-encrypted.key could not be decrypted with the password given" in shown, shown
    assert "not-the-password" not in shown
    missing = refused_at_once(**{**arguments, "keyfile_password": None})
    assert "is encrypted and no password is given" in str(missing)


def test_digest_auth_over_tls_does_not_warn(tls: TlsServer) -> None:
    # (Without TLS it warns: test_acl.py's test_digest_auth_without_tls_warns_once_at_connect.)
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        zklock.Client(tls.connect, auth="alice:alice-secret", **tls.alice()).close()
    assert [str(w.message) for w in warned] == []


def test_refused_handshakes_name_their_cause(tls: TlsServer) -> None:
    by_address = f"127.0.0.1:{tls.port}"
    handshake_refused(tls.connect, "not signed by a trusted CA", **{**tls.alice(), "ca": str(tls.dir / "other-ca.pem")})
    handshake_refused(by_address, "does not name the host 127.0.0.1 (name mismatch: it names localhost)", **tls.alice())
    handshake_refused(tls.connect, "requires a client certificate and none is configured",
                      use_ssl=True, ca=str(tls.dir / "ca.pem"))


def test_the_verification_switches(tls: TlsServer, path: str) -> None:
    by_address = f"127.0.0.1:{tls.port}"
    # The certificate names localhost: by address, with the name given, or without the check.
    with zklock.Client(by_address, **tls.alice(server_hostname="localhost")) as client:
        assert client.state == "connected"
    with zklock.Client(by_address, **tls.alice(check_hostname=False)) as client:
        assert client.state == "connected"
    # Without the host-name check, the chain still is.
    handshake_refused(by_address, "not signed by a trusted CA",
                      **{**tls.alice(check_hostname=False), "ca": str(tls.dir / "other-ca.pem")})
    # verify_certs=False: no CA, nothing verified (for tests only).
    arguments = {**tls.alice(verify_certs=False), "ca": None}
    with zklock.Client(by_address, **arguments) as client:
        with client.lock(path):
            pass


def test_bad_tls_arguments_are_refused_before_any_traffic(tls: TlsServer) -> None:
    assert "ca is given but use_ssl is False" in str(refused_at_once(ca=str(tls.dir / "ca.pem")))
    assert "keyfile_password is given but use_ssl is False" in str(refused_at_once(keyfile_password="x"))
    # No CA with verification on: the core's words, as every language reports them
    # (bindings-node/test/tls.test.mjs says the same).
    assert str(refused_at_once(use_ssl=True)) == (
        "invalid argument on localhost:1: TLS options: no CA bundle to verify the servers' certificates "
        "against (turning certificate verification off instead is for tests only)"
    )
    assert "check_hostname=True needs verify_certs=True" in str(
        refused_at_once(**tls.alice(verify_certs=False, check_hostname=True))
    )
    missing = tls.dir / "no-such.pem"
    assert f"cannot read the CA bundle {missing}" in str(refused_at_once(**{**tls.alice(), "ca": missing}))
    assert "needs its private key" in str(refused_at_once(**{**tls.alice(), "keyfile": None}))
    not_a_ca = refused_at_once(**{**tls.alice(), "ca": str(tls.dir / "alice.key")})
    assert "no usable PEM certificate" in str(not_a_ca) and "PRIVATE" not in str(not_a_ca)
    assert "no valid host name" in str(refused_at_once(**tls.alice(server_hostname="not a host")))


def test_an_x509_v1_client_certificate_connects_as_kazoos_does_and_is_known_by_its_subject(
    tls: TlsServer, path: str
) -> None:
    # carol.pem is X.509 v1 (no extensions): what `openssl x509 -req` makes by default.
    carol = {**tls.alice(), "certfile": str(tls.dir / "carol.pem"), "keyfile": str(tls.dir / "carol.key")}
    kazoo = KazooClient(hosts=tls.connect, **carol)
    kazoo.start(timeout=15)
    kazoo.stop()
    kazoo.close()
    with zklock.Client(tls.connect, **carol) as client, zklock.Client(tls.connect, **tls.alice()) as alice:
        with client.lock(path, acl="creator_all"):
            # The server knows carol by her certificate's subject: alice may not queue.
            with pytest.raises(zklock.PermissionDeniedError):
                alice.lock(path, acl="creator_all").acquire(timeout=5)
