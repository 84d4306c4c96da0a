"""zklock beside kazoo's lock recipes (kazoo 2.11, kazoo.recipe.lock) on one lock path, against a
real server: each side respects the other's nodes in the mutex and in the read/write lock, the
queue is first come, first served across the two, zklock's contenders()/holders() report kazoo's
nodes with their modes, and a zklock downgrade keeps a waiting kazoo writer out.

kazoo names its nodes `<32 hex>__lock__<seq>` (Lock and WriteLock) and `<32 hex>__rlock__<seq>`
(ReadLock); its users sharing a path with zklock (Curator's names) pass `extra_lock_patterns`:
`["-lock-"]` to a Lock beside zklock's mutex, `["__WRIT__"]` to a ReadLock and `["__READ__",
"__WRIT__"]` to a WriteLock beside zklock's read/write lock. zklock counts kazoo's `__lock__` as
exclusive in a mutex and as a writer in a read/write lock, and `__rlock__` as a reader.

Every kazoo contender has a session of its own (the `peers` fixture ends them after the test).
That a waiter waits is checked once it has decided to: when the server lists its session's watch
on a node of the lock (the `wchp` four-letter word).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any, Callable, Iterator, Optional

import pytest
from conftest import DEADLINE, NODE_NAME, children, session_of, wait_children, wait_until, watches
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout, NoNodeError
from kazoo.recipe.lock import Lock as KazooLock
from kazoo.recipe.lock import ReadLock as KazooReadLock
from kazoo.recipe.lock import WriteLock as KazooWriteLock

import zklock

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
READ_NODE = re.compile(rf"^_c_{UUID}-__READ__\d{{10}}$")
WRITE_NODE = re.compile(rf"^_c_{UUID}-__WRIT__\d{{10}}$")
KAZOO_LOCK_NODE = re.compile(r"^[0-9a-f]{32}__lock__\d{10}$")
KAZOO_READ_NODE = re.compile(r"^[0-9a-f]{32}__rlock__\d{10}$")

# What a kazoo user passes to respect zklock's nodes (Curator's names).
BESIDE_MUTEX = ["-lock-"]
READ_BESIDE_RW = ["__WRIT__"]
WRITE_BESIDE_RW = ["__READ__", "__WRIT__"]

# The bound of a negative assertion: how long a timed acquisition that must fail waits.
SHORT = 0.5


# ------------------------------------------------------------------------------------ helpers


class Contender:
    """A thread that acquires (blocking), holds until `release()`, then releases: for a zklock
    side (the owner is this thread) or a kazoo lock. Its name goes into `order` when it holds.
    `session` is the ZooKeeper session its node belongs to."""

    def __init__(
        self,
        name: str,
        session: int,
        acquire: Callable[[], Any],
        release: Callable[[], Any],
        order: list[str],
        cancel: Optional[Callable[[], Any]] = None,
    ) -> None:
        self.name = name
        self.session = session
        self._acquire, self._release, self._cancel = acquire, release, cancel
        self._order = order
        self.acquired = threading.Event()
        self._go = threading.Event()
        self._done = threading.Event()
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def _run(self) -> None:
        try:
            if not self._acquire():
                raise AssertionError(f"{self.name}: acquire() returned False")
            self._order.append(self.name)
            self.acquired.set()
            if not self._go.wait(DEADLINE):
                raise AssertionError(f"{self.name} was never told to release")
            self._release()
        except BaseException as err:  # reported by release()
            self.error = err
        finally:
            self._done.set()

    def wait_acquired(self) -> None:
        if not self.acquired.wait(DEADLINE):
            raise AssertionError(f"{self.name} did not acquire" + (f": {self.error!r}" if self.error else ""))

    def release(self) -> None:
        self._go.set()
        assert self._done.wait(DEADLINE), f"{self.name} did not finish"
        self._thread.join(DEADLINE)
        if self.error is not None:
            raise self.error

    def stop(self) -> bool:
        """After the test: a holder releases, a kazoo waiter gives up (its node goes). A zklock
        waiter cannot be told to: it ends when its client closes. Returns whether it ends now."""
        if self._cancel is not None and not self.acquired.is_set():
            self._cancel()
        self._go.set()
        return self.acquired.is_set() or self._cancel is not None

    def join(self) -> None:
        self._done.wait(DEADLINE)


class Peers:
    """The test's other contenders: kazoo locks on sessions of their own, zklock clients, and
    threads that hold; all ended after the test, so that even a failed test leaves no node."""

    def __init__(self, zk_connect: str) -> None:
        self.zk_connect = zk_connect
        self.order: list[str] = []
        self._sessions: list[KazooClient] = []
        self._clients: list[zklock.Client] = []
        self._contenders: list[Contender] = []

    def kazoo(self, kind: type[KazooLock], path: str, identifier: str, patterns: list[str]) -> KazooLock:
        """A kazoo Lock, ReadLock or WriteLock on a new session."""
        session = KazooClient(hosts=self.zk_connect)
        session.start(timeout=15)
        self._sessions.append(session)
        return kind(session, path, identifier, extra_lock_patterns=patterns)

    def zklock_client(self) -> zklock.Client:
        """Another zklock client (a session of its own)."""
        other = zklock.Client(self.zk_connect)
        self._clients.append(other)
        return other

    def hold(self, lock: Any, name: str, timeout: Optional[float] = None) -> Contender:
        """A thread that takes `lock` (a zklock side or a kazoo lock), blocking (for at most
        `timeout` s if given), and holds it."""
        cancel = lock.cancel if isinstance(lock, KazooLock) else None
        acquire = lock.acquire if timeout is None else functools.partial(lock.acquire, timeout=timeout)
        contender = Contender(name, session_of(lock.client), acquire, lock.release, self.order, cancel)
        self._contenders.append(contender)
        return contender

    def wait_watching(self, waiter: Contender, path: str, node: str) -> None:
        """Waits until `waiter` watches `node` of the lock at `path`: its sign that it has
        decided to wait (failing at once if it takes the lock instead)."""

        def watching() -> bool:
            if waiter.acquired.is_set() or waiter.error is not None:
                raise AssertionError(f"{waiter.name} took the lock instead of waiting for {node}: {waiter.error!r}")
            found = watches(self.zk_connect)
            # Without four-letter words on this ensemble the checks after this stand alone.
            return found is None or waiter.session in found.get(f"{path}/{node}", ())

        wait_until(watching, f"{waiter.name} (session {waiter.session:#x}) to watch {node} of {path}")

    def close(self) -> list[Contender]:
        """Ends them all; returns the zklock waiters still waiting on the test's own client."""
        ending = [contender for contender in self._contenders if contender.stop()]
        for contender in ending:
            contender.join()
        for session in self._sessions:
            session.stop()
            session.close()
        for other in self._clients:
            other.close()
        return [contender for contender in self._contenders if not contender.done]


