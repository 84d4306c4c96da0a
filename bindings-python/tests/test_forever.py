"""Issue 44 item 6 in Python: an acquisition with no timeout waits as long as it takes. A client
talks to ZooKeeper through zklock-proxy with a 2 s session and a 1 s connect timeout; one thread
waits (``lock.acquire()``) behind a holder connected directly. The proxy then cuts the client off
for longer than its session and several connect timeouts, and more acquisitions begin meanwhile,
each needing a new session: ``lock.acquire()`` on another thread, and in asyncio
``acquire_async()`` of a read/write lock's write and read sides and of a multi-lock (a semaphore
lease and a mutex). None may end during the outage (before issue 44 each raised ``LockTimeout``,
"no session within the connect timeout"); once the server is reachable again and the holder has
released, each holds, on a new session."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Awaitable, Callable, Dict

from conftest import Proxy, children, session_of, wait_children

import zklock

SESSION = 2.0
CONNECT = 1.0
# Longer than the session (the waiter's session ends) and than several connect timeouts.
OUTAGE = 6.0
# How long the acquisitions may take once the server is back (a new session, a queue).
PATIENCE = 30.0


class Outcome:
    """How one acquisition ended: what it returned (or raised), and when."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.done = threading.Event()
        self.value: Any = None
        self.at = 0.0

    def set(self, value: Any) -> None:
        self.value, self.at = value, time.monotonic()
        self.done.set()


def test_forever_outlasts_an_outage_longer_than_the_connect_timeout_and_the_session(zk_connect, kazoo, path, proxy):
    client = zklock.Client(proxy.address, session_timeout=SESSION, connect_timeout=CONNECT)
    holder = zklock.Client(zk_connect)
    release = threading.Event()
    outcomes: Dict[str, Outcome] = {}
    threads = []

    def in_thread(what: str, lock: zklock.Lock) -> None:
        """``lock.acquire()`` with no timeout on a thread of its own, held until `release`."""
        outcome = outcomes[what] = Outcome(what)

        def acquire() -> None:
            try:
                outcome.set(lock.acquire())
            except BaseException as err:  # reported by the checks
                outcome.set(err)
                return
            release.wait(2 * PATIENCE)
            lock.release()

        thread = threading.Thread(target=acquire, name=what)
        thread.start()
        threads.append(thread)

    try:
        before = session_of(client)
        held = holder.lock(path)
        assert held.acquire(timeout=10)
        # A waiter queued before the outage, behind the direct holder.
        in_thread("the queued waiter's lock.acquire()", client.lock(path))
        wait_children(kazoo, path, 2)

        proxy.command("cut")
        t0 = time.monotonic()
        # Acquisitions begun during the outage: each needs a new session.
        in_thread("a mutex's lock.acquire()", client.lock(f"{path}-mutex"))
        rw = client.read_write_lock(f"{path}-rw")
        read = client.read_write_lock(f"{path}-rw-read").read
        multi = client.multi_lock([client.semaphore(f"{path}-multi-semaphore", 1), client.lock(f"{path}-multi-lock")])

        async def asynchronous() -> None:
            released = asyncio.Event()

            async def acquire(what: str, begin: Callable[[], Awaitable[Any]], give_back: Callable[[Any], Any]) -> None:
                """``begin()`` in a task of its own (its owner), held until `released`."""
                outcome = outcomes[what] = Outcome(what)
                try:
                    got = await begin()
                except BaseException as err:
                    outcome.set(err)
                    return
                outcome.set(got)
                await released.wait()
                await give_back(got)

            tasks = [
                asyncio.create_task(acquire("a write lock's acquire_async()", rw.write.acquire_async,
                                            lambda _: rw.write.release_async())),
                asyncio.create_task(acquire("a read lock's acquire_async()", read.acquire_async,
                                            lambda _: read.release_async())),
                asyncio.create_task(acquire("a multi-lock's acquire_async()", multi.acquire_async,
                                            lambda guard: guard.release_async())),
            ]
            # The fault itself: an outage this long.
            await asyncio.sleep(OUTAGE)
            ended = {what: o.value for what, o in outcomes.items() if o.done.is_set()}
            assert not ended, (
                f"ended during a {OUTAGE} s outage (they wait forever): "
                + "; ".join(f"{what}: {value!r} after {outcomes[what].at - t0:.1f} s" for what, value in ended.items())
            )

            held.release()
            proxy.command("pass")
            deadline = time.monotonic() + PATIENCE
            for outcome in outcomes.values():
                while not outcome.done.is_set() and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            print(f"waited for them until {time.monotonic() - t0:.1f} s after the outage began")
            for what, outcome in outcomes.items():
                assert outcome.done.is_set(), f"{what} holds within {PATIENCE} s of the server's return"
                assert outcome.value is True or isinstance(outcome.value, zklock.MultiGuard), (
                    f"{what} holds once the server is back: {outcome.value!r}"
                )
            assert session_of(client) != before, "they hold on a new session"
            assert len(children(kazoo, path)) == 1, "the waiter's node of the ended session is gone"
            released.set()
            await asyncio.gather(*tasks)

        asyncio.run(asynchronous())
        release.set()
        for thread in threads:
            thread.join(PATIENCE)
            assert not thread.is_alive(), f"{thread.name} released"
        wait_children(kazoo, path, 0)
    finally:
        release.set()
        proxy.command("pass")
        client.close()
        holder.close()
