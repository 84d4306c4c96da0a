"""Session loss: a real expiry through zklock-proxy fires on_lost, and callbacks never crash."""

from __future__ import annotations

import inspect
import sys
import threading

import pytest
from conftest import Proxy, children, wait_children, wait_until

import zklock


def test_omitted_timeouts_are_the_cores_defaults(zk_connect):
    """The client's option defaults are the core's, the same in every language: left out (or
    None), the session timeout asked of the server is the core's, which the test server grants."""
    assert (zklock.DEFAULT_SESSION_TIMEOUT, zklock.DEFAULT_CONNECT_TIMEOUT) == (10.0, 10.0)
    for name in ("session_timeout", "connect_timeout"):
        # No number of the binding's own: left out, the core fills it in.
        assert inspect.signature(zklock.Client).parameters[name].default is None, name
    with zklock.Client(zk_connect) as client:
        assert client.session_timeout == zklock.DEFAULT_SESSION_TIMEOUT
    with zklock.Client(zk_connect, session_timeout=None, connect_timeout=None) as client:
        assert client.session_timeout == zklock.DEFAULT_SESSION_TIMEOUT
    with zklock.Client(zk_connect, session_timeout=12.5) as client:
        assert client.session_timeout == 12.5, "a given timeout is asked instead"


def test_session_expiry_fires_on_lost_and_the_hold_is_lost(kazoo, path, proxy: Proxy):
    client = zklock.Client(proxy.address, session_timeout=2.0)
    try:
        states: list[str] = []
        client.on_state_change(states.append)
        lock = client.lock(path)
        reasons: list[str] = []
        lost = threading.Event()

        def on_lost(reason: str) -> None:
            assert threading.current_thread() is not threading.main_thread()  # a runtime thread
            reasons.append(reason)
            lost.set()

        lock.on_lost(on_lost)
        assert lock.acquire()
        assert lock.state == "held"
        [node] = children(kazoo, path)

        proxy.command("stall")  # the client hears nothing; the server expires the session
        assert lost.wait(timeout=15), "on_lost did not fire"
        assert reasons[0] in ("disconnected_too_long", "session_expired")
        assert lock.state == "lost" and not lock.is_held
        wait_until(lambda: node not in children(kazoo, path), "the server to expire the session")
        with pytest.raises(zklock.LockLostError, match=path):
            lock.release()  # nothing deleted: the node is gone with the session
        assert lock.state is None

        proxy.command("pass")  # the next acquisition starts a new session
        assert lock.acquire(timeout=10)
        assert lock.state == "held"
        # Delivered in order, on a runtime thread: wait for them to arrive.
        wait_until(lambda: states[-1:] == ["connected"] and "expired" in states, "the state changes")
        assert states.index("disconnected") < states.index("expired") < len(states) - 1
        lock.release()
    finally:
        client.close()
    wait_children(kazoo, path, 0)


def test_a_stalled_connection_suspends_the_hold_until_it_comes_back(kazoo, path, proxy: Proxy):
    with zklock.Client(proxy.address, session_timeout=10.0) as client:
        lock = client.lock(path)
        lost: list[str] = []
        lock.on_lost(lost.append)
        lock.acquire()
        proxy.command("cut")  # connections reset; the session lives on for its timeout
        wait_until(lambda: lock.state == "suspended", "the hold to be suspended")
        assert not lock.is_held, "suspended: the node may still be ours, but acting on it is not safe"
        assert not lock.locked()
        proxy.command("pass")
        wait_until(lambda: lock.state == "held", "the hold to be held again", timeout=10)
        assert lost == []
        lock.release()
    wait_children(kazoo, path, 0)


def test_exceptions_in_callbacks_go_to_the_unraisable_hook(zk_connect, path, monkeypatch):
    reported: list[BaseException] = []
    seen = threading.Event()

    def hook(unraisable) -> None:  # type: ignore[no-untyped-def]
        reported.append(unraisable.exc_value)
        seen.set()

    monkeypatch.setattr(sys, "unraisablehook", hook)
    client = zklock.Client(zk_connect)
    lock = client.lock(path)

    def broken(_: str) -> None:
        raise ValueError("callback bug")

    client.on_state_change(broken)
    lock.on_lost(broken)
    lock.acquire()
    client.close()  # "closed" for the state callback, and the hold is lost
    assert seen.wait(timeout=10)
    wait_until(lambda: len(reported) >= 2, "both callbacks to be reported", timeout=10)
    assert all(isinstance(err, ValueError) and str(err) == "callback bug" for err in reported)


def test_on_lost_registered_while_holding_covers_the_current_hold(zk_connect, kazoo, path):
    client = zklock.Client(zk_connect)
    lock = client.lock(path)
    lock.acquire()
    lost = threading.Event()
    reasons: list[str] = []
    lock.on_lost(lambda reason: (reasons.append(reason), lost.set()))
    client.close()
    assert lost.wait(timeout=10)
    assert reasons == ["closed"]