@pytest.fixture
def peers(zk_connect: str, kazoo: KazooClient, path: str, client: zklock.Client) -> Iterator[Peers]:
    p = Peers(zk_connect)
    yield p
    waiting = p.close()
    if waiting or children(kazoo, path):
        # A failed test left holds or waiters of the test's zklock client: closing it (idempotent,
        # so the client fixture's close does nothing more) deletes their nodes at once.
        client.close()
        for contender in waiting:
            contender.join()
    # kazoo's ensure_path made the lock path persistent (zklock's are containers): remove it.
    try:
        wait_children(kazoo, path, 0)
        kazoo.delete(path)
    except NoNodeError:
        pass


def try_zklock(side: zklock.Lock, **how: Any) -> bool:
    """A zklock acquisition that must fail (blocking=False or a timeout); released if it did not,
    so that the test's failure leaves the lock as it was."""
    got = side.acquire(**how)
    if got:
        side.release()
    return got


def try_kazoo(lock: KazooLock) -> bool:
    """A non-blocking kazoo acquisition, released if it succeeded."""
    got = bool(lock.acquire(blocking=False))
    if got:
        lock.release()
    return got


def modes(participants: list[zklock.Participant]) -> list[Optional[str]]:
    return [p.mode for p in participants]


def nodes(participants: list[zklock.Participant]) -> list[str]:
    return [p.node for p in participants]


