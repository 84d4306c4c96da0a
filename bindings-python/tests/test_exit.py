"""Interpreter exit and the lifetime of what the binding holds (issue 48, items 1, 3, 4 and 5;
issue 45, item 5): no zklock thread inside the interpreter (or waiting to enter it) once it
finalizes, reference cycles through callbacks collected, unregistrations that keep nothing, and
a client collected unclosed warned of and closed.

The exit tests run short processes (exit_child.py) many times per trigger with every CPython the
suite has (ZKLOCK_OTHER_PYTHONS), against the installed package: with `scripts/test-python
--wheels` that is the shipped, zig-linked wheel, the build in which the crash showed. Runs per
trigger and CPython: ZKLOCK_PY_EXIT_RUNS (default 40, 280 runs per CPython, about 30-45 s each on 2 busy cores;
before the fix a callback busy at exit crashed every run, the state-callback trigger about one
run in fifteen, so each CPython's run alone would have caught both)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import uuid
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import zklock
from conftest import wait_children

CHILD = Path(__file__).with_name("exit_child.py")
RUNS = int(os.environ.get("ZKLOCK_PY_EXIT_RUNS", "40"))
PYTHONS = [sys.executable] + os.environ.get("ZKLOCK_OTHER_PYTHONS", "").split()
TRIGGERS = ["state", "state-busy", "lost-busy", "lost", "leases", "multi", "async-thread"]


def run_child(python: str, trigger: str, zk_connect: str, path: str) -> subprocess.CompletedProcess[str]:
    # From / so that `import zklock` is the installed package.
    return subprocess.run(
        [python, str(CHILD), trigger, zk_connect, path], capture_output=True, text=True, timeout=60, cwd="/"
    )


@pytest.mark.timeout(600)
@pytest.mark.parametrize("python", PYTHONS, ids=lambda python: Path(python).parent.parent.name)
def test_no_crash_at_exit_with_zklock_threads_in_python(zk_connect: str, python: str) -> None:
    """Each trigger RUNS times: a callback running (or busy for good) on zklock's callback thread
    at exit, one just dispatched, an event-loop thread inside `async with lock`. Before the fix
    the busy callbacks crashed every run (SIGSEGV in the unwinding of a runtime thread that
    CPython ended with pthread_exit), the others some runs."""
    jobs = [trigger for trigger in TRIGGERS for _ in range(RUNS)]

    def one(trigger: str) -> tuple[str, int, str]:
        done = run_child(python, trigger, zk_connect, f"/zklock-py-tests/exit-{uuid.uuid4().hex[:8]}")
        return trigger, done.returncode, done.stderr[-500:]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(one, jobs))
    failed = [(trigger, rc, err) for trigger, rc, err in results if rc != 0]
    by_trigger = {trigger: sum(1 for t, _, _ in failed if t == trigger) for trigger in TRIGGERS}
    assert not failed, f"runs that did not exit 0, of {RUNS} per trigger: {by_trigger}; first: {failed[0]}"


def test_a_client_dropped_while_holding_is_closed_at_exit(zk_connect: str, kazoo: Any, path: str) -> None:
    """A client out of scope while its lock is held, with a state callback registered: its node
    goes at exit (not a session timeout later)."""
    done = subprocess.run(
        [sys.executable, "-W", "ignore::ResourceWarning", str(CHILD), "dropped", zk_connect, path],
        capture_output=True, text=True, timeout=60, cwd="/",
    )
    assert done.returncode == 0, done.stderr
    assert "held" in done.stdout
    # Not `wait_children`'s 20 s: the session timeout (10 s) would pass that too.
    wait_children(kazoo, path, 0, timeout=1.0)


def test_a_client_collected_unclosed_warns_and_is_closed(zk_connect: str, kazoo: Any, path: str) -> None:
    def hold() -> None:
        client = zklock.Client(zk_connect)
        client.lock(path).acquire()
        client.on_state_change(lambda state: None)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hold()
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) and "Client" in str(w.message) for w in caught), caught
    wait_children(kazoo, path, 0, timeout=5.0)


class Job:
    def __init__(self, client: zklock.Client, path: str) -> None:
        self.lock = client.lock(path)
        self.lock.on_lost(self.on_lost)

    def on_lost(self, reason: str) -> None:
        pass

    def on_state(self, state: str) -> None:
        pass


class Service:
    def __init__(self, zk_connect: str) -> None:
        self.client = zklock.Client(zk_connect)
        self.client.on_state_change(self.on_state)

    def on_state(self, state: str) -> None:
        pass


def test_cycles_through_callbacks_are_collected(client: zklock.Client, zk_connect: str, kazoo: Any, path: str) -> None:
    """`self.lock.on_lost(self.on_lost)`, `self.client.on_state_change(self.on_state)`: before,
    the native classes took no part in the GC and every such object leaked (with its session)."""
    jobs = [Job(client, path) for _ in range(200)]
    alive = [weakref.ref(job) for job in jobs]
    del jobs
    gc.collect()
    assert sum(1 for job in alive if job() is not None) == 0
    services = [Service(zk_connect) for _ in range(5)]
    sessions = {service.client.session_id for service in services}
    alive = [weakref.ref(service) for service in services]
    del services
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # collected unclosed: closed then
        gc.collect()
    assert sum(1 for service in alive if service() is not None) == 0
    assert len(sessions) == 5


def test_cycles_through_leases_and_guard_callbacks_are_collected(client: zklock.Client, path: str) -> None:
    class Holder:
        def __init__(self) -> None:
            self.leases = client.semaphore(path + "/s", 2).acquire()
            self.leases.on_lost(self.lost)
            self.guard = client.multi_lock([client.lock(path + "/m")]).acquire()
            self.guard.on_lost(self.lost)

        def lost(self, *_: Any) -> None:
            pass

    holder = Holder()
    alive = weakref.ref(holder)
    del holder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)  # collected unreleased: released then
        gc.collect()
    assert alive() is None


def rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_unregistering_keeps_nothing(client: zklock.Client, path: str) -> None:
    """Rounds of 100,000 subscribe/unsubscribe cycles of each kind: before, each state registration
    kept a task, a subscription and its callback's wrapper (about 470 bytes, so ~47 MB a round).
    The smallest round's growth is judged, so one round's unrelated allocation (a busy CI host's
    allocator arenas) cannot fail it; a leak grows every round."""
    lock = client.lock(path)

    def cycles(count: int) -> None:
        for _ in range(count):
            client.on_state_change(lambda state: None)()
            lock.on_lost(lambda reason: None)()

    cycles(20000)  # warm up allocators
    growths = []
    for _ in range(3):
        before = rss()
        cycles(100000)
        growths.append(rss() - before)
    assert min(growths) < 5_000_000, f"RSS grew {growths} bytes over three rounds of 100,000 cycles"
    # And the one still registered hears "closed" at once.
    heard = threading.Event()
    client.on_state_change(lambda state: heard.set() if state == "closed" else None)
    client.close()
    assert heard.wait(2)


def test_cancelled_callbacks_are_not_called(client: zklock.Client, path: str) -> None:
    calls: list[str] = []
    cancel = client.on_state_change(calls.append)
    cancel()
    cancel()  # idempotent
    lock = client.lock(path)
    lock.acquire()
    cancel_lost = lock.on_lost(calls.append)
    cancel_lost()
    heard = threading.Event()
    client.on_state_change(lambda state: heard.set())
    client.close()
    assert heard.wait(5)
    assert calls == []


def test_asyncio_works_in_exit_handlers_after_zklocks(zk_connect: str, path: str) -> None:
    """An exit handler that runs after zklock's (registered before the import) uses the asyncio
    API: before, its completions were dropped once zklock's exit hook ran, and it hung."""
    done = run_child(sys.executable, "atexit-async", zk_connect, path)
    assert done.returncode == 0, done.stderr
    assert "acquired in atexit" in done.stdout
