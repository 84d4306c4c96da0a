"""Across processes: FIFO order with multiprocessing, fork, Ctrl-C during acquire, clean exit."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import textwrap
import time

import pytest
from conftest import children, identity, python_child, run_child, wait_children, wait_until

import zklock


def _contender(connect: str, path: str, name: str, turns, acquired) -> None:
    with zklock.Client(connect) as client:
        lock = client.lock(path, identifier=name)
        with lock:
            # Counted while holding the lock: the turn is the order of acquisition (the queue's own
            # order of delivery is not, as each process flushes it from a thread of its own).
            with turns.get_lock():
                turns.value += 1
                turn = turns.value
        acquired.put((turn, name))


def test_processes_get_the_lock_in_the_order_they_queued(client, kazoo, path, zk_connect):
    lock = client.lock(path)
    lock.acquire()
    context = multiprocessing.get_context("spawn")
    acquired = context.Queue()
    turns = context.Value("i", 0)
    names = [f"proc-{i}" for i in range(4)]
    processes = []
    try:
        for i, name in enumerate(names):
            process = context.Process(target=_contender, args=(zk_connect, path, name, turns, acquired))
            process.start()
            processes.append(process)
            queue = wait_children(kazoo, path, i + 2)  # queued before the next one starts
            assert identity(kazoo, path, queue[-1])["identifier"] == name
        lock.release()
        order = [name for _, name in sorted(acquired.get(timeout=30) for _ in names)]
        assert order == names
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    assert [p.exitcode for p in processes] == [0] * len(names)
    wait_children(kazoo, path, 0)


FORK_BEFORE_ANY_CLIENT = textwrap.dedent(
    """
    import os, sys, zklock
    try:
        zklock.Client("")  # starts the runtime; rejected before any connection
    except zklock.InvalidArgumentError:
        pass
    pid = os.fork()
    if pid == 0:  # the child: a fresh runtime, its own session
        with zklock.Client(os.environ["ZK_CONNECT"]) as client:
            lock = client.lock(os.environ["LOCK_PATH"])
            assert lock.acquire(timeout=10)
            print("child acquired", lock.holder().identity["pid"] == os.getpid(), flush=True)
            lock.release()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("child status", status, flush=True)
    with zklock.Client(os.environ["ZK_CONNECT"]) as client:  # the parent's runtime still works
        with client.lock(os.environ["LOCK_PATH"]):
            print("parent acquired", flush=True)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="n/a off Linux: fork")
def test_a_child_forked_after_the_runtime_started_starts_a_fresh_one(kazoo, path):
    returncode, out, err = run_child(FORK_BEFORE_ANY_CLIENT, env={"LOCK_PATH": path}, timeout=60)
    assert returncode == 0, err
    assert out.split("\n")[:3] == ["child acquired True", "child status 0", "parent acquired"], (out, err)
    wait_children(kazoo, path, 0)


def _in_forked_child(
    connect: str, child_path: str, parent_client: zklock.Client, parent_lock: zklock.Lock, release, results
) -> None:
    for use in (lambda: parent_client.lock(child_path), lambda: parent_lock.acquire()):
        try:
            use()
            results.put("the parent's objects worked in the child")
        except zklock.ClosedError as err:
            results.put(f"closed: {err}")
    # The parent's hold is the parent's: the views answer "not held" rather than raise.
    results.put(("views", parent_lock.is_held, parent_lock.state, parent_lock.fencing_token, parent_lock.locked()))
    # Asked about itself, the inherited client answers: closed (and closing it is a no-op).
    parent_client.close()
    results.put(("inherited", parent_client.closed, parent_client.state))
    try:
        with zklock.Client(connect) as client:  # a client of its own: a fresh runtime and session
            lock = client.lock(child_path)
            acquired = lock.acquire(timeout=10)
            results.put(("held", acquired, lock.is_held and lock.holder().identity["pid"] == os.getpid()))
            release.wait(timeout=30)  # while the parent looks at the node
            lock.release()
            held_after = lock.is_held
        results.put(("released and closed", held_after, client.state))
    except Exception as err:
        results.put(f"the child's own client failed: {err!r}")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="n/a off Linux: the fork start method")