def test_on_lost_covers_a_hold_another_thread_took_before_it_was_registered(client, kazoo, path):
    """on_lost covers every hold of the lock, whoever took it and when (core's rule, the same in
    every language): registered, on another Lock of the path, while another thread holds, it is
    called with the reason when that hold is lost, once whatever its levels."""
    lock = client.lock(path)
    taken, lost_seen = threading.Event(), threading.Event()
    releases: list[object] = []

    def holder() -> None:
        lock.acquire()
        lock.acquire()  # two levels, one hold
        taken.set()
        lost_seen.wait(30)
        for _ in range(2):
            try:
                lock.release()
                releases.append("released")
            except zklock.LockLostError as err:
                releases.append(err.lost_reason)

    thread = threading.Thread(target=holder)
    thread.start()
    assert taken.wait(10)
    reports: list[str] = []
    reported = threading.Semaphore(0)
    listening = client.lock(path)  # another Lock of the path: the same lock
    listening.on_lost(lambda reason: (reports.append(reason), reported.release()))
    [node] = children(kazoo, path)
    kazoo.delete(f"{path}/{node}")
    assert reported.acquire(timeout=10), "on_lost was called for the other thread's hold"
    assert reports == ["node_deleted"]
    lost_seen.set()
    thread.join(timeout=10)
    assert releases == ["node_deleted", "node_deleted"], releases

    # Once: a second hold's loss is reported after the first's, and nothing came between.
    assert lock.acquire()
    [node] = children(kazoo, path)
    kazoo.delete(f"{path}/{node}")
    assert reported.acquire(timeout=10)
    assert reports == ["node_deleted", "node_deleted"], "the first hold was reported once"
    with pytest.raises(zklock.LockLostError):
        lock.release()


def test_deleting_the_node_from_outside_loses_the_hold(client, kazoo, path):
    lock = client.lock(path)
    lost = threading.Event()
    reasons: list[str] = []
    lock.on_lost(lambda reason: (reasons.append(reason), lost.set()))
    lock.acquire()
    [node] = children(kazoo, path)
    kazoo.delete(f"{path}/{node}")
    assert lost.wait(timeout=10)
    assert reasons == ["node_deleted"] and lock.state == "lost"
    with pytest.raises(zklock.LockLostError, match="deleted"):
        lock.release()


def test_a_lost_hold_is_not_held_and_its_fencing_token_is_refused(client, kazoo, path):
    lock = client.lock(path)
    lost = threading.Event()
    lock.on_lost(lambda _: lost.set())
    lock.acquire()
    lock.acquire()  # two levels
    [node] = children(kazoo, path)
    kazoo.delete(f"{path}/{node}")
    assert lost.wait(timeout=10)
    assert not lock.is_held and lock.state == "lost", "a lost hold is not held, though it stays ours"
    with pytest.raises(zklock.LockLostError, match="hold is lost") as raised:
        lock.fencing_token
    assert raised.value.path == path
    with pytest.raises(zklock.LockLostError):
        lock.sequence
    # Each level's release says the hold is lost (as core's, in every binding); the last drops it.
    for _ in range(2):
        with pytest.raises(zklock.LockLostError, match="deleted"):
            lock.release()
    assert lock.state is None and lock.fencing_token is None and not lock.is_held


def test_a_waiter_whose_session_expires_queues_again_and_gets_the_lock(kazoo, path, proxy: Proxy):
    """kazoo's and Curator's waiters wait out a session's end; so does zklock's: it loses its node
    and its place, queues again on a new session, and holds once the holder lets go."""
    client = zklock.Client(proxy.address, session_timeout=2.0)
    try:
        holder = kazoo.Lock(path)
        assert holder.acquire(timeout=10)
        lock = client.lock(path)
        outcome: list[object] = []

        def waiter() -> None:
            try:
                outcome.append(lock.acquire(timeout=60))
                lock.release()
            except Exception as err:  # reported by the assertion below
                outcome.append(err)

        thread = threading.Thread(target=waiter)
        thread.start()
        first = [n for n in wait_children(kazoo, path, 2) if n not in children_of_holder(kazoo, path, holder)]
        proxy.command("stall")  # the server expires the waiter's session, and its node
        wait_until(lambda: len(children(kazoo, path)) == 1, "the server to expire the waiter's session")
        assert not outcome, f"the waiter waits on: {outcome}"
        proxy.command("pass")
        again = wait_children(kazoo, path, 2)
        assert not set(first) & set(again), "a new node, on a new session"
        holder.release()
        thread.join(timeout=30)
        assert outcome == [True], outcome
    finally:
        client.close()


def children_of_holder(kazoo, path, holder) -> list[str]:
    return [n for n in children(kazoo, path) if holder.node and holder.node.endswith(n)]


def test_callbacks_can_be_unregistered(zk_connect, kazoo, path):
    """on_state_change and on_lost return a function that unregisters the callback: a change or a
    loss after it reaches the callbacks still registered, not that one."""
    client = zklock.Client(zk_connect)
    kept: list[str] = []
    dropped: list[str] = []
    delivered = threading.Event()
    stop_dropped = client.on_state_change(dropped.append)
    client.on_state_change(lambda state: (kept.append(state), delivered.set()))
    stop_dropped()

    lock = client.lock(path)
    lost_kept: list[str] = []
    lost_dropped: list[str] = []
    lost = threading.Event()
    lock.on_lost(lambda reason: (lost_kept.append(reason), lost.set()))
    unregister = lock.on_lost(lost_dropped.append)
    unregister()
    unregister()  # idempotent
    assert lock.acquire()
    for name in children(kazoo, path):
        kazoo.delete(f"{path}/{name}")
    assert lost.wait(timeout=30), "the registered on_lost callback ran"
    # Callbacks run one at a time in order on the client's callback thread: by now the
    # unregistered one would have run too.
    assert lost_kept == ["node_deleted"] and lost_dropped == [], (lost_kept, lost_dropped)
    with pytest.raises(zklock.LockLostError):
        lock.release()

    client.close()
    assert delivered.wait(timeout=30)
    wait_until(lambda: "closed" in kept, "the closed state to reach the registered callback")
    assert dropped == [], dropped
    with pytest.raises(zklock.InvalidArgumentError, match="callable"):
        client.on_state_change(42)  # type: ignore[arg-type]
