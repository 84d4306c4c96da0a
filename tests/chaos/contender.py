"""Chaos soak contender in Python (the orchestrator's fixed contender protocol), on asyncio.

    python contender.py --zk CONNECT --resource HOST:PORT --name NAME --seed N --session-timeout-ms MS
                        [--op-sleep-ms N] [--idle-ms N]

One zklock client, one TCP connection to the fenced resource; loops until SIGTERM (then: close the
client so its nodes go, exit 0). Exit 3 if the resource connection drops. Cancel is asyncio's own:
the acquisition's task is cancelled. Each iteration makes fresh Lock objects, so a lost
notification (Lock.on_lost) always belongs to the hold of the iteration that registered it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from typing import Optional

import zklock

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
        _background.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(_background.discard)


class Contender:
    def __init__(self, args: argparse.Namespace, client: zklock.Client, resource: Resource) -> None:
        self.args = args
        self.client = client
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
        try:
            if mode == "x":
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
        except zklock.ZkLockError as e:
            token = None
            await self.resource.send(f"ERROR {type(e).__name__}", reply=False)
            await self.nap(100)
        if token is not None:
            hold.token = token
            reply = await self.resource.send(f"BEGIN {path} {mode} {token} python {self.args.name}")
            begun_at = time.monotonic()
            hold.begun = True
            hold.report_lost()  # lost before BEGIN was acknowledged
            verb = "READ" if mode == "r" else "WRITE"
            words = (reply or "").split()
            if len(words) == 3 and words[:2] == ["OK", "PIN"] and int(words[2]) > 0:
                # Pinned: hold for the given ms from the reply, one operation every 100 ms (the
                # orchestrator stalls or cuts this contender meanwhile). A loss is reported by
                # on_lost even while this sleeps. State changes go to stderr, to show a short
                # stall survived.
                until = begun_at + int(words[2]) / 1000
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
            if hold.lost_reason is None:
                hold.ended = True  # set before the await: a later loss sends no LOST
                await self.resource.send(f"END {path} {token}")
        try:
            await lock.release_async()
        except zklock.LockLostError:
            pass  # expected once lost; END (if sent) came first, so nothing more to report
        except zklock.ZkLockError as e:
            if hold.lost_reason is None:
                await self.resource.send(f"ERROR {type(e).__name__}", reply=False)
                await self.nap(100)
        # 6.
        await self.nap(rng.uniform(0, self.args.idle_ms))


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--zk", required=True)
    parser.add_argument("--resource", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--session-timeout-ms", type=int, required=True)
    parser.add_argument("--curator-mutex-only", action="store_true")
    parser.add_argument("--op-sleep-ms", type=int, default=30)
    parser.add_argument("--idle-ms", type=int, default=50)
    args = parser.parse_args()
    if args.op_sleep_ms < 0 or args.idle_ms < 0:
        parser.error("--op-sleep-ms and --idle-ms must be >= 0")

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
    client: Optional[zklock.Client] = None
    while client is None and not stopped.is_set():
        try:
            # The constructor blocks (GIL released): off the loop, so SIGTERM is still handled.
            client = await loop.run_in_executor(
                None, lambda: zklock.Client(args.zk, session_timeout=session, connect_timeout=session)
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


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