# -------------------------------------------------------------------------------------- mutex


def test_a_kazoo_lock_waits_while_zklock_holds_the_mutex(client, kazoo, path, peers):
    lock = client.lock(path)
    assert lock.acquire()
    [mine] = children(kazoo, path)
    theirs = peers.kazoo(KazooLock, path, "kazoo", BESIDE_MUTEX)
    assert not try_kazoo(theirs), "kazoo's Lock took the mutex zklock holds"
    with pytest.raises(LockTimeout):  # kazoo's timed acquire raises rather than returning False
        theirs.acquire(timeout=SHORT)
    assert children(kazoo, path) == [mine], "kazoo removed its attempts' nodes"

    waiter = peers.hold(theirs, "kazoo")
    wait_children(kazoo, path, 2)
    peers.wait_watching(waiter, path, mine)
    assert not waiter.acquired.is_set(), "kazoo's Lock took the mutex zklock holds"
    lock.release()
    waiter.wait_acquired()
    [node] = children(kazoo, path)
    assert KAZOO_LOCK_NODE.match(node), node
    waiter.release()
    wait_children(kazoo, path, 0)


def test_zklock_waits_while_a_kazoo_lock_holds_the_mutex(client, kazoo, path, peers):
    theirs = peers.kazoo(KazooLock, path, "kazoo", BESIDE_MUTEX)
    assert theirs.acquire(timeout=DEADLINE)
    [node] = children(kazoo, path)
    assert KAZOO_LOCK_NODE.match(node), node

    lock = client.lock(path)
    assert not try_zklock(lock, blocking=False), "zklock took the mutex a kazoo Lock holds"
    assert not try_zklock(lock, timeout=SHORT), "zklock took the mutex a kazoo Lock holds"
    assert children(kazoo, path) == [node], "zklock removed its attempts' nodes"

    waiter = peers.hold(lock, "zklock", timeout=DEADLINE)  # a timed acquisition, that succeeds
    wait_children(kazoo, path, 2)
    peers.wait_watching(waiter, path, node)
    assert not waiter.acquired.is_set(), "zklock took the mutex a kazoo Lock holds"
    theirs.release()
    waiter.wait_acquired()
    [mine] = children(kazoo, path)
    assert NODE_NAME.match(mine), mine
    assert not try_kazoo(theirs), "kazoo's Lock took the mutex zklock holds"
    waiter.release()
    wait_children(kazoo, path, 0)


def test_the_mutex_queue_is_first_come_first_served_across_zklock_and_kazoo(client, kazoo, path, peers):
    other = peers.zklock_client()
    plan = [
        ("kazoo-0", peers.kazoo(KazooLock, path, "kazoo-0", BESIDE_MUTEX)),
        ("zklock-1", client.lock(path)),
        ("kazoo-2", peers.kazoo(KazooLock, path, "kazoo-2", BESIDE_MUTEX)),
        ("zklock-3", other.lock(path)),
    ]
    contenders: list[Contender] = []
    queue: list[str] = []
    for i, (name, lock) in enumerate(plan):
        contenders.append(peers.hold(lock, name))
        queue = wait_children(kazoo, path, i + 1)
        if i == 0:
            contenders[0].wait_acquired()
        else:  # queued, and waiting for the one ahead
            peers.wait_watching(contenders[i], path, queue[i - 1])
    forms = [bool(KAZOO_LOCK_NODE.match(n)) for n in queue], [bool(NODE_NAME.match(n)) for n in queue]
    assert forms == ([True, False, True, False], [False, True, False, True]), queue

    for i, contender in enumerate(contenders):
        contender.wait_acquired()
        later = [c.name for c in contenders[i + 1 :] if c.acquired.is_set()]
        assert later == [], f"{later} got the mutex while {contender.name} held it"
        contender.release()
    assert peers.order == [name for name, _ in plan]
    wait_children(kazoo, path, 0)


