"""Every deadline holds while the server cannot be reached (issue 45 item 2), as
core/tests/deadline.rs asserts in Rust: a client through zklock-proxy, its connection stalled,
then cut. A try (blocking=False, or timeout 0) of a lock, a semaphore and a multi-lock, and a
listing, raise ConnectionLossError within 2 s (never False/None, which say someone else holds, nor
SessionExpiredError); a timed acquire returns False within 100 ms of its deadline; once the
client gave its session up, a try still answers in 2 s (before: the 10 s connect timeout). Once
the server is back, nothing of theirs is left."""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import pytest
from conftest import Proxy, wait_children, wait_until

import zklock

# Short, so the second outage gives the session up soon (the first one's calls, in turn, take
# about 8 s: it may end there too; core/tests/deadline.rs checks the removals on one session).
SESSION = 6.0
# A try's bound (2 s), and room for a loaded machine.
TRY_LIMIT = 3.5
TIMED = 0.3
# The grace of 100 ms, and room for a loaded machine.
OVERSHOOT_LIMIT = 0.6


def timed(call: Callable[[], Any]) -> "tuple[Any, float]":
    start = time.monotonic()
    try:
        result: Any = call()
    except zklock.ZkLockError as err:
        result = err
    return result, time.monotonic() - start


def unreachable(fault: str, lock: Any, busy: Any, semaphore: Any, multi: Any, timed_too: bool) -> None:
    tries: "list[tuple[str, Callable[[], Any]]]" = [
        ("a try of a free lock", lambda: lock.acquire(blocking=False)),
        ("a try of a held lock", lambda: busy.acquire(timeout=0)),
        ("a semaphore's try", lambda: semaphore.acquire(1, timeout=0)),
        ("a multi-lock's try", lambda: multi.acquire(timeout=0)),
        ("a listing", lambda: busy.contenders()),
    ]
    for what, call in tries:
        result, took = timed(call)
        assert isinstance(result, zklock.ConnectionLossError), f"{fault}: {what} gave {result!r} after {took:.2f} s"
        assert "could not be reached" in str(result), f"{fault}: {what}: {result}"
        assert took <= TRY_LIMIT, f"{fault}: {what} took {took:.2f} s"
    if timed_too:
        result, took = timed(lambda: lock.acquire(timeout=TIMED))
        assert result is False, f"{fault}: a timed acquire gave {result!r}"
        assert TIMED <= took <= TIMED + OVERSHOOT_LIMIT, f"{fault}: a timed acquire took {took:.3f} s"


@pytest.mark.parametrize("fault", ["stall", "cut"])
def test_tries_listings_and_timed_calls_keep_their_deadlines_with_the_server_unreachable(
    zk_connect: str, kazoo: Any, path: str, proxy: Proxy, fault: str
) -> None:
    busy_path, semaphore_path, multi_path = f"{path}-busy", f"{path}-semaphore", f"{path}-multi"
    with zklock.Client(zk_connect) as direct, zklock.Client(proxy.address, session_timeout=SESSION) as client:
        held = direct.lock(busy_path)
        assert held.acquire()
        lock, busy = client.lock(path), client.lock(busy_path)
        semaphore = client.semaphore(semaphore_path, 2)
        multi = client.multi_lock([client.lock(multi_path), (client.semaphore(semaphore_path, 2), 1)])
        # Healthy: the paths are made, and a try answers.
        assert lock.acquire(blocking=False)
        lock.release()
        assert busy.acquire(blocking=False) is False
        leases = semaphore.acquire(1, timeout=0)
        assert leases is not None
        leases.release()

        proxy.command(fault)
        unreachable(fault, lock, busy, semaphore, multi, timed_too=True)
        proxy.command("pass")
        wait_children(kazoo, path, 0)
        wait_children(kazoo, multi_path, 0)
        wait_children(kazoo, f"{semaphore_path}/leases", 0)

        # The session given up: a try still answers within its bound.
        proxy.command(fault)
        wait_until(lambda: client.state == "expired", "the client gives its session up")
        unreachable(f"{fault}, session given up", lock, busy, semaphore, multi, timed_too=False)
        proxy.command("pass")
        wait_until(lambda: busy.acquire(blocking=False) is False, "a try answers once the server is back")
        held.release()


def test_the_timeout_table_none_minus_one_and_inf_wait_forever_other_negatives_are_refused(
    client: zklock.Client, path: str
) -> None:
    lock = client.lock(path)
    for forever in (None, -1, math.inf):
        assert lock.acquire(timeout=forever), forever
        lock.release()
    for refused in (-2, -0.5, -math.inf, math.nan):
        with pytest.raises(zklock.InvalidArgumentError, match="None or -1 to wait forever"):
            lock.acquire(timeout=refused)
