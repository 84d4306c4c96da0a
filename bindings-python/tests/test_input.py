"""Bad input: a clear error naming what was wrong, raised before any network traffic."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import children

import zklock

UNREACHABLE = "127.0.0.1:1"  # nothing listens: any attempt to connect would fail or time out


def test_the_exception_hierarchy():
    assert issubclass(zklock.InvalidArgumentError, ValueError)
    assert issubclass(zklock.LockTimeout, TimeoutError)
    assert issubclass(zklock.NotOwnerError, RuntimeError)
    assert issubclass(zklock.DeadlockError, RuntimeError)
    assert issubclass(zklock.PermissionDeniedError, PermissionError)
    denied = zklock.PermissionDeniedError("permission denied on /a: NoAuth", "/a")
    assert str(denied) == "permission denied on /a: NoAuth" and denied.path == "/a"
    for name in (
        "DeadlockError",
        "PermissionDeniedError",
        "SessionExpiredError",
        "LockLostError",
        "NotOwnerError",
        "LockTimeout",
        "ClosedError",
        "ConnectionLossError",
        "AuthFailedError",
        "InvalidArgumentError",
        "ZooKeeperError",
    ):
        assert issubclass(getattr(zklock, name), zklock.ZkLockError), name
    err = zklock.ZooKeeperError("zookeeper error on /a: no auth", "/a", -102)
    assert err.code == -102 and err.path == "/a"
    # A warning, not an error: a filter can silence it (digest auth without TLS, see test_acl.py).
    assert issubclass(zklock.SecurityWarning, UserWarning) and "SecurityWarning" in zklock.__all__
    assert not issubclass(zklock.SecurityWarning, zklock.ZkLockError)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"session_timeout": 0}, "session_timeout"),
        ({"session_timeout": -1}, "session_timeout"),
        ({"session_timeout": float("nan")}, "session_timeout"),
        ({"connect_timeout": 0}, "connect_timeout"),
        ({"auth": "no-colon"}, "user:password"),
        ({"auth": ("us:er", "pw")}, "':'"),
        ({"auth": 42}, "auth"),
    ],
)
def test_bad_client_options_are_rejected_before_connecting(kwargs, words):
    started = time.monotonic()
    with pytest.raises(zklock.InvalidArgumentError, match=words) as err:
        zklock.Client(UNREACHABLE, connect_timeout=kwargs.pop("connect_timeout", 30), **kwargs)
    assert time.monotonic() - started < 1.0, "it tried to connect first"
    assert err.value.path == UNREACHABLE, "a client's errors name its connect string, whoever found them"


@pytest.mark.parametrize("hosts", ["", "127.0.0.1:2181/", "127.0.0.1:notaport", "127.0.0.1:2181/bad//chroot"])
def test_bad_connect_strings_are_rejected_before_connecting(hosts):
    started = time.monotonic()
    with pytest.raises(zklock.InvalidArgumentError):
        zklock.Client(hosts, connect_timeout=30)
    assert time.monotonic() - started < 1.0


def test_wrong_types_raise_type_error():
    with pytest.raises(TypeError):
        zklock.Client(2181)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        zklock.Client(UNREACHABLE, session_timeout="10")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["no-slash", "/", "/trailing/", "/double//slash", "/zookeeper/quota", "/nul\0"])
def test_bad_lock_paths_name_the_path(client, bad):
    with pytest.raises(zklock.InvalidArgumentError) as raised:
        client.lock(bad)
    assert bad.rstrip("\0") in str(raised.value)


def test_rlock_argument_rules(client, kazoo, path):
    lock = client.lock(path)
    with pytest.raises(zklock.InvalidArgumentError, match=f"{path}.*non-blocking"):
        lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError, match=path):
        lock.acquire(timeout=-2)
    with pytest.raises(ValueError, match=path):
        lock.acquire(timeout=float("nan"))
    with pytest.raises(TypeError):
        lock.acquire(timeout="1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=path):
        with lock.hold(timeout=-5):
            pass
    assert not kazoo.exists(path), "nothing was sent"
    assert lock.acquire(True, 10) and lock.acquire(blocking=False)  # positional, as RLock allows
    lock.release()
    lock.release()
    assert children(kazoo, path) == []


def test_callbacks_must_be_callable(client, path):
    with pytest.raises(zklock.InvalidArgumentError, match=path):
        client.lock(path).on_lost("not callable")  # type: ignore[arg-type]
    with pytest.raises(zklock.InvalidArgumentError):
        client.on_state_change(None)  # type: ignore[arg-type]


def test_asyncio_api_outside_a_task_says_so(client, path):
    # At the call: acquire_async acquires for the task that calls it.
    with pytest.raises(RuntimeError, match="asyncio task"):
        client.lock(path).acquire_async()


def test_a_closed_client_refuses_new_work(zk_connect, path):
    client = zklock.Client(zk_connect)
    lock = client.lock(path)
    client.close()
    with pytest.raises(zklock.ClosedError, match=path):
        lock.acquire()
    with pytest.raises(zklock.ClosedError, match=path):
        lock.holder()


def test_input_over_zklocks_limits_is_refused_naming_the_limit(client, kazoo, path):
    """The limits that keep one client from harming a shared server (a 300,000-deep path once
    had the client create parents until the server died): refused at once, before any traffic."""
    started = time.monotonic()
    with pytest.raises(zklock.InvalidArgumentError, match="300000 segments deep, over zklock's limit of 64 segments"):
        client.lock("/a" * 300_000)
    assert time.monotonic() - started < 1.0
    over = path + "/a" * 63  # path is 2 deep
    with pytest.raises(zklock.InvalidArgumentError, match="65 segments deep"):
        client.lock(over)
    with pytest.raises(zklock.InvalidArgumentError, match="65 segments deep"):
        client.semaphore(over, 2)
    with pytest.raises(zklock.InvalidArgumentError, match="identifier of 1025 bytes, over zklock's limit of 1024"):
        client.lock(path, identifier="i" * 1025)
    with pytest.raises(zklock.InvalidArgumentError, match="owner label of 1025 bytes, over zklock's limit"):
        client.semaphore(path, 2, label="l" * 1025)
    # An asyncio task's owner label is "task:<name>": 5 + 1,020 bytes.
    with pytest.raises(zklock.InvalidArgumentError, match="owner label of 1025 bytes, over zklock's limit"):
        _acquire_in_task(client.lock(path), "l" * 1020)
    with pytest.raises(zklock.InvalidArgumentError, match="1025 leases asked for at once, over zklock's limit"):
        client.semaphore(path, 2**31 - 1).acquire(1025)
    assert kazoo.exists(path) is None, "nothing was made"
    # At the limit: taken.
    at = path + "/a" * 62
    with client.lock(at):
        assert len(children(kazoo, at)) == 1


def _acquire_in_task(lock: zklock.Lock, name: str) -> None:
    async def main() -> None:
        await lock.acquire_async()

    async def named() -> None:
        await asyncio.create_task(main(), name=name)

    asyncio.run(named())


def test_a_lone_surrogate_is_an_invalid_argument(client, path):
    """Python's str may hold a lone surrogate (os.fsdecode makes them of undecodable bytes); no
    ZooKeeper node can: a clear InvalidArgumentError (a ValueError), not a UnicodeEncodeError."""
    for make in (
        lambda: client.lock(path + "/bad\udc80"),
        lambda: client.read_write_lock(path + "/bad\udc80"),
        lambda: client.semaphore(path + "/bad\udc80", 2),
        lambda: client.semaphore(path, 2, label="bad\udc80"),
        lambda: client.lock(path, identifier="bad\ud800"),
        lambda: zklock._native.Owner("bad\udc80"),
    ):
        with pytest.raises(zklock.InvalidArgumentError, match=r"bad\\ud(c80|800): the text has a lone surrogate \(U\+D(C80|800)\) at index \d+") as raised:
            make()
        assert not isinstance(raised.value, UnicodeError)