def test_contenders_and_holder_report_kazoo_nodes_in_a_mutex(client, kazoo, path, peers):
    first = peers.kazoo(KazooLock, path, "kazoo-first", BESIDE_MUTEX)
    assert first.acquire(timeout=DEADLINE)
    lock = client.lock(path)
    waiter = peers.hold(lock, "zklock")
    wait_children(kazoo, path, 2)
    last = peers.kazoo(KazooLock, path, "kazoo-last", BESIDE_MUTEX)
    kazoo_waiter = peers.hold(last, "kazoo-last")
    queue = wait_children(kazoo, path, 3)
    peers.wait_watching(waiter, path, queue[0])
    peers.wait_watching(kazoo_waiter, path, queue[1])

    contenders = lock.contenders()
    assert nodes(contenders) == queue
    assert modes(contenders) == ["exclusive", "exclusive", "exclusive"], "kazoo's __lock__ is exclusive in a mutex"
    assert [p.sequence for p in contenders] == [int(n[-10:]) for n in queue]
    assert [p.data for p in contenders][::2] == [b"kazoo-first", b"kazoo-last"]
    assert contenders[0].identity is None and contenders[1].identity is not None
    assert contenders[0].fencing_token == kazoo.get(f"{path}/{queue[0]}")[1].czxid
    holder = lock.holder()
    assert holder is not None and holder.node == queue[0], f"the kazoo Lock holds, not {holder and holder.node}"
    assert nodes(lock.holders()) == [queue[0]]

    first.release()
    waiter.wait_acquired()
    assert nodes(lock.holders()) == [queue[1]]
    waiter.release()
    kazoo_waiter.wait_acquired()
    assert nodes(lock.holders()) == [queue[2]] and modes(lock.holders()) == ["exclusive"]
    kazoo_waiter.release()
    wait_children(kazoo, path, 0)


# --------------------------------------------------------------------------- read/write lock


def test_zklock_and_kazoo_readers_share(client, kazoo, path, peers):
    rw = client.read_write_lock(path)
    assert rw.read.acquire(blocking=False)
    theirs = peers.kazoo(KazooReadLock, path, "kazoo-reader", READ_BESIDE_RW)
    assert theirs.acquire(blocking=False), "a kazoo ReadLock waited for a zklock reader"
    second = peers.kazoo(KazooReadLock, path, "kazoo-reader-2", READ_BESIDE_RW)
    kazoo_reader = peers.hold(second, "kazoo-reader-2")
    kazoo_reader.wait_acquired()
    # A zklock reader of another session behind the kazoo readers, too.
    other = peers.zklock_client().read_write_lock(path)
    assert other.read.acquire(blocking=False), "a zklock reader waited for kazoo readers"
    queue = children(kazoo, path)
    assert len(queue) == 4 and READ_NODE.match(queue[0]) and READ_NODE.match(queue[3])
    assert KAZOO_READ_NODE.match(queue[1]) and KAZOO_READ_NODE.match(queue[2]), queue

    other.read.release()
    kazoo_reader.release()
    theirs.release()
    rw.read.release()
    wait_children(kazoo, path, 0)


def test_a_zklock_reader_stays_out_while_a_kazoo_write_lock_holds(client, kazoo, path, peers):
    writer = peers.kazoo(KazooWriteLock, path, "kazoo-writer", WRITE_BESIDE_RW)
    assert writer.acquire(timeout=DEADLINE)
    [node] = children(kazoo, path)
    rw = client.read_write_lock(path)
    assert not try_zklock(rw.read, blocking=False), "a zklock reader took the lock while a kazoo WriteLock held it"
    assert not try_zklock(rw.read, timeout=SHORT), "a zklock reader took the lock while a kazoo WriteLock held it"
    assert children(kazoo, path) == [node], "zklock removed its attempts' nodes"

    reader = peers.hold(rw.read, "zklock-reader", timeout=DEADLINE)  # a timed acquisition, that succeeds
    wait_children(kazoo, path, 2)
    peers.wait_watching(reader, path, node)
    assert not reader.acquired.is_set(), "a zklock reader took the lock while a kazoo WriteLock held it"
    writer.release()
    reader.wait_acquired()
    assert not try_kazoo(writer), "the kazoo WriteLock took the lock from a zklock reader"
    reader.release()
    wait_children(kazoo, path, 0)