def test_a_forked_child_cannot_use_inherited_clients_but_makes_its_own_and_the_parent_is_unharmed(
    client, kazoo, path, zk_connect
):
    lock = client.lock(path)
    assert lock.acquire()  # the parent has a session and a hold when it forks
    child_path = f"{path}-child"
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    release = context.Event()
    child = context.Process(target=_in_forked_child, args=(zk_connect, child_path, client, lock, release, results))
    child.start()
    try:
        for _ in range(2):
            refused = results.get(timeout=30)
            assert isinstance(refused, str) and refused.startswith("closed: ") and "fork" in refused, refused
        assert results.get(timeout=30) == ("views", False, None, None, False)
        assert results.get(timeout=30) == ("inherited", True, "closed")
        assert results.get(timeout=30) == ("held", True, True)
        held = children(kazoo, child_path)
        assert len(held) == 1 and identity(kazoo, child_path, held[0])["pid"] == child.pid
        release.set()
        assert results.get(timeout=30) == ("released and closed", False, "closed")
    finally:
        release.set()
        child.join(timeout=30)
        if child.is_alive():
            child.kill()
    assert child.exitcode == 0
    wait_children(kazoo, child_path, 0)
    # The parent is unaffected: its hold, its session and its runtime still work.
    assert lock.is_held and lock.state == "held"
    assert len(children(kazoo, path)) == 1
    lock.release()
    wait_children(kazoo, path, 0)
    assert lock.acquire(timeout=10)
    lock.release()


BLOCKED_IN_ACQUIRE = textwrap.dedent(
    """
    import os, sys, time, zklock
    client = zklock.Client(os.environ["ZK_CONNECT"])
    lock = client.lock(os.environ["LOCK_PATH"])
    print("acquiring", flush=True)
    try:
        lock.acquire()
        print("acquired", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_during_acquire_raises_keyboard_interrupt_and_removes_the_node(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()
    child = python_child(BLOCKED_IN_ACQUIRE, env={"LOCK_PATH": path})
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "acquiring"
        wait_children(kazoo, path, 2)  # the child waits in the queue
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline().strip() == "interrupted"
        assert time.monotonic() - sent < 1.0, "KeyboardInterrupt was not prompt"
        assert child.wait(timeout=10) == 3
        # Its attempt's node is removed (in the background, as the acquisition is dropped),
        # long before its session could time out.
        wait_children(kazoo, path, 1, timeout=2)
        assert lock.is_held
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    lock.release()
    wait_children(kazoo, path, 0)


EXIT_WITH_EVERYTHING_OPEN = textwrap.dedent(
    """
    import asyncio, os, threading, zklock
    client = zklock.Client(os.environ["ZK_CONNECT"])
    lock = client.lock(os.environ["LOCK_PATH"])
    lock.acquire()
    lock.on_lost(lambda reason: print("lost", reason, flush=True))
    client.on_state_change(lambda state: None)
    other = zklock.Client(os.environ["ZK_CONNECT"]).lock(os.environ["LOCK_PATH"])
    waiter = threading.Thread(target=other.acquire, daemon=True)  # blocked in acquire at exit
    waiter.start()
    while len(lock.contenders()) < 2:
        pass
    print("exiting", flush=True)
    """
)


def test_the_interpreter_exits_cleanly_with_clients_locks_and_waiters_open(kazoo, path):
    returncode, out, err = run_child(EXIT_WITH_EVERYTHING_OPEN, env={"LOCK_PATH": path}, timeout=20)
    assert returncode == 0, err
    assert "exiting" in out
    assert "panic" not in err.lower() and "Traceback" not in err, err
    # The exit hook closed the sessions: their nodes go at once, not after the session timeout.
    wait_children(kazoo, path, 0, timeout=3)


def test_a_killed_holder_leaves_nothing_behind_once_its_session_expires(kazoo, path):
    code = BLOCKED_IN_ACQUIRE.replace(
        'zklock.Client(os.environ["ZK_CONNECT"])', 'zklock.Client(os.environ["ZK_CONNECT"], session_timeout=2)'
    ).replace('print("acquired", flush=True)', 'print("acquired", flush=True); sys.stdin.read()')
    child = python_child(code, env={"LOCK_PATH": path})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "acquiring"
        assert child.stdout.readline().strip() == "acquired"
        wait_children(kazoo, path, 1)
        os.kill(child.pid, signal.SIGKILL)  # no exit hook, no close: only the session timeout
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    wait_until(lambda: not children(kazoo, path), "the killed holder's node to expire", timeout=15)
