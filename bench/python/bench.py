"""zklock's Python binding and kazoo 2.11, with the workloads and parameters of bench/src/main.rs.

    python bench/python/bench.py zklock|kazoo      (ZK_CONNECT names the server)

Prints one JSON line with the keys of the Rust benchmark (progress on stderr). kazoo's Lock is not
reentrant, so its reentrant figure is null; its floor is kazoo's own create+delete of a lock-shaped
node. zklock's floor is the Rust core's (same client library), so it is left to the Rust impl.
The read/write workloads (read, read_mostly) use zklock's ``client.read_write_lock(path)``; kazoo's
figures there are null (its read/write lock is not Curator's recipe). The scale workload (N asyncio
tasks on one lock, one client; only when BENCH_WORKLOADS names it) is zklock's only.
"""

from __future__ import annotations

import asyncio
import gc
import json
import math
import os
import sys
import threading
import time
from typing import Callable, Optional

CONTENDERS = 8
WRITE_ONE_IN = 10  # one operation in this many of the read-mostly workload is a write
MASK64 = (1 << 64) - 1


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def percentile_us(ordered: list[float], p: float) -> float:
    if not ordered:
        return math.nan
    return ordered[round((len(ordered) - 1) * p)] * 1e6


class OpSequence:
    """Which operations of the read-mostly workload write: splitmix64 from the session's index, the
    same sequence in every impl (bench/src/main.rs, CuratorBench.java), one write in WRITE_ONE_IN."""

    def __init__(self, session: int) -> None:
        self.state = session + 1

    def next_is_write(self) -> bool:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return (z ^ (z >> 31)) % WRITE_ONE_IN == 0


Sides = tuple[tuple[Callable[[], object], Callable[[], object]], tuple[Callable[[], object], Callable[[], object]]]


class Impl:
    name: str

    def connect(self) -> object: ...
    def lock(self, session: object, path: str) -> tuple[Callable[[], object], Callable[[], object]]: ...
    def read_write_lock(self, session: object, path: str) -> Optional[Sides]:
        """((read acquire, read release), (write acquire, write release)), or None."""
        return None
    def close(self, session: object) -> None: ...
    def floor_cycle(self, session: object, parent: str) -> Optional[Callable[[], None]]:
        return None
    def reentrant_ns(self, session: object, path: str) -> float:
        return math.nan


