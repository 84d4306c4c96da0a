"""The multi-lock: locks, read/write sides and semaphore leases together, in one canonical order
(no deadlock in either argument order), all or nothing, lost if any member is lost."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
import time

import pytest
from conftest import children, wait_children, wait_until

import zklock


def _members(client: zklock.Client, base: str, reverse: bool) -> list[zklock.MultiLockMember]:
    members: list[zklock.MultiLockMember] = [
        client.lock(f"{base}/a"),
        client.read_write_lock(f"{base}/b").write,
        (client.semaphore(f"{base}/c", max_leases=2), 2),
    ]
    return members[::-1] if reverse else members


def _multi_locker(
    connect: str, base: str, reverse: bool, rounds: int, inside, overlaps, waiting, contended, start, done, plant
) -> None:
    try:
        _rounds(connect, base, reverse, rounds, inside, overlaps, waiting, contended, start, done, plant)
    finally:
        if not plant:
            done.set()


def _rounds(connect, base, reverse, rounds, inside, overlaps, waiting, contended, start, done, plant) -> None:
    with zklock.Client(connect) as client:
        multi = client.multi_lock(_members(client, base, reverse))
        start.wait(timeout=30)
        # A planted contender (a test of the check) enters without the multi-lock, round after
        # round until the honest one is done: an overlap the check must see.
        round_ = 0
        while (not done.is_set() and round_ < 10_000) if plant else round_ < rounds:
            round_ += 1
            with inside.get_lock():  # one lock guards the three counters
                waiting.value += 1
            # A deadlock would end in LockTimeout, and the process with a non-zero exit (as it
            # does, both of them, with the members taken in list order instead).
            with contextlib.nullcontext() if plant else multi.acquire(timeout=15) as guard:
                assert plant or guard.state == "held"
                with inside.get_lock():
                    waiting.value -= 1
                    inside.value += 1
                    if inside.value > 1:
                        overlaps.value += 1
                    if waiting.value > 0:
                        contended.value += 1
                time.sleep(0.005)  # a window in which an overlap would be seen
                with inside.get_lock():
                    inside.value -= 1


def _two_processes(zk_connect: str, path: str, plant: bool = False) -> tuple[list, int, int]:
    """Two processes taking the multi-lock in both argument orders, 8 rounds each; with `plant`,
    the second takes no lock at all. Their exit codes, overlaps seen and rounds entered while the
    other waited."""
    context = multiprocessing.get_context("spawn")
    inside, overlaps = context.Value("i", 0), context.Value("i", 0)
    waiting, contended = context.Value("i", 0), context.Value("i", 0)
    start = context.Barrier(2)  # both connected before either takes a round: they contend
    done = context.Event()
    processes = [
        context.Process(
            target=_multi_locker,
            args=(zk_connect, path, reverse, 8, inside, overlaps, waiting, contended, start, done, plant and reverse),
        )
        for reverse in (False, True)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=90)
        if process.is_alive():
            process.kill()
    return [process.exitcode for process in processes], overlaps.value, contended.value


def _check_exclusion(exitcodes: list, overlaps: int, contended: int) -> None:
    """The check of the two processes' run: both done, never both inside, and they contended."""
    assert exitcodes == [0, 0]
    assert overlaps == 0, "both held every member at once"
    assert contended > 0, "the two processes never waited for each other"


def test_both_argument_orders_from_two_processes_never_deadlock(kazoo, path, zk_connect):
    _check_exclusion(*_two_processes(zk_connect, path))
    for name in ("a", "b", "c/leases", "c/locks"):
        assert children(kazoo, f"{path}/{name}") == [], name


def test_the_exclusion_check_fails_a_run_with_a_planted_overlap(kazoo, path, zk_connect):
    """A test of the check above: one of the two processes enters without taking the multi-lock,
    and the check must fail that run for the overlap (not for anything else)."""
    exitcodes, overlaps, contended = _two_processes(zk_connect, path, plant=True)
    assert exitcodes == [0, 0] and overlaps > 0, (exitcodes, overlaps)
    with pytest.raises(AssertionError, match="both held every member at once"):
        _check_exclusion(exitcodes, overlaps, contended)
    for name in ("a", "b", "c/leases", "c/locks"):
        assert children(kazoo, f"{path}/{name}") == [], name


