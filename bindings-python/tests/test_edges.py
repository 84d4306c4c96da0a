"""The core's hardening, seen from Python: requests over the packet limit, connect errors that say
why, a missing chroot, callbacks that block, and the order of one client's acquisitions."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid

import pytest
from conftest import children, wait_children, wait_until

import zklock


def test_an_oversized_path_or_identifier_is_refused_up_front(client, kazoo, path):
    started = time.monotonic()
    with pytest.raises(zklock.InvalidArgumentError, match="jute.maxbuffer") as err:
        client.lock("/zklock-py-tests/" + "p" * 1_100_000)
    assert "lock path of 1100017 bytes" in str(err.value)
    with pytest.raises(zklock.InvalidArgumentError, match="identifier of 2000000 bytes"):
        client.lock(path, identifier="i" * 2_000_000)
    assert time.monotonic() - started < 1.0
    assert children(kazoo, path) == []
    # The client is unharmed.
    with client.lock(path):
        pass


def test_the_packet_limit_follows_the_servers(zk_connect, path):
    with zklock.Client(zk_connect, jute_maxbuffer=64 * 1024) as small:
        with pytest.raises(zklock.InvalidArgumentError, match="packet limit of 65536 bytes"):
            small.lock(f"{path}/{'p' * 100_000}")
    for bad in (0, -1, 10, 2**32):
        with pytest.raises(zklock.InvalidArgumentError, match="jute_maxbuffer"):
            zklock.Client(zk_connect, jute_maxbuffer=bad)


def test_a_packet_limit_too_small_for_a_lock_is_refused_in_the_core_s_words():
    # The core's words, as every language reports them (bindings-node/test/edges.test.mjs says
    # the same). Nothing listens on localhost:1: reaching the network would end in a timeout.
    started = time.monotonic()
    with pytest.raises(zklock.InvalidArgumentError) as refused:
        zklock.Client("localhost:1", jute_maxbuffer=1023)
    assert time.monotonic() - started < 2, "refused before any traffic"
    assert str(refused.value) == (
        "invalid argument on localhost:1: jute_maxbuffer of 1023 bytes is too small: "
        "a lock request needs at least 1024 bytes"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connect_errors_name_the_cause_and_carry_the_connect_string():
    refused = f"127.0.0.1:{_free_port()}"
    with pytest.raises(zklock.LockTimeout, match="connection refused") as err:
        zklock.Client(refused, connect_timeout=2)
    assert err.value.path == refused
    unknown = "no-such-host.invalid:2181"
    with pytest.raises(zklock.LockTimeout, match="cannot resolve") as err:
        zklock.Client(unknown, connect_timeout=2)
    assert err.value.path == unknown


def test_a_missing_chroot_says_so(zk_connect):
    connect = f"{zk_connect}/zklock-py-no-such-chroot-{uuid.uuid4().hex}"
    with pytest.raises(zklock.ZooKeeperError, match="does not exist") as err:
        zklock.Client(connect)
    assert err.value.code == -101
    assert err.value.path == connect


def test_session_timeouts_past_the_wire_range_are_refused():
    with pytest.raises(zklock.InvalidArgumentError, match="session_timeout|session timeout"):
        zklock.Client("127.0.0.1:1", session_timeout=2_147_484)


def test_a_blocking_callback_stalls_no_session(zk_connect, kazoo, path):
    """Two lost-lock callbacks that block for seconds must not delay another client's work."""
    release = threading.Event()
    called = []
    with zklock.Client(zk_connect) as victim, zklock.Client(zk_connect) as bystander:
        locks = [victim.lock(f"{path}-{i}") for i in range(2)]
        for lock in locks:
            lock.acquire()

            def blocked(reason, lock=lock):
                called.append(lock.path)
                release.wait(30)

            lock.on_lost(blocked)
        for i in range(2):
            for name in children(kazoo, f"{path}-{i}"):
                kazoo.delete(f"{path}-{i}/{name}")
        wait_until(lambda: len(called) >= 1, "a lost-lock callback runs")
        try:
            other = bystander.lock(path)
            started = time.monotonic()
            assert other.acquire(timeout=5)
            other.release()
            assert time.monotonic() - started < 2, "the bystander waited on a blocked callback"
            assert bystander.state == "connected"
            # One callback thread per client, in order: the second waits for the first.
            assert len(called) == 1
        finally:
            release.set()
        # Callbacks run one at a time, in order: the second after the first returned.
        wait_until(lambda: len(called) == 2, "the second callback runs after the first returns")


def test_one_clients_acquisitions_reach_the_server_in_call_order(client, kazoo, path):
    lock = client.lock(path)

    async def main() -> None:
        for _ in range(10):
            order: list[int] = []

            async def contender(i: int) -> None:
                async with lock:
                    order.append(i)

            # Created in order 0..7 with no waiting between: the tasks' first steps run in order
            # of creation, and their creates must reach the server in that order too.
            await asyncio.gather(*(contender(i) for i in range(8)))
            assert order == list(range(8))

    asyncio.run(main())
    wait_children(kazoo, path, 0)


