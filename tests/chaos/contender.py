"""Chaos soak contender in Python (the orchestrator's fixed contender protocol), on asyncio.

    python contender.py --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS
                        [--client zklock|kazoo] [--op-sleep-ms N] [--idle-ms N]
                        [--sasl-digest USER:PASSWORD]

One client (zklock's, language "python"; or kazoo 2.11's recipes, language "kazoo", a peer), one
TCP connection to the fenced resource; loops until SIGTERM (then: close the client so its nodes
go, exit 0). Exit 3 if the resource connection drops. Cancel is asyncio's own: the acquisition's
task is cancelled (kazoo: Lock.cancel() on its blocked thread). Each iteration makes fresh lock
objects, so a lost notification always belongs to the hold of the iteration that registered it.

zklock: Lock.on_lost and Lock.state say a hold is lost. One write hold in 3 (not pinned)
downgrades: the read side with the same owner (the task), DOWNGRADE, the write side released,
a READ or two, END.

kazoo: Lock(extra_lock_patterns=["-lock-"]) on the mutex, ReadLock(["__WRIT__"]) and
WriteLock(["__READ__", "__WRIT__"]) on the read/write lock, beside zklock's and Curator's nodes.
kazoo says nothing to a lock about its session, so this is what its docs advise: a connection
state listener, where SUSPENDED or LOST ends every hold (lost, reason SUSPENDED or LOST), as the
Curator contender does. The fencing token is the lock node's czxid, read (with the proof that the
node is still this session's) once acquire returned. A failed or cancelled acquisition deletes its
node until that works (kazoo's own clean-up is best effort, and a node left by a live session
would block the path for good).

--sasl-digest (the soak's servers require SASL): every connection authenticates with SASL
DIGEST-MD5 as USER, through ``sasl_options`` (zklock's and kazoo's, in the same words; kazoo needs
pure-sasl).

Zombies (both clients): one write hold in 10 (one pinned write hold in 2) ignores its loss. It
says LOST as soon as it learns it (that promise is judged as ever), waits out the fault (the rest
of its pinned time, or a session timeout), then writes anyway with its old token (ZOMBIE-WRITE,
once or twice): the fenced resource must refuse it if any hold on the path has begun since.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from typing import Dict, Optional

import zklock

try:  # only for --client kazoo
    from kazoo.client import KazooClient
    from kazoo.exceptions import (
        CancelledError as KazooCancelled,
        KazooException,
        LockTimeout,
        NoNodeError,
        SessionExpiredError,
    )
    from kazoo.protocol.states import KazooState
    from kazoo.recipe.lock import Lock as KazooMutex, ReadLock as KazooReadLock, WriteLock as KazooWriteLock
except ImportError:  # pragma: no cover
    KazooClient = None

MUTEX_PATH = "/chaos/mutex"
RW_PATH = "/chaos/rw"
PINNED_OP_INTERVAL = 0.1  # seconds between a pinned hold's operations


class SplitMix64:
    def __init__(self, seed: int) -> None:
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def uniform(self, lo: int, hi: int) -> int:
        """Uniform in [lo, hi]."""
        return lo + self.next() % (hi - lo + 1)


class Resource:
    """The resource connection: one request at a time (the LOST sender and the loop share it)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()

    async def send(self, line: str, reply: bool = True) -> Optional[str]:
        async with self.lock:
            try:
                self.writer.write((line + "\n").encode())
                await self.writer.drain()
                if not reply:
                    return None
                answer = await self.reader.readline()
            except (ConnectionError, OSError) as e:
                gone(f"dropped ({e})")
            if not answer.endswith(b"\n"):
                gone("closed")
            return answer.decode().strip()


def gone(what: str) -> None:
    print(f"contender-python: resource connection {what}", file=sys.stderr, flush=True)
    os._exit(3)


_background: "set[asyncio.Future[Optional[str]]]" = set()


class Hold:
    """One hold's reporting state: LOST at most once, only after BEGIN, never after END."""

    def __init__(self, resource: Resource, path: str, mode: str) -> None:
        self.resource = resource
        self.path = path
        self.mode = mode
        self.token = 0
        self.begun = False
        self.ended = False
        self.lost_reason: Optional[str] = None
        self.lost_sent = False

    def lost(self, reason: str) -> None:
        """On the event loop: the binding said this hold is lost."""
        if self.lost_reason is None:
            self.lost_reason = reason
        self.report_lost()

    def report_lost(self) -> None:
        if self.lost_reason is None or not self.begun or self.ended or self.lost_sent:
            return
        self.lost_sent = True  # claimed before any await: END checks it in the same step
        task = asyncio.ensure_future(self.resource.send(f"LOST {self.path} {self.token} {self.lost_reason}"))
        self.lost_task = task
        _background.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(_background.discard)

    lost_task: "Optional[asyncio.Future[Optional[str]]]" = None