def test_a_zklock_writer_stays_out_while_a_kazoo_write_lock_holds(client, kazoo, path, peers):
    writer = peers.kazoo(KazooWriteLock, path, "kazoo-writer", WRITE_BESIDE_RW)
    assert writer.acquire(timeout=DEADLINE)
    [node] = children(kazoo, path)
    rw = client.read_write_lock(path)
    assert not try_zklock(rw.write, blocking=False), "a zklock writer took the lock while a kazoo WriteLock held it"
    assert not try_zklock(rw.write, timeout=SHORT), "a zklock writer took the lock while a kazoo WriteLock held it"
    assert children(kazoo, path) == [node]

    zk_writer = peers.hold(rw.write, "zklock-writer")
    wait_children(kazoo, path, 2)
    peers.wait_watching(zk_writer, path, node)
    assert not zk_writer.acquired.is_set(), "a zklock writer took the lock while a kazoo WriteLock held it"
    writer.release()
    zk_writer.wait_acquired()
    assert not try_kazoo(writer), "the kazoo WriteLock took the lock from a zklock writer"
    zk_writer.release()
    wait_children(kazoo, path, 0)


def test_a_kazoo_write_lock_waits_for_zklock_readers(client, kazoo, path, peers):
    rw = client.read_write_lock(path)
    other = peers.zklock_client().read_write_lock(path)
    assert rw.read.acquire(blocking=False) and other.read.acquire(blocking=False)
    writer = peers.kazoo(KazooWriteLock, path, "kazoo-writer", WRITE_BESIDE_RW)
    assert not try_kazoo(writer), "a kazoo WriteLock took the lock zklock readers hold"
    queue = children(kazoo, path)
    assert len(queue) == 2

    waiter = peers.hold(writer, "kazoo-writer")
    wait_children(kazoo, path, 3)
    peers.wait_watching(waiter, path, queue[1])
    other.read.release()  # the reader it watched: it looks again, and waits for the other
    peers.wait_watching(waiter, path, queue[0])
    assert not waiter.acquired.is_set(), "a kazoo WriteLock took the lock a zklock reader holds"
    rw.read.release()
    waiter.wait_acquired()
    assert not try_zklock(rw.read, blocking=False), "a zklock reader took the lock a kazoo WriteLock holds"
    waiter.release()
    wait_children(kazoo, path, 0)


def test_kazoo_readers_and_writers_wait_for_a_zklock_writer(client, kazoo, path, peers):
    rw = client.read_write_lock(path)
    assert rw.write.acquire(blocking=False)
    [mine] = children(kazoo, path)
    reader = peers.kazoo(KazooReadLock, path, "kazoo-reader", READ_BESIDE_RW)
    writer = peers.kazoo(KazooWriteLock, path, "kazoo-writer", WRITE_BESIDE_RW)
    assert not try_kazoo(reader), "a kazoo ReadLock took the lock a zklock writer holds"
    assert not try_kazoo(writer), "a kazoo WriteLock took the lock a zklock writer holds"

    kazoo_reader = peers.hold(reader, "kazoo-reader")
    queue = wait_children(kazoo, path, 2)
    peers.wait_watching(kazoo_reader, path, mine)
    kazoo_writer = peers.hold(writer, "kazoo-writer")
    queue = wait_children(kazoo, path, 3)
    peers.wait_watching(kazoo_writer, path, queue[1])
    assert not kazoo_reader.acquired.is_set(), "a kazoo ReadLock took the lock a zklock writer holds"
    rw.write.release()
    kazoo_reader.wait_acquired()
    assert not kazoo_writer.acquired.is_set()
    kazoo_reader.release()
    kazoo_writer.wait_acquired()
    kazoo_writer.release()
    wait_children(kazoo, path, 0)


