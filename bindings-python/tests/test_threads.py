"""threading.RLock semantics, owner = the calling thread, checked against the nodes kazoo sees."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from conftest import NODE_NAME, Proxy, children, identity, wait_children, wait_until

import zklock


def test_acquire_creates_one_curator_named_node_with_the_thread_as_owner(client, kazoo, path):
    lock = client.lock(path, identifier="report-job")
    assert lock.acquire() is True
    try:
        [name] = wait_children(kazoo, path, 1)
        assert NODE_NAME.match(name), name
        node = identity(kazoo, path, name)
        assert node["owner"] == f"thread:{threading.current_thread().name}"
        assert node["lang"] == "python"
        assert node["identifier"] == "report-job"
        assert node["pid"] > 0
        assert lock.is_held and lock.state == "held"
        assert lock.sequence == int(name[-10:])
        assert lock.fencing_token == kazoo.get(f"{path}/{name}")[1].czxid
        holder = lock.holder()
        assert holder is not None and holder.node == name and holder.identity == node
    finally:
        lock.release()
    wait_children(kazoo, path, 0)
    assert not lock.is_held and lock.state is None and lock.fencing_token is None


def test_reentry_costs_no_network_even_with_the_connection_stalled(zk_connect, kazoo, path, proxy: Proxy):
    with zklock.Client(proxy.address, session_timeout=10) as client:
        lock = client.lock(path)
        assert lock.acquire()
        proxy.command("stall")  # nothing reaches the server any more
        started = time.monotonic()
        for _ in range(1000):
            assert lock.acquire(timeout=5)
        for _ in range(1000):
            lock.release()
        assert time.monotonic() - started < 1.0, "re-entry went to the network"
        proxy.command("pass")
        assert lock.is_held
        assert len(children(kazoo, path)) == 1, "re-entry made no node of its own"
        lock.release()
        wait_children(kazoo, path, 0)


def test_two_threads_sharing_one_lock_exclude_each_other(client, kazoo, path):
    lock = client.lock(path)
    inside = 0
    waiting = 0
    overlaps = 0
    contended = 0  # entries made while another thread waited: the threads did contend
    counter_lock = threading.Lock()
    start = threading.Barrier(3)

    def worker() -> None:
        nonlocal inside, waiting, overlaps, contended
        start.wait(timeout=30)
        for _ in range(15):
            with counter_lock:
                waiting += 1
            with lock:
                with counter_lock:
                    waiting -= 1
                    inside += 1
                    overlaps += inside > 1
                    contended += waiting > 0
                time.sleep(0.005)  # a window in which an overlap would be seen
                with counter_lock:
                    inside -= 1

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
        assert not t.is_alive()
    assert overlaps == 0
    assert contended > 0, "the threads never waited for each other"
    wait_children(kazoo, path, 0)


def test_threads_get_the_lock_in_the_order_they_queued(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()
    order: list[str] = []

    def waiter(name: str) -> None:
        with lock:
            order.append(name)

    threads = []
    for i, name in enumerate(["first", "second", "third", "fourth"]):
        t = threading.Thread(target=waiter, args=(name,), name=name)
        t.start()
        threads.append(t)
        wait_children(kazoo, path, i + 2)  # queued before the next one starts
    queued = [identity(kazoo, path, n)["owner"] for n in children(kazoo, path)]
    assert queued == ["thread:MainThread", "thread:first", "thread:second", "thread:third", "thread:fourth"]
    lock.release()
    for t in threads:
        t.join(timeout=30)
    assert order == ["first", "second", "third", "fourth"]


def test_release_from_a_thread_that_does_not_hold_raises_not_owner_error(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()
    raised: list[BaseException] = []

    def intruder() -> None:
        try:
            lock.release()
        except BaseException as err:  # noqa: B036 - recorded for the assertion below
            raised.append(err)

    t = threading.Thread(target=intruder)
    t.start()
    t.join(timeout=10)
    [err] = raised
    assert isinstance(err, zklock.NotOwnerError) and isinstance(err, RuntimeError)
    assert path in str(err) and err.path == path
    assert lock.is_held and len(children(kazoo, path)) == 1, "the holder's node is untouched"
    lock.release()
    with pytest.raises(zklock.NotOwnerError, match=path):
        lock.release()
    wait_children(kazoo, path, 0)


def test_non_blocking_and_timed_attempts_fail_cleanly_when_held(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()
    results: dict[str, Any] = {}

    def contender() -> None:
        results["try"] = lock.acquire(blocking=False)
        results["zero"] = lock.acquire(timeout=0)
        started = time.monotonic()
        results["timed"] = lock.acquire(timeout=0.3)
        results["waited"] = time.monotonic() - started
        try:
            with lock.hold(timeout=0.2):
                results["hold"] = "entered"
        except zklock.LockTimeout as err:
            results["hold"] = err

    t = threading.Thread(target=contender)
    t.start()
    t.join(timeout=30)
    assert results["try"] is False and results["zero"] is False and results["timed"] is False
    assert 0.3 <= results["waited"] < 3
    assert isinstance(results["hold"], TimeoutError) and path in str(results["hold"])
    # In core's words, as every language reports it.
    assert str(results["hold"]) == f"timed out on {path}: not acquired within 200ms"
    # Every failed attempt removed its node before returning: only the holder's is left.
    assert len(children(kazoo, path)) == 1
    lock.release()
    wait_children(kazoo, path, 0)


def test_hold_gives_the_fencing_token_and_releases(client, kazoo, path):
    lock = client.lock(path)
    with lock.hold(timeout=5) as token:
        [name] = children(kazoo, path)
        assert token == kazoo.get(f"{path}/{name}")[1].czxid
    assert not lock.is_held
    wait_children(kazoo, path, 0)
    with lock.hold(timeout=5) as second:
        assert second is not None and token is not None and second > token, "fencing tokens rise"


def test_blocked_acquire_releases_the_gil(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()
    ticks = 0

    def blocked() -> None:
        lock.acquire(timeout=1.0)

    t = threading.Thread(target=blocked)
    t.start()
    wait_children(kazoo, path, 2)
    while t.is_alive():
        ticks += 1  # pure Python: only runs if the blocked thread let go of the GIL
    t.join()
    assert ticks > 10_000
    lock.release()


def test_two_lock_objects_on_one_path_are_separate_contenders(zk_connect, kazoo, path):
    with zklock.Client(zk_connect) as a, zklock.Client(zk_connect) as b:
        first, second = a.lock(path), b.lock(path)
        assert first.acquire()
        assert second.acquire(blocking=False) is False
        first.release()
        assert second.acquire(timeout=10)
        assert wait_until(lambda: (second.holder() or None), "a holder").session_id == b.session_id
        second.release()
    wait_children(kazoo, path, 0)


def test_closing_the_client_deletes_its_nodes_and_closes_its_locks(zk_connect, kazoo, path):
    client = zklock.Client(zk_connect)
    lock = client.lock(path)
    lock.acquire()
    wait_children(kazoo, path, 1)
    client.close()
    assert client.state == "closed" and client.closed
    wait_children(kazoo, path, 0, timeout=5)
    assert lock.state == "lost"
    with pytest.raises(zklock.LockLostError, match=path):
        lock.release()
    with pytest.raises(zklock.ClosedError, match=path):
        lock.acquire()
    client.close()  # idempotent


def test_locked_says_whether_any_owner_holds_through_this_lock_without_traffic(client, path):
    lock = client.lock(path)
    assert not lock.locked()
    held, done = threading.Event(), threading.Event()

    def holder() -> None:
        with lock:
            held.set()
            done.wait(timeout=30)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(timeout=30)
    assert lock.locked() and not lock.is_held, "another thread holds: locked, but not by the caller"
    done.set()
    thread.join(timeout=30)
    assert not lock.locked()