class KazooSession:
    """kazoo's client, and what a careful kazoo user does about losses: a state listener, where
    SUSPENDED or LOST ends every hold."""

    def __init__(self, zk: str, session_s: float, sasl_options: Optional[Dict[str, str]]) -> None:
        self.session_s = session_s
        self.client = KazooClient(
            hosts=zk,
            timeout=session_s,
            sasl_options=sasl_options,
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1},
            command_retry={"max_tries": 3, "delay": 0.1, "max_delay": 1},
        )
        self.epoch = 0  # SUSPENDED and LOST events so far
        self.connected = False
        self.holds: "set[KazooSide]" = set()
        self.client.add_listener(self._listener)

    def _listener(self, state: str) -> bool:  # on kazoo's connection thread: must not block
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            self.epoch += 1
            self.connected = False
            for side in list(self.holds):
                side.connection_lost(state)
        else:
            self.connected = True
        return False  # keep listening

    def start(self) -> None:
        """Blocks until a session is established (raises kazoo's timeout)."""
        self.client.start(timeout=self.session_s)
        self.connected = self.client.connected

    def close(self) -> None:
        self.client.stop()
        self.client.close()


class KazooSide:
    """One kazoo lock object, with the zklock Lock's surface that Contender.iteration uses."""

    def __init__(self, session: KazooSession, path: str, mode: str, identifier: str) -> None:
        self.session = session
        self.path = path
        client = session.client
        if mode == "x":
            self.lock = KazooMutex(client, path, identifier, extra_lock_patterns=["-lock-"])
        elif mode == "r":
            self.lock = KazooReadLock(client, path, identifier, extra_lock_patterns=["__WRIT__"])
        else:
            self.lock = KazooWriteLock(client, path, identifier, extra_lock_patterns=["__READ__", "__WRIT__"])
        self.token: Optional[int] = None
        self.epoch = -1
        self.callback = None
        self.lost_state: Optional[str] = None

    def on_lost(self, callback) -> None:  # type: ignore[no-untyped-def]
        self.callback = callback

    def connection_lost(self, state: str) -> None:
        if self.lost_state is None:
            self.lost_state = "LOST" if state == KazooState.LOST else "SUSPENDED"
            if self.callback is not None:
                self.callback(self.lost_state)

    @property
    def state(self) -> str:
        if self.lost_state is not None or self.session.epoch != self.epoch or not self.session.connected:
            return "lost"
        return "held"

    @property
    def fencing_token(self) -> Optional[int]:
        return self.token

    def _acquire(self, timeout: Optional[float]) -> bool:
        """On a worker thread: acquires, then reads the node's czxid (the token), proving the
        node is still this session's. False if not held (timeout, busy); raises on errors."""
        try:
            if timeout == 0:
                got = self.lock.acquire(blocking=False)
            else:
                got = self.lock.acquire(timeout=timeout)
        except LockTimeout:
            got = False
        except BaseException:
            self._cleanup()
            raise
        if not got:
            self._cleanup()
            return False
        epoch = self.session.epoch  # a suspension from here on ends the hold
        try:
            stat = self.session.client.exists(f"{self.path}/{self.lock.node}")
            if stat is None or stat.ephemeralOwner != self.session.client.client_id[0]:
                raise KazooException("OwnNodeGone")
        except BaseException:
            self._release()
            raise
        self.token = stat.czxid
        self.epoch = epoch
        self.session.holds.add(self)
        return True

    def _cleanup(self) -> None:
        """Deletes this lock object's node (named by its prefix) if a failed or cancelled
        acquisition left it, until that works or the session that made it is gone."""
        client = self.session.client
        deadline = time.monotonic() + 2 * self.session.session_s
        while time.monotonic() < deadline:
            try:
                for child in client.get_children(self.path):
                    if child.startswith(self.lock.prefix):
                        client.delete(f"{self.path}/{child}")
                return
            except (NoNodeError, SessionExpiredError):
                return
            except KazooException:
                time.sleep(0.1)

    def _release(self) -> None:
        self.session.holds.discard(self)
        deadline = time.monotonic() + 2 * self.session.session_s
        while True:
            try:
                self.lock.release()
                return
            except (NoNodeError, SessionExpiredError):
                return  # gone with its session
            except KazooException:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    async def acquire_async(self, timeout: Optional[float] = None) -> bool:
        loop = asyncio.get_running_loop()
        attempt = loop.run_in_executor(None, self._acquire, timeout)
        try:
            return await asyncio.shield(attempt)
        except asyncio.CancelledError:
            self.lock.cancel()  # the blocked acquire raises kazoo's CancelledError and cleans up
            try:
                got = await attempt
            except BaseException:
                got = False
            if got:
                await loop.run_in_executor(None, self._release)
            raise

    async def release_async(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._release)


