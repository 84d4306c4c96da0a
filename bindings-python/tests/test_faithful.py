"""As faithful as threading.RLock and asyncio: who owns an asyncio acquisition, a task's view
under a thread's hold, RLock's `blocking` argument, threading.Condition, and the stubs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from conftest import children, wait_children, wait_until

import zklock


def test_wait_for_and_gather_give_the_hold_to_the_caller(zk_connect, client, kazoo, path):
    lock = client.lock(path)

    async def main() -> None:
        assert await asyncio.wait_for(lock.acquire_async(), 5)
        assert lock.is_held and lock.state == "held"
        await lock.release_async()
        assert not lock.is_held
        assert await asyncio.gather(lock.acquire_async()) == [True]
        assert lock.is_held
        await lock.release_async()
        assert children(kazoo, path) == []
        # A wait_for that times out cancels the attempt, and its node goes.
        with zklock.Client(zk_connect) as other:
            with other.lock(path):
                try:
                    await asyncio.wait_for(lock.acquire_async(), 0.5)
                    raise AssertionError("acquired a held lock")
                except asyncio.TimeoutError:
                    pass
                assert not lock.is_held
                await asyncio.get_running_loop().run_in_executor(None, wait_children, kazoo, path, 1)

    asyncio.run(main())
    wait_children(kazoo, path, 0)


def test_a_tasks_view_is_its_own_under_a_threads_hold(client, path):
    lock = client.lock(path)

    async def inside() -> None:
        # The thread running the loop holds the lock; this task holds nothing.
        assert not lock.is_held
        assert lock.state is None and lock.fencing_token is None
        try:
            await lock.release_async()
            raise AssertionError("a task released what its thread holds")
        except zklock.NotOwnerError:
            pass

    with lock:
        assert lock.is_held
        asyncio.run(inside())
        assert lock.is_held


def test_blocking_takes_any_truthy_or_falsy_value_as_rlock_does(zk_connect, client, path):
    lock = client.lock(path)
    assert lock.acquire(0) is True  # free: only tries, and gets it
    lock.release()
    assert lock.acquire(1) and lock.acquire(blocking=1)
    lock.release()
    lock.release()
    with zklock.Client(zk_connect) as other_client:
        other = other_client.lock(path)
        with other:
            for falsy in (0, False, None, ""):
                result: list[bool] = []
                thread = threading.Thread(target=lambda: result.append(lock.acquire(falsy)))
                thread.start()
                thread.join()
                assert result == [False], falsy


def test_threading_condition_works_as_with_rlock(client, kazoo, path):
    lock = client.lock(path)
    condition = threading.Condition(lock)
    items: list[int] = []
    got: list[int] = []

    def consumer() -> None:
        with condition:
            with condition:  # nested: wait() must release both levels, and restore both
                assert condition.wait_for(lambda: items, timeout=20)
                got.append(items.pop())
                assert lock.is_held
            assert lock.is_held
        assert not lock.is_held

    thread = threading.Thread(target=consumer)
    thread.start()
    # While the consumer waits, its node is gone: the producer can take the lock.
    wait_until(lambda: not children(kazoo, path) and thread.is_alive(), "the consumer waits, lock released")
    with condition:
        items.append(42)
        condition.notify()
    thread.join(timeout=20)
    assert got == [42]
    wait_children(kazoo, path, 0)


def test_the_stubs_type_a_user_program_strictly(tmp_path):
    program = tmp_path / "user.py"
    program.write_text(
        textwrap.dedent(
            """
            import asyncio
            import zklock

            def guarded(lock: zklock.Lock) -> int:
                with lock:
                    return 1  # no "missing return": __exit__ does not swallow exceptions

            def client_of(lock: zklock.Lock) -> zklock.Client:
                return lock.client

            def state(lock: zklock.Lock) -> str:
                s = lock.state
                assert s in ("held", "suspended", "lost")
                return s

            async def timed(lock: zklock.Lock) -> bool:
                return await asyncio.wait_for(lock.acquire_async(), 5)

            def blocking(lock: zklock.Lock) -> bool:
                return lock.acquire(0)

            def leased(s: zklock.Semaphore) -> list[int]:
                with s.acquire(2, timeout=5) as leases:  # blocking: never None
                    return leases.fencing_tokens

            def tried(s: zklock.Semaphore) -> bool:
                leases = s.acquire(blocking=False)
                return leases is not None and leases.state == "held"

            async def leased_async(s: zklock.Semaphore) -> int:
                async with s.hold(1, timeout=5) as leases:
                    return leases.fencing_token

            def together(c: zklock.Client, s: zklock.Semaphore) -> str:
                multi = c.multi_lock([c.lock("/a"), c.read_write_lock("/b").read, (s, 2), s])
                with multi.acquire(timeout=5) as guard:
                    lost = guard.lost_member
                    return guard.state if lost is None else lost.path

            with zklock.Client("127.0.0.1:2181", jute_maxbuffer=4 << 20) as c:
                assert c.state in ("connected", "disconnected", "expired", "auth_failed", "closed")
            """
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", str(program)],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(__file__),
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(sys.version_info < (3, 11), reason="n/a before Python 3.11: asyncio.timeout is new in 3.11")
def test_a_task_cancelled_by_asyncio_timeout_may_acquire_again_at_once(client, kazoo, path):
    """asyncio.timeout (and wait_for from 3.12) cancel the very task that goes on to acquire
    again: the cancelled attempt must be gone by then, not still "acquiring"."""
    lock = client.lock(path)
    lock.acquire()  # held by this thread: the task waits

    async def main() -> None:
        for _ in range(5):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):  # type: ignore[attr-defined]
                    await lock.acquire_async()
            assert await lock.acquire_async(timeout=0) is False

    asyncio.run(main())
    wait_children(kazoo, path, 1)
    lock.release()
    wait_children(kazoo, path, 0)