def test_a_zklock_writer_waits_behind_kazoo_readers(client, kazoo, path, peers):
    first = peers.kazoo(KazooReadLock, path, "kazoo-reader-1", READ_BESIDE_RW)
    second = peers.kazoo(KazooReadLock, path, "kazoo-reader-2", READ_BESIDE_RW)
    assert first.acquire(blocking=False) and second.acquire(blocking=False)
    queue = children(kazoo, path)
    rw = client.read_write_lock(path)
    assert not try_zklock(rw.write, blocking=False), "a zklock writer took the lock kazoo readers hold"

    writer = peers.hold(rw.write, "zklock-writer")
    wait_children(kazoo, path, 3)
    peers.wait_watching(writer, path, queue[1])
    second.release()  # the reader it watched: it looks again, and waits for the first
    peers.wait_watching(writer, path, queue[0])
    assert not writer.acquired.is_set(), "a zklock writer took the lock a kazoo reader holds"
    first.release()
    writer.wait_acquired()
    assert not try_kazoo(first), "a kazoo ReadLock took the lock a zklock writer holds"
    writer.release()
    wait_children(kazoo, path, 0)


def test_a_kazoo_reader_behind_a_waiting_zklock_writer_waits(client, kazoo, path, peers):
    """Writers are not starved, on kazoo's side too: it respects zklock's waiting write node."""
    rw = client.read_write_lock(path)
    assert rw.read.acquire(blocking=False)
    [mine] = children(kazoo, path)
    other = peers.zklock_client()
    writer = peers.hold(other.read_write_lock(path).write, "zklock-writer")
    queue = wait_children(kazoo, path, 2)
    peers.wait_watching(writer, path, mine)

    late = peers.kazoo(KazooReadLock, path, "late-kazoo-reader", READ_BESIDE_RW)
    assert not try_kazoo(late), "a kazoo reader went ahead of a waiting zklock writer"
    reader = peers.hold(late, "late-kazoo-reader")
    wait_children(kazoo, path, 3)
    peers.wait_watching(reader, path, queue[1])
    assert not reader.acquired.is_set(), "a kazoo reader went ahead of a waiting zklock writer"
    rw.read.release()
    writer.wait_acquired()
    assert not reader.acquired.is_set(), "a kazoo reader took the lock a zklock writer holds"
    writer.release()
    reader.wait_acquired()
    reader.release()
    wait_children(kazoo, path, 0)


def test_holders_and_contenders_report_kazoo_nodes_in_a_read_write_lock(client, kazoo, path, peers):
    kazoo_reader = peers.kazoo(KazooReadLock, path, "kazoo-reader", READ_BESIDE_RW)
    assert kazoo_reader.acquire(blocking=False)
    rw = client.read_write_lock(path)
    assert rw.read.acquire(blocking=False)
    kazoo_writer = peers.kazoo(KazooWriteLock, path, "kazoo-writer", WRITE_BESIDE_RW)
    waiting_writer = peers.hold(kazoo_writer, "kazoo-writer")
    queue = wait_children(kazoo, path, 3)
    peers.wait_watching(waiting_writer, path, queue[1])
    other = peers.zklock_client()
    zk_writer = peers.hold(other.read_write_lock(path).write, "zklock-writer")
    queue = wait_children(kazoo, path, 4)
    peers.wait_watching(zk_writer, path, queue[2])
    assert KAZOO_READ_NODE.match(queue[0]) and READ_NODE.match(queue[1]), queue
    assert KAZOO_LOCK_NODE.match(queue[2]) and WRITE_NODE.match(queue[3]), queue

    for contenders in (rw.contenders(), rw.read.contenders(), rw.write.contenders()):
        assert nodes(contenders) == queue
        assert modes(contenders) == ["read", "read", "write", "write"], "kazoo's __rlock__ reads, __lock__ writes"
        assert [p.sequence for p in contenders] == [int(n[-10:]) for n in queue]
        assert (contenders[0].data, contenders[2].data) == (b"kazoo-reader", b"kazoo-writer")
        assert contenders[0].identity is None and contenders[2].identity is None
    holders = rw.holders()
    assert nodes(holders) == queue[:2], "the kazoo reader and the zklock reader hold together"
    assert modes(holders) == ["read", "read"]

    kazoo_reader.release()
    rw.read.release()
    waiting_writer.wait_acquired()
    holders = rw.holders()
    assert nodes(holders) == [queue[2]] and modes(holders) == ["write"], "the kazoo WriteLock holds"
    holder = rw.write.holder()
    assert holder is not None and holder.node == queue[2]
    assert modes(rw.contenders()) == ["write", "write"]
    waiting_writer.release()
    zk_writer.wait_acquired()
    zk_writer.release()
    wait_children(kazoo, path, 0)