def test_a_request_the_server_keeps_refusing_ends_in_an_error(zk_connect, kazoo, path):
    # Told the servers take 16 MB, the client sends a 2 MB path; the server (1 MB) drops the
    # connection each time: an error that names the limit, not a reconnect storm.
    with zklock.Client(zk_connect, jute_maxbuffer=16 << 20) as client:
        lock = client.lock(path + "/" + "p" * (2 << 20))
        started = time.monotonic()
        with pytest.raises(zklock.ConnectionLossError, match="jute.maxbuffer"):
            lock.acquire(timeout=120)
        assert time.monotonic() - started < 100
        with client.lock(path):  # the client goes on working
            pass


def test_none_and_minus_one_both_wait_forever_everywhere(client, kazoo, path):
    """threading.RLock spells "forever" -1 and asyncio None: every call takes both, and waits."""
    lock = client.lock(path)
    for forever in (None, -1):
        assert lock.acquire(timeout=forever) is True
        lock.release()
        assert lock.acquire(True, forever) is True
        lock.release()
        with lock.hold(timeout=forever) as token:
            assert isinstance(token, int)

        async def main() -> None:
            assert await lock.acquire_async(timeout=forever) is True
            await lock.release_async()
            async with lock.hold(timeout=forever) as token:
                assert isinstance(token, int)

        asyncio.run(main())
    with pytest.raises(zklock.InvalidArgumentError, match="non-blocking"):
        lock.acquire(False, 1)
    assert lock.acquire(False, None) is True
    lock.release()
    # And forever waits: a holder in another session keeps the None-waiter out until it lets go.
    kazoo_lock = kazoo.Lock(path)
    assert kazoo_lock.acquire(timeout=10)
    acquired = threading.Event()

    def waiter() -> None:
        if lock.acquire(timeout=None):
            acquired.set()
            lock.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_children(kazoo, path, 2)
    assert not acquired.is_set()
    kazoo_lock.release()
    thread.join(timeout=30)
    assert acquired.is_set()


def test_a_body_error_is_not_lost_to_a_lost_lock(client, kazoo, path):
    """If the hold was lost and the body raised too, the body's exception propagates, with the
    release's LockLostError attached as a note, in `with lock`, `with lock.hold()`, `async with
    lock` and `async with lock.hold()`."""
    lock = client.lock(path)

    def lose_it() -> None:
        for name in children(kazoo, path):
            kazoo.delete(f"{path}/{name}")
        wait_until(lambda: lock.state == "lost", "the hold to be lost")

    def check(err: pytest.ExceptionInfo[ValueError]) -> None:
        notes = getattr(err.value, "__notes__", [])
        assert any("LockLostError" in note for note in notes), notes
        assert isinstance(err.value.__zklock_release_error__, zklock.LockLostError)
        assert err.value.__zklock_release_error__.lost_reason == "node_deleted"

    with pytest.raises(ValueError, match="the body's") as err:
        with lock:
            lose_it()
            raise ValueError("the body's")
    check(err)
    with pytest.raises(ValueError, match="the body's") as err:
        with lock.hold():
            lose_it()
            raise ValueError("the body's")
    check(err)

    async def main() -> None:
        with pytest.raises(ValueError, match="the body's") as err:
            async with lock:
                lose_it()
                raise ValueError("the body's")
        check(err)
        with pytest.raises(ValueError, match="the body's") as err:
            async with lock.hold():
                lose_it()
                raise ValueError("the body's")
        check(err)

    asyncio.run(main())
    # With no error in the body, the loss is the error.
    with pytest.raises(zklock.LockLostError):
        with lock:
            lose_it()
    assert children(kazoo, path) == []


def test_a_sync_hold_inside_a_coroutine_gives_the_threads_token(client, kazoo, path):
    """A sync `with lock.hold()` in a coroutine holds for the thread (as `release()` would
    release): it gives that hold's token, while the views there answer for the task."""
    lock = client.lock(path)

    async def main() -> None:
        with lock.hold() as token:
            assert isinstance(token, int)
            assert token == lock._fencing_token_of(zklock._native.Owner.current_thread())
            assert not lock.is_held, "the views inside a coroutine are the task's"

    asyncio.run(main())
    assert children(kazoo, path) == []


def test_callbacks_let_go_on_runtime_threads_are_freed(client, path):
    """The binding runs pyo3 without its reference pool (which cost every call a mutex): a
    callable that a runtime thread lets go (here, an on_lost watcher ending at a release) must
    still be freed, not leaked."""
    import gc
    import weakref

    class Callback:
        def __call__(self, reason: str) -> None:
            pass

    on_lost = Callback()
    ref = weakref.ref(on_lost)
    lock = client.lock(path)
    lock.on_lost(on_lost)
    lock.acquire()  # its watcher holds on_lost until the release, on a runtime thread
    lock.release()
    del on_lost, lock

    def freed() -> bool:
        gc.collect()
        return ref() is None

    wait_until(freed, "the on_lost callable to be freed")


def test_handles_for_one_path_share_holds_and_a_collected_handle_keeps_its_hold(client, kazoo, path):
    """`client.lock(p).acquire()` and then the handle collected: the lock stays held by this
    thread (as a kazoo Lock's would), and a new `client.lock(p)` releases it."""
    import gc

    client.lock(path).acquire()
    gc.collect()
    wait_children(kazoo, path, 1)
    again = client.lock(path)
    assert again.is_held
    assert again.acquire(timeout=0)  # a re-entry, not a second contender
    assert len(children(kazoo, path)) == 1
    again.release()
    again.release()
    wait_children(kazoo, path, 0)
