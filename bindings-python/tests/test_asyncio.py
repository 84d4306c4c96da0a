"""asyncio semantics, owner = the current task: exclusion, reentrancy, cancellation, a free loop."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any

import pytest
from conftest import DEADLINE, children, identity, wait_children, wait_until

import zklock


def test_tasks_are_owners_and_exclude_each_other(client, kazoo, path):
    lock = client.lock(path)
    order: list[str] = []

    async def worker(name: str) -> None:
        async with lock:
            order.append(f"{name} in")
            assert lock.is_held and lock.state == "held"
            await asyncio.sleep(0.05)
            order.append(f"{name} out")

    async def main() -> None:
        first = asyncio.create_task(worker("a"), name="worker-a")
        await asyncio.get_running_loop().run_in_executor(None, wait_children, kazoo, path, 1)  # a queued first
        second = asyncio.create_task(worker("b"), name="worker-b")
        await asyncio.gather(first, second)

    asyncio.run(main())
    assert order == ["a in", "a out", "b in", "b out"]
    wait_children(kazoo, path, 0)


def test_the_node_names_the_task(client, kazoo, path):
    lock = client.lock(path)

    async def main() -> None:
        assert await lock.acquire_async()
        [name] = children(kazoo, path)
        assert identity(kazoo, path, name)["owner"] == "task:the-task"
        assert identity(kazoo, path, name)["lang"] == "python"
        await lock.release_async()

    async def outer() -> None:
        await asyncio.create_task(main(), name="the-task")

    asyncio.run(outer())
    wait_children(kazoo, path, 0)


def test_a_task_reenters_without_a_second_node(client, kazoo, path):
    lock = client.lock(path)

    async def main() -> None:
        async with lock:
            assert await lock.acquire_async(timeout=0)
            async with lock.hold(timeout=1) as token:
                assert token == lock.fencing_token
            assert len(children(kazoo, path)) == 1
            await lock.release_async()
            assert lock.is_held
        assert not lock.is_held
        with pytest.raises(zklock.NotOwnerError, match=path):
            await lock.release_async()

    asyncio.run(main())
    wait_children(kazoo, path, 0)


def test_a_thread_and_a_task_on_it_are_different_owners(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()  # the main thread holds

    async def main() -> bool:
        return await lock.acquire_async(timeout=0)

    assert asyncio.run(main()) is False, "a task is not the thread it runs on"
    assert len(children(kazoo, path)) == 1
    lock.release()


def test_tasks_never_share_an_owner_even_after_garbage_collection(client, path):
    lock = client.lock(path)

    async def holder() -> None:
        assert await lock.acquire_async()  # acquires and never releases

    async def main() -> bool:
        await asyncio.create_task(holder())
        gc.collect()  # the holder task is gone; a new task may get its id()
        results = []
        for _ in range(20):
            results.append(await asyncio.create_task(lock.acquire_async(timeout=0)))
        return any(results)

    assert asyncio.run(main()) is False, "a new task inherited a dead task's hold"



def test_acquire_async_gives_a_coroutine_even_when_decided_at_the_call(client, path):
    # asyncio.create_task() takes coroutines only (a Future was given when the core had decided
    # at the call: found on CPython 3.9 with a try the core answered at once).
    lock = client.lock(path)

    async def main() -> None:
        first = lock.acquire_async()
        assert asyncio.iscoroutine(first)
        assert await first
        again = lock.acquire_async(timeout=0)  # a re-entry: decided at the call, for this task
        assert asyncio.iscoroutine(again)
        assert await asyncio.create_task(again)
        await lock.release_async()
        await lock.release_async()
        assert not lock.is_held

    asyncio.run(main())

def test_cancelling_a_waiting_task_removes_its_node(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()

    async def main() -> None:
        waiter = asyncio.create_task(lock.acquire_async())
        await asyncio.get_running_loop().run_in_executor(None, wait_children, kazoo, path, 2)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    asyncio.run(main())
    wait_children(kazoo, path, 1)  # only the thread's node is left
    lock.release()
    wait_children(kazoo, path, 0)


def test_wait_for_timeout_cancels_and_leaves_nothing(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()

    async def main() -> None:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(lock.acquire_async(), timeout=0.3)
        assert await lock.acquire_async(timeout=0.2) is False

    asyncio.run(main())
    wait_children(kazoo, path, 1)
    lock.release()
    wait_children(kazoo, path, 0)


def test_the_event_loop_never_blocks_while_a_task_waits(client, kazoo, path):
    lock = client.lock(path)
    lock.acquire()  # held by the main thread throughout: the task waits out its timeout

    async def main() -> float:
        ticks: list[float] = []

        async def ticker() -> None:
            while True:
                ticks.append(time.monotonic())
                await asyncio.sleep(0.01)

        ticking = asyncio.create_task(ticker())
        waited = asyncio.create_task(lock.acquire_async(timeout=0.8))
        assert await waited is False
        ticking.cancel()
        return max(later - earlier for earlier, later in zip(ticks, ticks[1:]))

    try:
        largest_gap = asyncio.run(main())
    finally:
        lock.release()
    # A blocked loop would stall for the whole 0.8 s wait; allow for a loaded machine's hiccups.
    assert largest_gap < 0.4, f"the loop stalled for {largest_gap:.3f}s"
    wait_children(kazoo, path, 0)


def test_acquire_async_rejects_bad_timeouts_before_any_traffic(client, kazoo, path):
    lock = client.lock(path)

    async def main() -> None:
        for bad in (-2, -0.5, float("nan")):
            with pytest.raises(zklock.InvalidArgumentError, match=path) as err:
                await lock.acquire_async(timeout=bad)
            assert "or None or -1 to wait forever" in str(err.value)

    asyncio.run(main())
    assert not kazoo.exists(path)


def test_many_tasks_take_turns(client, kazoo, path):
    lock = client.lock(path)
    inside = 0
    most = 0

    async def worker() -> None:
        nonlocal inside, most
        for _ in range(5):
            async with lock:
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0)
                inside -= 1

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(6)))

    asyncio.run(main())
    assert most == 1
    wait_children(kazoo, path, 0)


def acquisition_queued(loop: asyncio.AbstractEventLoop) -> threading.Event:
    """Set once a runtime thread queued an acquisition's result on `loop` (for the loop to deliver
    it): waiting on it blocks the loop until the acquisition really completed."""
    queued = threading.Event()
    call_soon_threadsafe = loop.call_soon_threadsafe

    def spy(callback: Any, *args: Any, **kwargs: Any) -> Any:
        handle = call_soon_threadsafe(callback, *args, **kwargs)
        if callback is zklock._settle_acquire:
            queued.set()
        return handle

    loop.call_soon_threadsafe = spy  # type: ignore[method-assign]
    return queued


def test_a_task_cancelled_as_its_acquisition_completes_gives_the_lock_back(client, kazoo, path, zk_connect):
    lock = client.lock(path)

    async def main() -> None:
        assert holder.acquire()  # (blocking, for this task: the lock is free)
        queued = acquisition_queued(asyncio.get_running_loop())
        waiter = asyncio.create_task(lock.acquire_async())
        await asyncio.sleep(0)  # the acquisition starts on the runtime
        # Block the loop while it completes: its result waits in the loop's queue, undelivered.
        # (Behind another holder, so that the core cannot decide it at the call.)
        wait_children(kazoo, path, 2)
        holder.release()
        assert queued.wait(DEADLINE), "the acquisition did not complete"
        assert len(children(kazoo, path)) == 1
        waiter.cancel()  # before the result is delivered
        with pytest.raises(asyncio.CancelledError):
            await waiter

    with zklock.Client(zk_connect) as other:
        holder = other.lock(path)
        asyncio.run(main())
    wait_children(kazoo, path, 0)  # released in the background on the cancelled task's behalf
    assert lock.acquire(blocking=False)
    lock.release()


def test_a_task_cancelled_after_its_result_arrived_gives_the_lock_back(client, kazoo, path, zk_connect):
    lock = client.lock(path)

    async def main() -> None:
        assert holder.acquire()  # (blocking, for this task: the lock is free)
        queued = acquisition_queued(asyncio.get_running_loop())
        waiter = asyncio.create_task(lock.acquire_async())
        await asyncio.sleep(0)
        wait_children(kazoo, path, 2)  # behind another holder: not decided at the call
        holder.release()
        assert queued.wait(DEADLINE), "the acquisition did not complete"  # its result is queued on the loop
        await asyncio.sleep(0)  # ...and delivered, but the waiter has not resumed yet
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter

    with zklock.Client(zk_connect) as other:
        holder = other.lock(path)
        asyncio.run(main())
    wait_children(kazoo, path, 0)
    assert lock.acquire(blocking=False)
    lock.release()


def test_holder_and_contenders_can_be_awaited_and_leave_the_loop_free(client, path):
    lock = client.lock(path, identifier="async-query")
    waiter_lock = client.lock(path)

    async def waiter() -> None:
        async with waiter_lock:
            pass

    async def main() -> None:
        async with lock:
            waiting = asyncio.create_task(waiter(), name="the-waiter")
            while len(await lock.contenders_async()) < 2:
                await asyncio.sleep(0.01)
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            ticker = asyncio.create_task(tick())
            holder = await lock.holder_async()
            contenders = await lock.contenders_async()
            ticker.cancel()
            assert ticks > 0, "the loop ran other tasks while the queries were in flight"
            assert holder is not None and holder.identity is not None
            assert holder.identity["identifier"] == "async-query"
            assert [c.node for c in contenders][0] == holder.node and len(contenders) == 2
            assert contenders[1].identity is not None and contenders[1].identity["owner"] == "task:the-waiter"
        await waiting

    asyncio.run(main())


def test_an_acquisition_in_flight_costs_no_finalizer(client, path):
    """Issue 52: acquire_async() registers no weakref.finalize per acquisition (its weak reference
    and registry entry were a part of the binding's work per cycle); the coroutine's own argument
    gives it up if it is dropped unawaited (test_a_never_awaited_acquisition_is_given_up)."""
    import weakref

    registry = getattr(weakref.finalize, "_registry")  # CPython's table of live finalizers
    locks = [client.lock(f"{path}/p{i}") for i in range(20)]

    async def main() -> None:
        before = len(registry)
        pending = [lock.acquire_async() for lock in locks]  # each begun at the call
        assert len(registry) == before, "a finalizer per acquisition in flight"
        assert all(await asyncio.gather(*pending))
        for lock in locks:
            await lock.release_async()
        assert not any(lock.locked() for lock in locks)

    asyncio.run(main())


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_a_never_awaited_acquisition_is_given_up(client, kazoo, path):
    """acquire_async() begins at the call; if its coroutine is dropped unawaited, the attempt is
    given up (or what it got given back), instead of held until the client closes."""
    import gc

    lock = client.lock(path)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        lock.acquire_async()  # dropped at once, never awaited
        gc.collect()
        await loop.run_in_executor(None, wait_children, kazoo, path, 0)
        await loop.run_in_executor(None, wait_until, lambda: not lock.locked(), "nothing held")
        # A re-entry decided at the call: its level is given back, so leaving the block releases.
        async with lock:
            lock.acquire_async()
            gc.collect()
        await loop.run_in_executor(None, wait_children, kazoo, path, 0)
        assert not lock.locked()

    asyncio.run(main())