# --------------------------------------------------------------------------------- downgrade


def test_downgrade_keeps_a_waiting_kazoo_write_lock_out_until_the_read_is_released(
    client, kazoo, path, peers
):
    rw = client.read_write_lock(path)
    assert rw.write.acquire()
    [mine] = children(kazoo, path)
    writer = peers.kazoo(KazooWriteLock, path, "kazoo-writer", WRITE_BESIDE_RW)
    waiting = peers.hold(writer, "kazoo-writer")
    wait_children(kazoo, path, 2)
    peers.wait_watching(waiting, path, mine)

    assert rw.read.acquire(blocking=False), "the write holder reads at once"
    rw.write.release()
    assert rw.read.is_held and not rw.write.is_held
    queue = children(kazoo, path)
    assert len(queue) == 2, queue
    [reading] = [n for n in queue if n.startswith("_c_")]
    assert int(reading[-10:]) == int(mine[-10:]), "the downgraded reader keeps its write node's place"
    # The kazoo writer watches what zklock reads on now (after the write node went, if it did).
    peers.wait_watching(waiting, path, reading)
    assert not waiting.acquired.is_set(), "the kazoo WriteLock already waiting took the lock from the downgraded reader"
    # And a reader arriving now queues behind that waiting writer, kazoo's as zklock's.
    late = peers.kazoo(KazooReadLock, path, "late-kazoo-reader", READ_BESIDE_RW)
    assert not try_kazoo(late), "a kazoo reader went ahead of the kazoo writer waiting"
    assert not try_zklock(peers.zklock_client().read_write_lock(path).read, blocking=False), (
        "a zklock reader went ahead of the kazoo writer waiting"
    )

    rw.read.release()
    waiting.wait_acquired()
    assert kazoo.exists(f"{path}/{reading}") is None
    waiting.release()
    wait_children(kazoo, path, 0)


def test_a_kazoo_reader_shares_with_a_downgraded_zklock_reader_when_no_writer_waits(client, kazoo, path, peers):
    rw = client.read_write_lock(path)
    assert rw.write.acquire()
    [mine] = children(kazoo, path)
    reader = peers.kazoo(KazooReadLock, path, "kazoo-reader", READ_BESIDE_RW)
    assert not try_kazoo(reader), "a kazoo ReadLock took the lock a zklock writer holds"

    assert rw.read.acquire(blocking=False)
    rw.write.release()
    assert rw.read.is_held
    [reading] = children(kazoo, path)
    assert reader.acquire(blocking=False), f"a kazoo ReadLock waited for the downgraded zklock reader ({reading})"
    assert READ_NODE.match(reading) and int(reading[-10:]) == int(mine[-10:]), (reading, mine)
    holders = rw.holders()
    assert len(holders) == 2 and modes(holders) == ["read", "read"], holders
    reader.release()
    rw.read.release()
    wait_children(kazoo, path, 0)