LOCK_ERRORS: "tuple[type[BaseException], ...]" = (zklock.ZkLockError,) + (
    (KazooException,) if KazooClient is not None else ()
)


class Contender:
    def __init__(
        self, args: argparse.Namespace, client: "Optional[zklock.Client]", resource: Resource,
        kazoo: "Optional[KazooSession]" = None,
    ) -> None:
        self.args = args
        self.client = client
        self.kazoo = kazoo
        self.lang = "kazoo" if kazoo is not None else "python"
        # kazoo's node data: JSON with the language, as zklock's identity, for the soak's census
        self.identifier = f'{{"lang":"kazoo","name":"{args.name}"}}'
        self.resource = resource
        self.rng = SplitMix64(args.seed)
        self.stop = asyncio.Event()
        self.acquiring: Optional[asyncio.Task[bool]] = None

    def on_sigterm(self) -> None:
        self.stop.set()
        if self.acquiring is not None:
            self.acquiring.cancel()

    async def nap(self, ms: float) -> None:
        try:
            await asyncio.wait_for(self.stop.wait(), ms / 1000)
        except asyncio.TimeoutError:
            pass

    async def run(self) -> None:
        while not self.stop.is_set():
            await self.iteration()

    async def iteration(self) -> None:
        rng = self.rng
        loop = asyncio.get_running_loop()
        # 1. the target: fresh Lock objects (no traffic), so on_lost is this hold's alone
        pick = rng.uniform(0, 99)
        mode = "x" if pick < 50 else "r" if pick < 75 else "w"
        path = MUTEX_PATH if mode == "x" else RW_PATH
        rw = None
        try:
            if self.kazoo is not None:
                lock = KazooSide(self.kazoo, path, mode, self.identifier)
            elif mode == "x":
                lock = self.client.lock(path)
            else:
                rw = self.client.read_write_lock(path)
                lock = rw.read if mode == "r" else rw.write
        except zklock.ZkLockError as e:
            await self.resource.send(f"ERROR {type(e).__name__}", reply=False)
            await self.nap(100)
            return
        hold = Hold(self.resource, path, mode)

        def on_lost(reason: str) -> None:  # on the client's callback thread
            try:
                loop.call_soon_threadsafe(hold.lost, reason)
            except RuntimeError:  # the loop is closed: the contender is exiting
                pass

        lock.on_lost(on_lost)

        # 2-3. the wait. The acquisition starts here, for this (the main) task; the task that
        # awaits it is what a cancel cancels.
        how = rng.uniform(0, 99)
        outcome: Optional[str] = None
        started = time.monotonic()
        if how < 70:
            timeout: Optional[float] = rng.uniform(200, 3000) / 1000
            cancel_after = None
        elif how < 85:
            timeout, cancel_after = None, rng.uniform(0, 1000) / 1000
        else:
            timeout, cancel_after = 0, None
        task = asyncio.ensure_future(lock.acquire_async(timeout))
        self.acquiring = task
        canceller = loop.call_later(cancel_after, task.cancel) if cancel_after is not None else None
        await asyncio.wait({task})
        self.acquiring = None
        if canceller is not None:
            canceller.cancel()
        held = False
        if task.cancelled():
            outcome = "cancelled"
        elif task.exception() is not None:
            outcome = f"error:{type(task.exception()).__name__}"
        elif task.result():
            outcome, held = "held", True
        else:
            outcome = "busy" if timeout == 0 else "timeout"
        waited = int((time.monotonic() - started) * 1000)
        await self.resource.send(f"WAIT {path} {mode} {waited} {outcome}", reply=False)

        if not held:
            if outcome.startswith("error:"):
                await self.nap(100)
            await self.nap(rng.uniform(0, self.args.idle_ms))
            return

        # 4. the hold
        try:
            token = lock.fencing_token
        except LOCK_ERRORS as e:
            token = None
            await self.resource.send(f"ERROR {type(e).__name__}", reply=False)
            await self.nap(100)
        if token is not None:
            hold.token = token
            reply = await self.resource.send(f"BEGIN {path} {mode} {token} {self.lang} {self.args.name}")
            begun_at = time.monotonic()
            hold.begun = True
            hold.report_lost()  # lost before BEGIN was acknowledged
            verb = "READ" if mode == "r" else "WRITE"
            words = (reply or "").split()
            pinned = len(words) == 3 and words[:2] == ["OK", "PIN"] and int(words[2]) > 0
            downgrade_roll, zombie_roll = rng.uniform(0, 2), rng.uniform(0, 9)
            downgrade = rw is not None and mode == "w" and not pinned and downgrade_roll == 0
            zombie = mode != "r" and (zombie_roll < 5 if pinned else zombie_roll == 0)
            resume = time.monotonic() + self.args.session_timeout_ms / 1000  # a zombie's, unpinned
            if pinned:
                # Pinned: hold for the given ms from the reply, one operation every 100 ms (the
                # orchestrator stalls or cuts this contender meanwhile). A loss is reported by
                # on_lost even while this sleeps. State changes go to stderr, to show a short
                # stall survived.
                until = resume = begun_at + int(words[2]) / 1000
                next_op = time.monotonic()
                last_state = "held"
                while not self.stop.is_set() and time.monotonic() < until:
                    state = lock.state
                    if state == "lost":
                        hold.lost("state_lost")
                    if hold.lost_reason is not None:
                        break
                    if state != last_state:
                        print(f"contender-python {self.args.name}: pinned hold {path} {token}: {state}",
                              file=sys.stderr, flush=True)
                        last_state = state
                    await self.resource.send(f"{verb} {path} {token}")
                    next_op += PINNED_OP_INTERVAL
                    wake = min(next_op, until)
                    await self.nap(max(0.0, wake - time.monotonic()) * 1000)
            else:
                for _ in range(rng.uniform(1, 3)):
                    if self.stop.is_set():
                        break
                    if lock.state == "lost":
                        hold.lost("state_lost")
                    if hold.lost_reason is not None:
                        break
                    await self.resource.send(f"{verb} {path} {token}")
                    await self.nap(rng.uniform(0, self.args.op_sleep_ms))
            if lock.state == "lost":
                hold.lost("state_lost")
            if hold.lost_reason is not None and zombie and not self.stop.is_set():
                # Lost, and said so: the zombie waits out the fault, then writes anyway.
                if hold.lost_task is not None:
                    await hold.lost_task
                await self.nap(max(0.0, resume - time.monotonic()) * 1000)
                for _ in range(rng.uniform(1, 2)):
                    await self.resource.send(f"ZOMBIE-WRITE {path} {token}")
                    await self.nap(rng.uniform(0, self.args.op_sleep_ms))
            if hold.lost_reason is None and downgrade and not self.stop.is_set():
                lock = await self.downgrade(rw, lock, hold, token)
            if lock.state == "lost":
                hold.lost("state_lost")
            if hold.lost_reason is None:
                hold.ended = True  # set before the await: a later loss sends no LOST
                await self.resource.send(f"END {path} {token}")
        try:
            await lock.release_async()
        except zklock.LockLostError:
            pass  # expected once lost; END (if sent) came first, so nothing more to report
        except LOCK_ERRORS as e:
            if hold.lost_reason is None:
                await self.resource.send(f"ERROR {type(e).__name__}", reply=False)
                await self.nap(100)
        # 6.
        await self.nap(rng.uniform(0, self.args.idle_ms))

    async def downgrade(self, rw: "zklock.ReadWriteLock", write: "zklock.Lock", hold: Hold, token: int) -> "zklock.Lock":
        """zklock's downgrade of a write hold: the read side with the same owner (this task),
        DOWNGRADE, the write side released, a READ or two. Returns the lock still held (the read
        side, or the write side if the read could not be had)."""
        loop = asyncio.get_running_loop()
        read = rw.read

        def on_lost(reason: str) -> None:  # on the client's callback thread
            try:
                loop.call_soon_threadsafe(hold.lost, reason)
            except RuntimeError:
                pass

        read.on_lost(on_lost)
        try:
            got = await read.acquire_async(3.0)
        except zklock.ZkLockError as e:
            await self.resource.send(f"ERROR downgrade:{type(e).__name__}", reply=False)
            return write
        if not got:
            await self.resource.send("ERROR downgrade:timeout", reply=False)
            return write
        if read.fencing_token != token:
            await self.resource.send(f"ERROR downgrade-token:{read.fencing_token}!={token}", reply=False)
        if write.state == "lost" or read.state == "lost":
            hold.lost("state_lost")
        if hold.lost_reason is None:
            await self.resource.send(f"DOWNGRADE {hold.path} {token}")
        try:
            await write.release_async()
        except zklock.ZkLockError as e:
            if hold.lost_reason is None:
                await self.resource.send(f"ERROR release-write:{type(e).__name__}", reply=False)
        for _ in range(self.rng.uniform(1, 2)):
            if self.stop.is_set():
                break
            if read.state == "lost":
                hold.lost("state_lost")
            if hold.lost_reason is not None:
                break
            await self.resource.send(f"READ {hold.path} {token}")
            await self.nap(self.rng.uniform(0, self.args.op_sleep_ms))
        return read


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--zk", required=True)
    parser.add_argument("--resource", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--session-timeout-ms", type=int, required=True)
    parser.add_argument("--curator-mutex-only", action="store_true")
    parser.add_argument("--client", choices=["zklock", "kazoo"], default="zklock")
    parser.add_argument("--op-sleep-ms", type=int, default=30)
    parser.add_argument("--idle-ms", type=int, default=50)
    parser.add_argument("--sasl-digest", metavar="USER:PASSWORD")
    args = parser.parse_args()
    if args.op_sleep_ms < 0 or args.idle_ms < 0:
        parser.error("--op-sleep-ms and --idle-ms must be >= 0")
    sasl_options: Optional[Dict[str, str]] = None
    if args.sasl_digest is not None:
        if ":" not in args.sasl_digest:
            parser.error("--sasl-digest wants USER:PASSWORD")
        username, password = args.sasl_digest.split(":", 1)
        sasl_options = {"mechanism": "DIGEST-MD5", "username": username, "password": password}

    loop = asyncio.get_running_loop()
    stopped = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stopped.set)
    loop.add_signal_handler(signal.SIGINT, stopped.set)

    host, port = args.resource.rsplit(":", 1)
    try:
        reader, writer = await asyncio.open_connection(host, int(port))
    except OSError as e:
        print(f"contender-python: connect to resource {args.resource}: {e}", file=sys.stderr)
        sys.exit(2)
    resource = Resource(reader, writer)

    session = args.session_timeout_ms / 1000
    if args.client == "kazoo":
        await run_kazoo(args, resource, stopped, session, sasl_options)
        writer.close()
        return
    client: Optional[zklock.Client] = None
    while client is None and not stopped.is_set():
        try:
            # The constructor blocks (GIL released): off the loop, so SIGTERM is still handled.
            client = await loop.run_in_executor(
                None,
                lambda: zklock.Client(
                    args.zk, session_timeout=session, connect_timeout=session, sasl_options=sasl_options
                ),
            )
        except zklock.InvalidArgumentError:
            raise
        except zklock.ZkLockError as e:
            await resource.send(f"ERROR {type(e).__name__}", reply=False)
            await asyncio.sleep(0.1)
    if client is not None:
        contender = Contender(args, client, resource)
        loop.remove_signal_handler(signal.SIGTERM)
        loop.remove_signal_handler(signal.SIGINT)
        loop.add_signal_handler(signal.SIGTERM, contender.on_sigterm)
        loop.add_signal_handler(signal.SIGINT, contender.on_sigterm)
        await contender.run()
        # Ends the session: the server deletes this client's nodes at once.
        await loop.run_in_executor(None, client.close)
    writer.close()


async def run_kazoo(
    args: argparse.Namespace,
    resource: Resource,
    stopped: asyncio.Event,
    session: float,
    sasl_options: Optional[Dict[str, str]],
) -> None:
    if KazooClient is None:
        print("contender-python: --client kazoo needs kazoo (pip install kazoo==2.11.*)", file=sys.stderr)
        sys.exit(2)
    loop = asyncio.get_running_loop()
    kazoo = KazooSession(args.zk, session, sasl_options)
    started = False
    while not started and not stopped.is_set():
        try:
            await loop.run_in_executor(None, kazoo.start)
            started = True
        except Exception as e:  # kazoo's timeout: faults may be under way as this starts
            await resource.send(f"ERROR connect:{type(e).__name__}", reply=False)
            await asyncio.sleep(0.1)
    if started:
        contender = Contender(args, None, resource, kazoo)
        loop.remove_signal_handler(signal.SIGTERM)
        loop.remove_signal_handler(signal.SIGINT)
        loop.add_signal_handler(signal.SIGTERM, contender.on_sigterm)
        loop.add_signal_handler(signal.SIGINT, contender.on_sigterm)
        await contender.run()
    # Ends the session: the server deletes this client's nodes at once.
    await loop.run_in_executor(None, kazoo.close)


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