def test_members_are_taken_in_canonical_order_and_released_in_reverse(client, kazoo, path):
    multi = client.multi_lock(_members(client, path, reverse=True))
    assert multi.members == [(f"{path}/a", "mutex"), (f"{path}/b", "write"), (f"{path}/c", "leases")]
    with multi.acquire() as guard:
        assert len(guard) == 3 and guard.state == "held" and guard.lost_member is None
        tokens = guard.fencing_tokens
        assert [(p, kind, len(t)) for p, kind, t in tokens] == [
            (f"{path}/a", "mutex", 1),
            (f"{path}/b", "write", 1),
            (f"{path}/c", "leases", 2),
        ]
        # Taken in that order: each node's creation zxid (its token) is above the one before.
        flat = [token for _, _, t in tokens for token in t]
        assert flat == sorted(flat)
        assert len(children(kazoo, f"{path}/a")) == 1 and len(children(kazoo, f"{path}/c/leases")) == 2
        assert client.lock(f"{path}/a").is_held  # the calling thread holds the mutex (re-entrant)
    assert guard.state == "released"
    with pytest.raises(zklock.NotOwnerError):
        guard.fencing_tokens  # a released member's token must not pass for a holder's
    for name in ("a", "b", "c/leases", "c/locks"):
        assert children(kazoo, f"{path}/{name}") == [], name


def test_a_timeout_releases_what_was_taken_and_leaves_nothing(client, kazoo, path, zk_connect):
    with zklock.Client(zk_connect) as other:
        blocker = other.lock(f"{path}/b").acquire()  # the second member is taken elsewhere
        assert blocker
        multi = client.multi_lock([client.lock(f"{path}/b"), client.lock(f"{path}/a")])
        with pytest.raises(zklock.LockTimeout, match=f"{path}/b"):
            multi.acquire(timeout=0.5)
        assert multi.acquire(blocking=False) is None
        assert children(kazoo, f"{path}/a") == [] and len(children(kazoo, f"{path}/b")) == 1

        async def cancelled() -> None:
            waiting = asyncio.ensure_future(multi.acquire_async())
            await asyncio.get_running_loop().run_in_executor(None, wait_children, kazoo, f"{path}/b", 2)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting

        asyncio.run(cancelled())
        wait_children(kazoo, f"{path}/b", 1)
        wait_children(kazoo, f"{path}/a", 0)
        other.lock(f"{path}/b").release()

    async def in_a_task() -> None:
        async with multi.hold(timeout=10) as guard:
            assert guard.state == "held"

    asyncio.run(in_a_task())
    assert children(kazoo, f"{path}/a") == [] and children(kazoo, f"{path}/b") == []


def test_a_lost_member_is_named(client, kazoo, path):
    multi = client.multi_lock([client.lock(f"{path}/a"), (client.semaphore(f"{path}/c", 1), 1)])
    guard = multi.acquire()
    assert guard is not None
    lost: list[zklock.MemberLost] = []
    fired = threading.Event()
    guard.on_lost(lambda member: (lost.append(member), fired.set()))
    [lease] = children(kazoo, f"{path}/c/leases")
    kazoo.delete(f"{path}/c/leases/{lease}")
    assert fired.wait(timeout=10)
    assert lost == [zklock.MemberLost(f"{path}/c", "leases", "node_deleted")]
    assert guard.state == "lost" and guard.lost_member == lost[0]
    with pytest.raises(zklock.LockLostError):
        guard.release()  # reported, and the other members are still released
    wait_until(lambda: not children(kazoo, f"{path}/a"), "the mutex member to be released")
    # Released, as in every language, once the release reported the loss.
    assert guard.state == "released" and guard.lost_member is None


def test_bad_members_are_refused_before_any_traffic(client, kazoo, path):
    semaphore = client.semaphore(f"{path}/s", max_leases=2)
    lock = client.lock(f"{path}/l")
    rw = client.read_write_lock(f"{path}/rw")
    for members, words in [
        ([], "at least one member"),
        ([lock, client.lock(f"{path}/l")], "both on this path"),
        ([rw.read, rw.write], "both on this path"),
        ([(semaphore, 0)], "not 0"),
        ([(semaphore, 3)], "max of 2"),
        ([f"{path}/x"], "a member is a Lock"),
        ([(lock, 1)], "a member is a Lock"),
    ]:
        with pytest.raises(zklock.InvalidArgumentError, match=words):
            client.multi_lock(members)
    assert not kazoo.exists(path)


def test_wait_for_gives_the_members_to_the_caller(client, kazoo, path):
    """Up to Python 3.11, asyncio.wait_for runs the coroutine in a task of its own: the guard's
    members must still be the calling task's, which re-enters them (as a lock's acquire_async)."""
    member = client.lock(f"{path}/a")
    multi = client.multi_lock([member, client.lock(f"{path}/b")])

    async def main() -> None:
        guard = await asyncio.wait_for(multi.acquire_async(), 10)
        try:
            assert guard.state == "held"
            # The caller owns the member, so this is a re-entry (no node), not a refused try.
            assert await member.acquire_async(timeout=0)
            assert len(children(kazoo, f"{path}/a")) == 1
            await member.release_async()
        finally:
            await guard.release_async()
        assert children(kazoo, f"{path}/a") == [] and children(kazoo, f"{path}/b") == []

    asyncio.run(main())
