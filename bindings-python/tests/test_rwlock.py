"""The read/write lock (Curator's InterProcessReadWriteLock, node for node), against a real server
with kazoo watching: readers share, a writer is alone, a reader behind a waiting writer waits,
downgrade, the refused upgrade, no orphaned node, lost holds, and order past the sequence limit."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest
from conftest import DEADLINE, Proxy, children, wait_children, wait_until
from kazoo.client import KazooClient

import zklock

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
READ_NODE = re.compile(rf"^_c_{UUID}-__READ__\d{{10}}$")
WRITE_NODE = re.compile(rf"^_c_{UUID}-__WRIT__\d{{10}}$")


class Holder:
    """A thread that takes `side` (for itself, as the sync API does), holds it until `release()`,
    then releases it. `acquired` is set once it holds."""

    def __init__(self, side: zklock.Lock, name: str) -> None:
        self.side = side
        self.name = name
        self.acquired = threading.Event()
        self._go = threading.Event()
        self._done = threading.Event()
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self.side:
                self.acquired.set()
                if not self._go.wait(DEADLINE):
                    raise AssertionError(f"{self.name} was never told to release")
        except BaseException as err:  # reported by release()
            self.error = err
        finally:
            self._done.set()

    def wait_acquired(self) -> None:
        assert self.acquired.wait(DEADLINE), f"{self.name} did not acquire"

    def release(self) -> None:
        self._go.set()
        assert self._done.wait(DEADLINE), f"{self.name} did not finish"
        self._thread.join(DEADLINE)
        if self.error is not None:
            raise self.error


def owners(participants: list[zklock.Participant]) -> list[str]:
    return [p.identity["owner"] if p.identity else "?" for p in participants]


def modes(participants: list[zklock.Participant]) -> list[Optional[str]]:
    return [p.mode for p in participants]


def test_deadlock_error_is_a_runtime_error_of_the_package():
    assert issubclass(zklock.DeadlockError, zklock.ZkLockError)
    assert issubclass(zklock.DeadlockError, RuntimeError)
    assert "DeadlockError" in zklock.__all__ and "ReadWriteLock" in zklock.__all__


def test_sides_are_locks_with_their_mode_and_nothing_is_sent_before_acquiring(client, kazoo, path):
    rw = client.read_write_lock(path, identifier="catalog")
    assert isinstance(rw, zklock.ReadWriteLock)
    assert isinstance(rw.read, zklock.Lock) and isinstance(rw.write, zklock.Lock)
    assert rw.read is rw.read, "one Lock per side, so its holds and on_lost callbacks stay together"
    assert (rw.read.mode, rw.write.mode, client.lock(path + "-mutex").mode) == ("read", "write", "exclusive")
    assert rw.path == rw.read.path == rw.write.path == path
    assert rw.client is client and rw.read.client is client and rw.write.client is client
    assert "mode=read" in repr(rw.read) and path in repr(rw)
    assert not kazoo.exists(path), "made without any ZooKeeper traffic"
    with rw.write:
        [node] = children(kazoo, path)
        assert WRITE_NODE.match(node)
        [participant] = rw.holders()
        assert participant.mode == "write" and participant.identity is not None
        assert participant.identity["identifier"] == "catalog" and participant.identity["lang"] == "python"
    with pytest.raises(zklock.InvalidArgumentError, match="side"):
        rw._side("both")  # type: ignore[arg-type]
    with pytest.raises(zklock.InvalidArgumentError, match="pair's own client and path"):
        zklock.Lock(client, path + "/elsewhere", _side=rw._side("read"))


def test_readers_share(client, zk_connect, kazoo, path):
    rw = client.read_write_lock(path)
    a, b = Holder(rw.read, "reader-a"), Holder(rw.read, "reader-b")
    a.wait_acquired()
    b.wait_acquired()
    nodes = children(kazoo, path)
    assert len(nodes) == 2 and all(READ_NODE.match(node) for node in nodes)
    holders = rw.holders()
    assert modes(holders) == ["read", "read"]
    assert sorted(owners(holders)) == ["thread:reader-a", "thread:reader-b"]
    assert modes(rw.contenders()) == ["read", "read"]
    # A reader of another client, too, gets in at once: try-only succeeds.
    with zklock.Client(zk_connect) as other:
        other_read = other.read_write_lock(path).read
        assert other_read.acquire(blocking=False)
        assert other_read.is_held and len(rw.holders()) == 3
        other_read.release()
    a.release()
    b.release()
    wait_children(kazoo, path, 0)


def test_a_writer_excludes_readers_and_writers(client, zk_connect, kazoo, path):
    rw = client.read_write_lock(path)
    with zklock.Client(zk_connect) as other:
        theirs = other.read_write_lock(path)
        with rw.write:
            [node] = children(kazoo, path)
            assert rw.write.is_held and rw.write.state == "held" and not rw.read.is_held
            assert rw.write.fencing_token == kazoo.get(f"{path}/{node}")[1].czxid
            assert not theirs.read.acquire(blocking=False)
            assert not theirs.write.acquire(blocking=False)
            assert not theirs.read.acquire(timeout=0.2)
            assert not theirs.write.acquire(timeout=0.2)
            assert children(kazoo, path) == [node], "each attempt's node was removed before it returned"
            # Waiters, for reading (another thread of this client) and for writing alike.
            reader = Holder(rw.read, "reader")
            wait_children(kazoo, path, 2)
            writer = Holder(theirs.write, "writer")
            wait_children(kazoo, path, 3)
            assert owners(rw.holders()) == [f"thread:{threading.current_thread().name}"]
            assert not reader.acquired.is_set() and not writer.acquired.is_set()
            assert modes(rw.contenders()) == ["write", "read", "write"]
        reader.wait_acquired()
        assert owners(rw.holders()) == ["thread:reader"] and not writer.acquired.is_set()
        reader.release()
        writer.wait_acquired()
        writer.release()
    wait_children(kazoo, path, 0)


def test_a_late_reader_waits_behind_a_waiting_writer(client, kazoo, path):
    rw = client.read_write_lock(path)
    first = Holder(rw.read, "first-reader")
    first.wait_acquired()
    writer = Holder(rw.write, "writer")
    wait_children(kazoo, path, 2)
    late = Holder(rw.read, "late-reader")
    wait_children(kazoo, path, 3)
    assert modes(rw.contenders()) == ["read", "write", "read"]
    assert owners(rw.holders()) == ["thread:first-reader"]
    assert not late.acquired.is_set(), "a reader behind a waiting writer waits: writers are not starved"
    first.release()
    writer.wait_acquired()
    assert owners(rw.holders()) == ["thread:writer"] and not late.acquired.is_set()
    writer.release()
    late.wait_acquired()
    late.release()
    wait_children(kazoo, path, 0)


def test_downgrade_keeps_out_the_writer_already_waiting_until_the_read_is_released(client, kazoo, path):
    rw = client.read_write_lock(path)
    assert rw.write.acquire()
    [mine] = children(kazoo, path)
    token = rw.write.fencing_token
    waiting = Holder(rw.write, "waiting-writer")
    wait_children(kazoo, path, 2)

    assert rw.read.acquire(blocking=False), "the write holder reads at once"
    [read_node] = [node for node in children(kazoo, path) if "__READ__" in node]
    assert read_node.endswith(mine[-10:]), "a read node of its own, with the write node's sequence"
    assert rw.read.is_held and rw.write.is_held and rw.read.fencing_token == token

    rw.write.release()
    assert not rw.write.is_held and rw.read.is_held and rw.read.state == "held"
    assert not kazoo.exists(f"{path}/{mine}") and kazoo.exists(f"{path}/{read_node}")
    assert owners(rw.holders()) == [f"thread:{threading.current_thread().name}"]
    assert not waiting.acquired.is_set(), "the writer already waiting stays out"
    assert rw.read.acquire(), "a re-entry of the read"
    rw.read.release()
    assert rw.read.is_held

    rw.read.release()
    waiting.wait_acquired()
    assert not kazoo.exists(f"{path}/{read_node}") and not rw.read.is_held
    waiting.release()
    wait_children(kazoo, path, 0)


def test_upgrade_raises_deadlock_error_at_once(client, kazoo, path):
    rw = client.read_write_lock(path)
    with rw.read:
        [node] = children(kazoo, path)
        for attempt in (lambda: rw.write.acquire(), lambda: rw.write.acquire(timeout=30), lambda: rw.write.acquire(False)):
            started = time.monotonic()
            with pytest.raises(zklock.DeadlockError, match="release the read lock first") as raised:
                attempt()
            assert time.monotonic() - started < 1.0
            assert isinstance(raised.value, RuntimeError) and raised.value.path == path
        with pytest.raises(zklock.DeadlockError):
            with rw.write.hold(timeout=5):
                pass
        assert children(kazoo, path) == [node], "no node was created"
        assert rw.read.is_held and not rw.write.is_held
    wait_children(kazoo, path, 0)


def test_upgrade_raises_deadlock_error_in_asyncio_too(client, kazoo, path):
    rw = client.read_write_lock(path)

    async def main() -> None:
        async with rw.read:
            with pytest.raises(zklock.DeadlockError, match=path):
                await rw.write.acquire_async()
            with pytest.raises(zklock.DeadlockError):
                await rw.write.acquire_async(timeout=0)
            assert len(children(kazoo, path)) == 1 and rw.read.is_held
            # The task's re-entry and downgrade rules are per side, as for threads.
            assert await rw.read.acquire_async()
            await rw.read.release_async()
        async with rw.write:
            async with rw.read:  # a downgrade: a read node of its own
                assert len(children(kazoo, path)) == 2

    asyncio.run(main())
    wait_children(kazoo, path, 0)


def test_timeouts_tries_and_cancellation_leave_no_node(client, kazoo, path):
    rw = client.read_write_lock(path)
    writer = Holder(rw.write, "writer")
    writer.wait_acquired()
    [node] = children(kazoo, path)

    assert not rw.read.acquire(timeout=0.1)
    assert not rw.read.acquire(blocking=False)
    assert not rw.write.acquire(timeout=0.1)
    assert not rw.write.acquire(blocking=False)
    with pytest.raises(zklock.LockTimeout):
        with rw.read.hold(timeout=0.1):
            pass
    assert children(kazoo, path) == [node]

    async def main() -> None:
        assert not await rw.read.acquire_async(timeout=0.1)
        assert not await rw.read.acquire_async(timeout=0)
        assert not await rw.write.acquire_async(timeout=0.1)
        with pytest.raises(zklock.LockTimeout):
            async with rw.write.hold(timeout=0.1):
                pass
        assert children(kazoo, path) == [node]
        for side in (rw.read, rw.write):
            task = asyncio.ensure_future(side.acquire_async())
            await asyncio.to_thread(wait_children, kazoo, path, 2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.to_thread(wait_children, kazoo, path, 1)

    asyncio.run(main())
    assert children(kazoo, path) == [node]
    writer.release()
    wait_children(kazoo, path, 0)


def test_asyncio_readers_share_and_a_writer_waits_for_them(client, kazoo, path):
    rw = client.read_write_lock(path)

    async def main() -> None:
        both_in = asyncio.Event()
        writer_queued = asyncio.Event()
        inside: list[str] = []

        async def reader(name: str) -> None:
            async with rw.read:
                inside.append(name)
                if len(inside) == 2:
                    both_in.set()
                await asyncio.wait_for(both_in.wait(), DEADLINE)  # each waits for the other: shared
                # Both stay until the writer has queued. One of them watches for its node: two
                # watchers raced, and the first to see 3 children left (taking its node) before
                # the other looked, which then waited for 3 forever.
                if name == "a":
                    await asyncio.to_thread(wait_children, kazoo, path, 3)
                    writer_queued.set()
                await asyncio.wait_for(writer_queued.wait(), DEADLINE)
                inside.remove(name)

        async def writer() -> None:
            await asyncio.wait_for(both_in.wait(), DEADLINE)
            async with rw.write:
                assert inside == [], "the writer got in only once both readers were out"
                assert modes(await rw.holders_async()) == ["write"]
                assert modes(await rw.contenders_async()) == ["write"]

        await asyncio.gather(reader("a"), reader("b"), writer())

    asyncio.run(main())
    wait_children(kazoo, path, 0)


def test_a_mutex_and_a_read_write_lock_refuse_to_share_a_path(client, kazoo, path):
    rw = client.read_write_lock(path)
    with rw.read:
        [node] = children(kazoo, path)
        mutex = client.lock(path)
        with pytest.raises(zklock.InvalidArgumentError, match=r"a mutex cannot use this path.*read node") as raised:
            mutex.acquire(timeout=5)
        assert node in str(raised.value) and isinstance(raised.value, ValueError)
        assert children(kazoo, path) == [node], "refused before any node was created"
    wait_children(kazoo, path, 0)

    mutex = client.lock(path)
    with mutex:
        [node] = children(kazoo, path)
        for side in (rw.read, rw.write):
            with pytest.raises(zklock.InvalidArgumentError, match=r"a read/write lock cannot use this path.*mutex"):
                side.acquire(timeout=5)
        assert children(kazoo, path) == [node]
        assert [p.mode for p in mutex.contenders()] == ["exclusive"]
    wait_children(kazoo, path, 0)


def test_session_expiry_loses_both_sides(kazoo, path, proxy: Proxy):
    client = zklock.Client(proxy.address, session_timeout=2.0)
    try:
        rw = client.read_write_lock(path)
        lost: dict[str, list[str]] = {"read": [], "write": []}
        both_lost = threading.Event()

        def on_lost(side: str) -> "object":
            def record(reason: str) -> None:
                lost[side].append(reason)
                if lost["read"] and lost["write"]:
                    both_lost.set()

            return record

        rw.read.on_lost(on_lost("read"))
        rw.write.on_lost(on_lost("write"))
        assert rw.write.acquire() and rw.read.acquire()  # a downgrade: a write node and a read node
        nodes = children(kazoo, path)
        assert len(nodes) == 2

        proxy.command("stall")  # the client hears nothing; the server expires the session
        assert both_lost.wait(timeout=15), f"on_lost did not fire for both sides: {lost}"
        for side in (rw.read, rw.write):
            assert not side.is_held and side.state == "lost"
            with pytest.raises(zklock.LockLostError, match=path):
                side.fencing_token
            with pytest.raises(zklock.LockLostError):
                side.sequence
        with pytest.raises(zklock.LockLostError):
            rw.read.acquire()  # no re-entry into a lost hold
        wait_until(lambda: not set(nodes) & set(children(kazoo, path)), "the server to expire the session")
        for side in (rw.read, rw.write):
            with pytest.raises(zklock.LockLostError, match=path):
                side.release()
            assert side.state is None and side.fencing_token is None

        proxy.command("pass")  # the next acquisition starts a new session
        assert rw.read.acquire(timeout=10)
        assert rw.read.is_held and rw.read.fencing_token is not None
        rw.read.release()
    finally:
        client.close()
    wait_children(kazoo, path, 0)


# ------------------------------------------------------------------ past the sequence limit

LIMIT_PATH = "/locks/rw-overflow"
NEAR_LIMIT = 2_147_483_644
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def near_limit_server(tmp_path: Path) -> Iterator[str]:
    """A server of its own whose snapshot puts LIMIT_PATH's sequence counter just below 2^31, as
    the Rust tests' testkit makes one (scripts/zk config, seed-seq, exec-server). The server
    watches its stdin: it stops when this process lets go of the pipe, even if pytest dies."""
    zk = str(REPO / "scripts" / "zk")
    directory = tmp_path / "server"
    port = _free_port()
    subprocess.run(["bash", zk, "config", str(directory), "1", str(port)], check=True, capture_output=True)
    subprocess.run(
        ["bash", zk, "seed-seq", str(directory / "data"), LIMIT_PATH, str(NEAR_LIMIT)], check=True, capture_output=True
    )
    env = {k: v for k, v in os.environ.items() if k != "ZK_PARENT_PID"}
    env.update(ZK_JVM_FLAGS="-Dzookeeper.digest.enabled=false", ZK_WATCH_STDIN="1", ZK_FAST_JIT="1")
    server = subprocess.Popen(
        ["bash", zk, "exec-server", str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        connect = f"127.0.0.1:{port}"
        probe = KazooClient(hosts=connect)
        try:
            probe.start(timeout=60)
        except Exception:
            log = directory / "server.log"
            raise AssertionError(f"the seeded server did not start:\n{log.read_text() if log.exists() else ''}")
        probe.stop()
        probe.close()
        yield connect
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.terminate()
        server.wait(timeout=30)


def test_order_past_the_sequence_limit(near_limit_server):
    """Past ZooKeeper's 32-bit sequence limit the queue is ordered by creation zxid: readers and
    writers still get in in arrival order, readers together, a writer alone."""
    observer = KazooClient(hosts=near_limit_server)
    observer.start(timeout=15)
    try:
        with zklock.Client(near_limit_server) as client:
            rw = client.read_write_lock(LIMIT_PATH)
            assert rw.write.acquire()
            assert rw.write.sequence == NEAR_LIMIT, "the snapshot put the counter just below the limit"
            plan = ["write", "read", "read", "write", "read", "write", "read"]
            holders = []
            for i, mode in enumerate(plan):
                holders.append(Holder(rw.read if mode == "read" else rw.write, f"c{i}"))
                wait_children(observer, LIMIT_PATH, i + 2)
            queue = rw.contenders()
            sequences = [p.sequence for p in queue]
            assert sequences.count(2**31 - 1) > 1, f"the queue must cross the limit: {sequences}"
            assert owners(queue) == ["thread:MainThread"] + [f"thread:c{i}" for i in range(len(plan))]
            assert modes(queue) == ["write", *plan]

            rw.write.release()
            # Each group in arrival order: a writer alone, or the readers between two writers.
            for group in ([0], [1, 2], [3], [4], [5], [6]):
                for i in group:
                    holders[i].wait_acquired()
                assert sorted(owners(rw.holders())) == sorted(f"thread:c{i}" for i in group)
                later = [h.name for h in holders[group[-1] + 1 :] if h.acquired.is_set()]
                assert later == [], f"{later} got in before their turn"
                for i in group:
                    holders[i].release()
            wait_children(observer, LIMIT_PATH, 0)
    finally:
        observer.stop()
        observer.close()