class Zklock(Impl):
    name = "zklock (python)"

    def __init__(self, connect: str) -> None:
        import zklock

        self.zklock = zklock
        self.connect_string = connect

    def connect(self) -> object:
        return self.zklock.Client(self.connect_string)

    def lock(self, session, path):  # type: ignore[no-untyped-def]
        lock = session.lock(path)
        return lock.acquire, lock.release

    def close(self, session) -> None:  # type: ignore[no-untyped-def]
        session.close()

    def read_write_lock(self, session, path):  # type: ignore[no-untyped-def]
        if not hasattr(session, "read_write_lock"):  # an install older than the read/write lock
            return None
        rw = session.read_write_lock(path)
        return (rw.read.acquire, rw.read.release), (rw.write.acquire, rw.write.release)

    def reentrant_ns(self, session, path) -> float:  # type: ignore[no-untyped-def]
        lock = session.lock(path)
        acquire, release = lock.acquire, lock.release
        acquire()

        def pairs(n: int) -> float:
            started = time.perf_counter_ns()
            for _ in range(n):
                acquire()
                release()
            return (time.perf_counter_ns() - started) / n

        iters = int(os.environ.get("BENCH_REENTRANT_ITERS", "1000000"))
        pairs(max(iters // 5, 1))
        median = sorted(pairs(iters) for _ in range(5))[2]  # as the Curator benchmark reports it
        release()
        return median


class Kazoo(Impl):
    name = "kazoo 2.11"

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient

        self.KazooClient = KazooClient
        self.connect_string = connect

    def connect(self) -> object:
        client = self.KazooClient(hosts=self.connect_string)
        client.start(timeout=15)
        return client

    def lock(self, session, path):  # type: ignore[no-untyped-def]
        lock = session.Lock(path)
        return lock.acquire, lock.release

    def close(self, session) -> None:  # type: ignore[no-untyped-def]
        session.stop()
        session.close()

    def floor_cycle(self, session, parent):  # type: ignore[no-untyped-def]
        session.ensure_path(parent)
        prefix = f"{parent}/_c_1b4e28ba-2fa1-11d2-883f-0016d3cca427-lock-"
        data = b"x" * 110

        def cycle() -> None:
            node = session.create(prefix, data, ephemeral=True, sequence=True)
            session.delete(node)

        return cycle


def timed_cycles(acquire, release, budget: float, samples: Optional[tuple[list[float], list[float]]]) -> tuple[int, float]:  # type: ignore[no-untyped-def]
    clock = time.perf_counter
    started = clock()
    count = 0
    while clock() - started < budget:
        t0 = clock()
        acquire()
        t1 = clock()
        release()
        t2 = clock()
        if samples is not None:
            samples[0].append(t1 - t0)
            samples[1].append(t2 - t1)
        count += 1
    return count, clock() - started


def floor_slice(cycle: Callable[[], None], budget: float) -> tuple[int, float]:
    started = time.perf_counter()
    count = 0
    while time.perf_counter() - started < budget:
        cycle()
        count += 1
    return count, time.perf_counter() - started


def uncontended(impl: Impl, session: object, base: str, warmup: float, measure: float) -> dict[str, float]:
    """Lock cycles (and the floor, where the impl has one) in alternating slices, as in Rust."""
    acquire, release = impl.lock(session, f"{base}/uncontended")
    floor = impl.floor_cycle(session, f"{base}/floor")
    timed_cycles(acquire, release, warmup / 2, None)
    if floor is not None:
        floor_slice(floor, warmup / 2)
    slices = max(round(measure * 4), 4)
    slice_seconds = measure / slices / 2
    acquires: list[float] = []
    releases: list[float] = []
    lock_count, lock_time, floor_count, floor_time = 0, 0.0, 0, 0.0
    for _ in range(slices):
        count, spent = timed_cycles(acquire, release, slice_seconds, (acquires, releases))
        lock_count, lock_time = lock_count + count, lock_time + spent
        if floor is not None:
            count, spent = floor_slice(floor, slice_seconds)
            floor_count, floor_time = floor_count + count, floor_time + spent
    acquires.sort()
    releases.sort()
    return {
        "uncontended_cycles_per_s": lock_count / lock_time,
        "acquire_p50_us": percentile_us(acquires, 0.5),
        "acquire_p99_us": percentile_us(acquires, 0.99),
        "release_p50_us": percentile_us(releases, 0.5),
        "release_p99_us": percentile_us(releases, 0.99),
        "floor_cycles_per_s": floor_count / floor_time if floor is not None else math.nan,
    }


def contended(impl: Impl, path: str, warmup: float, measure: float) -> float:
    """8 sessions, one thread and one lock object each, on one path: acquisitions per second."""
    sessions = [impl.connect() for _ in range(CONTENDERS)]
    handoffs = 0
    inside = 0
    overlaps = 0
    stop = threading.Event()
    counter = threading.Lock()

    def contender(session: object) -> None:
        nonlocal handoffs, inside, overlaps
        acquire, release = impl.lock(session, path)
        while not stop.is_set():
            acquire()
            with counter:
                inside += 1
                overlaps += inside > 1
                handoffs += 1
                inside -= 1
            release()

    threads = [threading.Thread(target=contender, args=(s,), daemon=True) for s in sessions]
    for t in threads:
        t.start()
    time.sleep(warmup)
    start_count, started = handoffs, time.perf_counter()
    time.sleep(measure)
    rate = (handoffs - start_count) / (time.perf_counter() - started)
    stop.set()
    for t in threads:
        t.join(timeout=60)
    for s in sessions:
        impl.close(s)
    if overlaps:
        raise AssertionError(f"{impl.name}: mutual exclusion violated {overlaps} times")
    return rate


def read_cycles(impl: Impl, session: object, path: str, warmup: float, measure: float) -> dict[str, float]:
    """Uncontended read cycles: one session, the read side of a read/write lock on a fresh path."""
    sides = impl.read_write_lock(session, path)
    assert sides is not None
    acquire, release = sides[0]
    timed_cycles(acquire, release, warmup, None)
    acquires: list[float] = []
    releases: list[float] = []
    count, spent = timed_cycles(acquire, release, measure, (acquires, releases))
    acquires.sort()
    releases.sort()
    return {
        "read_cycles_per_s": count / spent,
        "read_acquire_p50_us": percentile_us(acquires, 0.5),
        "read_acquire_p99_us": percentile_us(acquires, 0.99),
        "read_release_p50_us": percentile_us(releases, 0.5),
        "read_release_p99_us": percentile_us(releases, 0.99),
    }


def read_mostly(impl: Impl, path: str, warmup: float, measure: float, hold: float) -> dict[str, float]:
    """8 sessions, one thread and one read/write lock each, on one path, each looping over its
    OpSequence: acquire the read (or write) side, hold for ``hold`` seconds, release. Sharing and
    exclusion are checked while holding; waits and holds are those of operations begun in the
    measured window."""
    sessions = [impl.connect() for _ in range(CONTENDERS)]
    ops = 0
    readers_in = writers_in = violations = 0
    stop, measuring = threading.Event(), threading.Event()
    counter = threading.Lock()
    reader_waits: list[float] = []
    writer_waits: list[float] = []
    held_total, holds = 0.0, 0
    clock = time.perf_counter

    def contender(index: int, session: object) -> None:
        nonlocal ops, readers_in, writers_in, violations, held_total, holds
        sides = impl.read_write_lock(session, path)
        assert sides is not None
        sequence = OpSequence(index)
        mine_r: list[float] = []
        mine_w: list[float] = []
        mine_held, mine_holds = 0.0, 0
        while not stop.is_set():
            write = sequence.next_is_write()
            acquire, release = sides[1] if write else sides[0]
            recording = measuring.is_set()
            asked = clock()
            acquire()
            waited = clock() - asked
            with counter:
                # A writer finds nobody inside; a reader finds no writer.
                if write:
                    violations += writers_in > 0 or readers_in > 0
                    writers_in += 1
                else:
                    violations += writers_in > 0
                    readers_in += 1
            held_from = clock()
            if hold > 0:
                time.sleep(hold)
            held = clock() - held_from
            with counter:
                if write:
                    writers_in -= 1
                else:
                    readers_in -= 1
            release()
            with counter:
                ops += 1
            if recording:
                (mine_w if write else mine_r).append(waited)
                mine_held, mine_holds = mine_held + held, mine_holds + 1
        with counter:
            reader_waits.extend(mine_r)
            writer_waits.extend(mine_w)
            held_total, holds = held_total + mine_held, holds + mine_holds

    threads = [threading.Thread(target=contender, args=(i, s), daemon=True) for i, s in enumerate(sessions)]
    for t in threads:
        t.start()
    time.sleep(warmup)
    measuring.set()
    start_count, started = ops, clock()
    time.sleep(measure)
    rate = (ops - start_count) / (clock() - started)
    measuring.clear()
    stop.set()
    for t in threads:
        t.join(timeout=60)
    for s in sessions:
        impl.close(s)
    if violations:
        raise AssertionError(f"{impl.name}: read/write exclusion violated {violations} times")
    reader_waits.sort()
    writer_waits.sort()
    log(f"[{impl.name}] read-mostly: {rate:.1f} ops/s; {len(reader_waits)} reads, {len(writer_waits)} writes measured")
    return {
        "read_mostly_ops_per_s": rate,
        "read_mostly_reader_wait_p50_us": percentile_us(reader_waits, 0.5),
        "read_mostly_reader_wait_p99_us": percentile_us(reader_waits, 0.99),
        "read_mostly_writer_wait_p50_us": percentile_us(writer_waits, 0.5),
        "read_mostly_writer_wait_p99_us": percentile_us(writer_waits, 0.99),
        "read_mostly_hold_us": held_total / holds * 1e6 if holds else math.nan,
    }


def status_mb(field: str) -> float:
    """A line of /proc/self/status (VmRSS, VmHWM), in MB."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return math.nan


async def four_letter(connect: str, word: str) -> str:
    """Sends a four-letter word to the first server of ``connect`` and returns its reply."""
    host, _, port = connect.split(",")[0].split("/")[0].rpartition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(word.encode())
        await writer.drain()
        return (await asyncio.wait_for(reader.read(), 10)).decode()
    finally:
        writer.close()


async def queued_on_server(connect: str, path: str) -> int:
    """The lock nodes under ``path`` on the server: the ephemerals that ``dump`` lists there (with
    a chroot the server names the full path: match the end)."""
    prefix = path + "/"
    dump = await four_letter(connect, "dump")
    return sum(1 for line in dump.splitlines() if (line.strip().rpartition("/")[0] + "/").endswith(prefix))


async def server_watches(connect: str) -> int:
    reply = await four_letter(connect, "wchs")
    for line in reply.splitlines():
        if line.startswith("Total watches:"):
            return int(line.split(":", 1)[1])
    raise RuntimeError(f"no watch count in the wchs reply: {reply!r}")


async def settled_watches(connect: str, deadline: float) -> int:
    """The watch count once it stops changing (three equal samples 200 ms apart, at most 30 s):
    the waiters set their watches after their creates."""
    until = min(time.monotonic() + 30, deadline)
    last, same = await server_watches(connect), 1
    while same < 3 and time.monotonic() < until:
        await asyncio.sleep(0.2)
        now = await server_watches(connect)
        same, last = (same + 1 if now == last else 1), now
    return last


async def scale_chain(
    session: object, connect: str, path: str, waiters: int, deadline: float, progress: dict[str, int]
) -> dict[str, object]:
    """A gate holder takes the lock; N asyncio tasks queue on it (one zklock.Lock, one client):
    each task calls acquire_async as it starts, and tasks start in creation order, so the
    creates reach the server in index order. Once all N nodes are queued and the watches
    settled, the gate is released and the chain timed until the last waiter has released."""
    lock = session.lock(path)  # type: ignore[attr-defined]
    await lock.acquire_async()
    inside = 1  # the gate holder, until it releases
    overlaps = 0
    order: list[int] = []

    async def waiter(index: int) -> None:
        nonlocal inside, overlaps
        async with lock:
            inside += 1
            overlaps += inside > 1
            order.append(index)
            progress["handoffs"] += 1
            await asyncio.sleep(0)  # let any other task run while this one holds
            inside -= 1

    queueing = time.monotonic()
    tasks = [asyncio.create_task(waiter(i)) for i in range(waiters)]
    while True:
        # Each queued waiter watches the node ahead: the cheap watch count gates the listing of
        # every ephemeral (megabytes of reply, ten times a second, in the process measured).
        if await server_watches(connect) >= waiters:
            progress["queued"] = await queued_on_server(connect, path) - 1  # less the gate holder
            if progress["queued"] >= waiters:
                break
        await asyncio.sleep(0.1)
    queue_s = time.monotonic() - queueing
    try:
        watches: Optional[int] = await settled_watches(connect, deadline)
    except (OSError, RuntimeError) as e:
        log(f"[zklock (python)] scale {waiters}: no watch count: {e}")
        watches = None
    queued_rss = status_mb("VmRSS")
    log(f"[zklock (python)] scale {waiters}: queued in {queue_s:.2f} s; {watches} watches; RSS {queued_rss:.1f} MB")
    started = time.perf_counter()
    inside -= 1
    await lock.release_async()
    await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    figures: dict[str, object] = {
        "handoffs_per_s": waiters / elapsed,
        "peak_rss_mb": status_mb("VmHWM"),
        "queued_rss_mb": queued_rss,
        "watches": watches,
        "queue_s": queue_s,
        "fifo": order == list(range(waiters)),
        "overlaps": overlaps,
    }
    log(f"[zklock (python)] scale {waiters}: {figures['handoffs_per_s']:.1f} handoffs/s in {elapsed:.2f} s; "
        f"peak RSS {figures['peak_rss_mb']:.1f} MB; FIFO {figures['fifo']}; overlaps {overlaps}")  # fmt: skip
    return figures


def scale(impl: Impl, session: object, connect: str, base: str) -> dict[str, object]:
    """For each N of BENCH_SCALE_WAITERS, the scale chain, bounded by BENCH_SCALE_TIMEOUT
    seconds: the ``scale_<N>_*`` fields (``scale_<N>_error`` if it could not finish)."""
    counts = [int(n) for n in (os.environ.get("BENCH_SCALE_WAITERS") or "1000,5000,10000").split(",") if n.strip()]
    timeout = float(os.environ.get("BENCH_SCALE_TIMEOUT") or 300)
    out: dict[str, object] = {}
    for n in counts:
        if not isinstance(impl, Zklock):
            break  # zklock's asyncio API only (scripts/bench does not run kazoo's)
        log(f"[{impl.name}] scale: {n} asyncio tasks on one lock, one client...")

        progress = {"queued": 0, "handoffs": 0}
        deadline = time.monotonic() + timeout
        chain = scale_chain(session, connect, f"{base}/scale-{n}", n, deadline, progress)
        try:
            figures = asyncio.run(asyncio.wait_for(chain, timeout))
        except (asyncio.TimeoutError, TimeoutError):
            out[f"scale_{n}_error"] = (
                f"timed out after {timeout:.0f} s (BENCH_SCALE_TIMEOUT) with {progress['queued']} of {n} queued, "
                f"{progress['handoffs']} handoffs done"
            )
            break  # as in the other impls: one failed N ends the process's runs
        except Exception as e:  # reported in the table, not a crash of the whole impl
            out[f"scale_{n}_error"] = f"{type(e).__name__}: {e}"
            break
        out.update({f"scale_{n}_{k}": v for k, v in figures.items()})
    return out


WARMUP_BOUND = 120.0  # the many_locks warm-up lasts until every loop has finished a cycle, at most this
THREAD_CAP = int(os.environ.get("BENCH_MANY_THREAD_CAP") or 1000)


def cpu_s() -> float:
    """The process's CPU time so far (user + system), in seconds."""
    t = os.times()
    return t.user + t.system


def many_figures(n: int, cycles: int, elapsed: float, cpu: float, acquire: list[float], held: tuple[float, float]) -> dict[str, object]:
    acquire.sort()
    return {
        "cycles_per_s": cycles / elapsed,
        "acquire_p50_us": percentile_us(acquire, 0.5),
        "acquire_p99_us": percentile_us(acquire, 0.99),
        "cpu_us_per_cycle": cpu * 1e6 / cycles if cycles else math.nan,
        "peak_rss_mb": status_mb("VmHWM"),
        "held_kb_per_lock": held[0],
        "kept_kb_per_lock": held[1],
    }


async def many_asyncio(session: object, base: str, n: int, warmup: float, measure: float) -> dict[str, object]:
    """zklock: N asyncio tasks, one zklock.Lock each on its own path, one client."""
    # The memory of an idle held lock, first (a fresh process per N in scripts/bench): N new
    # Locks, each acquired (256 at a time) and left idle; then released and dropped.
    gc.collect()
    before = status_mb("VmRSS")
    held_locks = [session.lock(f"{base}/held-{n}/p{i}") for i in range(n)]  # type: ignore[attr-defined]
    window = asyncio.Semaphore(256)
    all_held, release = asyncio.Event(), asyncio.Event()
    holding = [0]

    # A lock belongs to the task that took it: each task acquires (256 at a time), waits, releases.
    async def hold(lock) -> None:  # type: ignore[no-untyped-def]
        async with window:
            await lock.acquire_async()
        holding[0] += 1
        if holding[0] == n:
            all_held.set()
        await release.wait()
        async with window:
            await lock.release_async()

    holders = [asyncio.create_task(hold(lock)) for lock in held_locks]
    await all_held.wait()
    held = status_mb("VmRSS")
    release.set()
    await asyncio.gather(*holders)
    del holders
    del held_locks
    gc.collect()
    await asyncio.sleep(0.2)
    after = status_mb("VmRSS")
    per = (held - before) * 1024 / n, (after - before) * 1024 / n
    locks = [session.lock(f"{base}/many-{n}/p{i}") for i in range(n)]  # type: ignore[attr-defined]
    state = {"measuring": False, "stop": False, "count": 0}
    acquire: list[float] = []
    clock = time.perf_counter

    warmed = [0]

    async def loop(lock) -> None:  # type: ignore[no-untyped-def]
        first = True
        while not state["stop"]:
            t0 = clock()
            await lock.acquire_async()
            t1 = clock()
            await lock.release_async()
            if state["measuring"]:  # the cycles that end in the measured phase
                acquire.append(t1 - t0)
                state["count"] += 1
            if first:
                warmed[0], first = warmed[0] + 1, False

    tasks = [asyncio.create_task(loop(lock)) for lock in locks]
    # Until every loop has finished a cycle (with 10,000 paths one takes seconds), at least warmup.
    warming = clock()
    await asyncio.sleep(warmup)
    while warmed[0] < n and clock() - warming < WARMUP_BOUND:
        await asyncio.sleep(0.05)
    cpu0, started = cpu_s(), clock()
    state["measuring"] = True
    await asyncio.sleep(measure)
    state["measuring"] = False
    elapsed, cpu = clock() - started, cpu_s() - cpu0
    state["stop"] = True
    await asyncio.gather(*tasks)
    del tasks, locks
    return many_figures(n, state["count"], elapsed, cpu, acquire, per)


def many_threads(impl: Impl, session: object, base: str, n: int, warmup: float, measure: float) -> dict[str, object]:
    """kazoo: N threads, one Lock each on its own path, one client."""
    gc.collect()
    before = status_mb("VmRSS")
    held_locks = [impl.lock(session, f"{base}/held-{n}/p{i}") for i in range(n)]
    for acquire, _ in held_locks:
        acquire()
    held = status_mb("VmRSS")
    for _, release in held_locks:
        release()
    del held_locks
    gc.collect()
    time.sleep(0.2)
    after = status_mb("VmRSS")
    per = (held - before) * 1024 / n, (after - before) * 1024 / n
    state = {"measuring": False, "stop": False}
    counts = [0] * n
    samples: list[list[float]] = [[] for _ in range(n)]
    clock = time.perf_counter

    warmed = [False] * n

    def loop(i: int) -> None:
        acquire, release = impl.lock(session, f"{base}/many-{n}/p{i}")
        mine = samples[i]
        while not state["stop"]:
            t0 = clock()
            acquire()
            t1 = clock()
            release()
            if state["measuring"]:  # the cycles that end in the measured phase
                mine.append(t1 - t0)
                counts[i] += 1
            warmed[i] = True

    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    warming = clock()
    time.sleep(warmup)
    while not all(warmed) and clock() - warming < WARMUP_BOUND:
        time.sleep(0.05)
    cpu0, started = cpu_s(), clock()
    state["measuring"] = True
    time.sleep(measure)
    state["measuring"] = False
    elapsed, cpu = clock() - started, cpu_s() - cpu0
    state["stop"] = True
    for t in threads:
        t.join()
    del threads
    return many_figures(n, sum(counts), elapsed, cpu, [x for s in samples for x in s], per)


def many_locks(impl: Impl, session: object, base: str, warmup: float, measure: float) -> dict[str, object]:
    """For each N of BENCH_MANY_PATHS: N distinct paths on one client, each with its own loop of
    acquire and release (zklock: asyncio tasks; kazoo: threads, at most BENCH_MANY_THREAD_CAP,
    default 1000): the ``many_<N>_*`` fields."""
    counts = [int(n) for n in (os.environ.get("BENCH_MANY_PATHS") or "16,200,1000,10000").split(",") if n.strip()]
    out: dict[str, object] = {}
    for n in counts:
        if isinstance(impl, Zklock):
            log(f"[{impl.name}] many_locks: {n} paths, an asyncio task and a Lock each, one client...")
            figures = asyncio.run(many_asyncio(session, base, n, warmup, measure))
        elif n > THREAD_CAP:
            out[f"many_{n}_error"] = f"not run: a thread per path, capped at {THREAD_CAP:,} (BENCH_MANY_THREAD_CAP)"
            continue
        else:
            log(f"[{impl.name}] many_locks: {n} paths, a thread and a Lock each, one client...")
            figures = many_threads(impl, session, base, n, warmup, measure)
        log(f"[{impl.name}] many_locks {n}: {figures['cycles_per_s']:.1f} cycles/s")
        out.update({f"many_{n}_{k}": v for k, v in figures.items()})
    return out


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "zklock"
    connect = os.environ.get("ZK_CONNECT")
    if not connect:
        sys.exit("ZK_CONNECT names the server (scripts/bench sets it)")
    impl: Impl = Zklock(connect) if which == "zklock" else Kazoo(connect)
    measure = float(os.environ.get("BENCH_SECONDS", "5"))
    warmup = min(float(os.environ.get("BENCH_WARMUP_SECONDS", "1")), measure)
    base = f"/zklock-bench/{which}-python-{os.getpid()}"
    selected = [w.strip() for w in os.environ.get("BENCH_WORKLOADS", "").split(",") if w.strip()]

    def wanted(name: str) -> bool:
        return not selected or name in selected

    session = impl.connect()
    result: dict[str, object] = {"impl": impl.name}
    nan = math.nan
    figures = dict.fromkeys(
        ["uncontended_cycles_per_s", "acquire_p50_us", "acquire_p99_us", "release_p50_us", "release_p99_us",
         "floor_cycles_per_s"], nan)  # fmt: skip
    if wanted("uncontended"):
        log(f"[{impl.name}] uncontended{', alternating with the raw floor' if which == 'kazoo' else ''}...")
        figures = uncontended(impl, session, base, warmup, measure)
    handoffs = nan
    if wanted("contended"):
        log(f"[{impl.name}] contended, {CONTENDERS} sessions...")
        handoffs = contended(impl, f"{base}/contended", warmup, measure)
    reentrant = nan
    if wanted("reentrant"):
        log(f"[{impl.name}] reentrant...")
        reentrant = impl.reentrant_ns(session, f"{base}/reentrant")
    has_read_write = impl.read_write_lock(session, f"{base}/probe") is not None
    if not has_read_write and (wanted("read") or wanted("read_mostly")):
        log(f"[{impl.name}] no read/write lock: its read figures are null")
    read = dict.fromkeys(
        ["read_cycles_per_s", "read_acquire_p50_us", "read_acquire_p99_us", "read_release_p50_us",
         "read_release_p99_us"], nan)  # fmt: skip
    if wanted("read") and has_read_write:
        log(f"[{impl.name}] uncontended read cycles (read/write lock)...")
        read = read_cycles(impl, session, f"{base}/read", warmup, measure)
    mostly = dict.fromkeys(
        ["read_mostly_ops_per_s", "read_mostly_reader_wait_p50_us", "read_mostly_reader_wait_p99_us",
         "read_mostly_writer_wait_p50_us", "read_mostly_writer_wait_p99_us", "read_mostly_hold_us"], nan)  # fmt: skip
    if wanted("read_mostly") and has_read_write:
        hold = int(os.environ.get("BENCH_HOLD_US", "0")) / 1e6
        log(f"[{impl.name}] read-mostly, {CONTENDERS} sessions, 1 write in {WRITE_ONE_IN}, holds of {hold * 1e3:g} ms...")
        mostly = read_mostly(impl, f"{base}/read-mostly", warmup, measure, hold)
    scaled = scale(impl, session, connect, base) if "scale" in selected else {}  # long: only when named
    if "many_locks" in selected:  # long: only when named
        scaled.update(many_locks(impl, session, base, max(warmup, 1.0), measure))
    impl.close(session)

    result.update(
        {
            "uncontended_cycles_per_s": figures["uncontended_cycles_per_s"],
            "acquire_p50_us": figures["acquire_p50_us"],
            "acquire_p99_us": figures["acquire_p99_us"],
            "release_p50_us": figures["release_p50_us"],
            "release_p99_us": figures["release_p99_us"],
            "handoffs_per_s": handoffs,
            "reentrant_ns": reentrant,
            "floor_cycles_per_s": figures["floor_cycles_per_s"],
            **read,
            **mostly,
            **scaled,
        }
    )
    rounded = {k: (None if isinstance(v, float) and math.isnan(v) else round(v, 1) if isinstance(v, float) else v)
               for k, v in result.items()}  # fmt: skip
    print(json.dumps(rounded, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    main()
