"""Issue 42 in Python: a holder is told it lost the lock before the next holder gets it, whatever
the fault (as core/tests/one_way.rs asserts in Rust). Holder H talks to ZooKeeper through
zklock-proxy, B connects directly and waits for the same lock; then the proxy stalls H both ways
past its session, or holds only what H sends while the server's watch notifications still reach
H, or cuts H's connection and lets its reconnect have only the ConnectResponse. The server expires
H's session and lets B in: H's on_lost callback must have run first, both instants read on
time.monotonic() in this process. Right after B's acquire returns, B's thread reads H's hold a few
thousand times: never held. Learning the loss from the node's deletion, the event that lets B
in, does not count."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from conftest import Proxy, session_of, wait_children, wait_until, watches

import zklock

# Short, so the expiry comes quickly; long enough for a loaded machine not to miss heartbeats.
SESSION = 3.0
# Bounds on the waits that the fault decides (an expiry takes about a session timeout).
PATIENCE = 20.0
# H's hold read this many times right after B holds.
READS = 5000
# The upstream stall: a watch notification for H every CHATTER_EVERY s, well past the session.
CHATTER_EVERY = 0.25
CHATTER = int((SESSION + 2.5) / CHATTER_EVERY)


class Stage:
    """H through the proxy holding `path` (this thread its owner), B direct."""

    def __init__(self, zk_connect: str, kazoo: Any, path: str, proxy: Proxy, name: str) -> None:
        self.zk_connect, self.kazoo, self.path, self.proxy, self.name = zk_connect, kazoo, path, proxy, name
        self.h = zklock.Client(proxy.address, session_timeout=SESSION)
        self.b = zklock.Client(zk_connect, session_timeout=SESSION)
        assert self.h.session_timeout == SESSION
        self.disconnected = threading.Event()
        self.h.on_state_change(lambda state: self.disconnected.set() if state == "disconnected" else None)
        self.lock = self.h.lock(path)
        self.lost = threading.Event()
        self.lost_at: Optional[float] = None
        self.lost_reason: Optional[str] = None
        self.lock.on_lost(self._on_lost)
        assert self.lock.acquire()
        self.h_owner = zklock._native.Owner.current_thread()
        self.b_at: Optional[float] = None
        self.b_got: object = None
        self.h_then: Optional[str] = None
        self.held: list[float] = []
        self.reads_took = 0.0

    def _on_lost(self, reason: str) -> None:
        at = time.monotonic()
        if self.lost_at is None:  # the first call (callbacks run one at a time, in order)
            self.lost_at, self.lost_reason = at, reason
        self.lost.set()

    def h_state(self) -> Optional[str]:
        """H's hold, as `lock.state` reads it on H's thread (`is_held` is `state == "held"`)."""
        held = self.lock._hold_of(self.h_owner)
        return None if held is None else held[0]

    def b_waits(self) -> threading.Thread:
        """B's acquire of the lock, in a thread, started now: the instant it returned, H's state
        then, and the reads of H's state right after. Returns once B is queued behind H."""
        lock = self.b.lock(self.path)

        def wait() -> None:
            try:
                self.b_got = lock.acquire(timeout=PATIENCE)
            except BaseException as err:  # reported by the checks
                self.b_got = err
            self.b_at = time.monotonic()
            self.h_then = self.h_state()
            if self.b_got is not True:
                return
            for _ in range(READS):
                if self.h_state() == "held":
                    self.held.append(time.monotonic() - self.b_at)
            self.reads_took = time.monotonic() - self.b_at
            lock.release()

        thread = threading.Thread(target=wait, name="B")
        thread.start()
        wait_children(self.kazoo, self.path, 2)
        return thread

    def check(self, b: threading.Thread, t0: float) -> None:
        """Waits for B to hold, prints the instants against t0, and checks the order."""
        b.join(PATIENCE + 10)
        assert self.b_got is True, f"B holds once the server expired H's session: {self.b_got!r}"
        assert self.b_at is not None
        self.lost.wait(5)  # given time to show up if it came late, for the report
        lost = "never" if self.lost_at is None else f"{self.lost_at - t0:.3f} s ({self.lost_reason})"
        print(
            f"{self.name}: H lost at {lost}, B held at {self.b_at - t0:.3f} s, when H read {self.h_then}; after, "
            f"H read held {len(self.held)} times of {READS} (the reads took {self.reads_took * 1000:.1f} ms)"
        )
        assert self.lost_at is not None, "H is told it lost the lock"
        late = self.lost_at - self.b_at
        assert late <= 0, f"H was told it lost ({self.lost_reason}) {late:.3f} s after B held"
        assert self.lost_reason != "node_deleted", "H learned of its loss only from the deletion that let B in"
        assert self.h_then == "lost", "H's state when B held"
        assert self.held == [], f"H's state read held {len(self.held)} times after B held (at {self.held[:3]} s...)"
        assert self.lock.state == "lost" and not self.lock.is_held, "read on H's thread"

    def close(self) -> None:
        self.proxy.command("pass")
        try:
            self.lock.release()
        except zklock.LockLostError:
            pass  # the node went with the session
        self.h.close()
        self.b.close()


def stage(zk_connect: str, kazoo: Any, path: str, proxy: Proxy, name: str, body: Callable[[Stage], None]) -> None:
    s = Stage(zk_connect, kazoo, path, proxy, name)
    try:
        body(s)
    finally:
        s.close()


def test_a_holder_stalled_past_its_session_is_told_lost_before_the_next_holder_enters(zk_connect, kazoo, path, proxy):
    """H hears nothing, both ways, for longer than its session."""

    def body(s: Stage) -> None:
        b = s.b_waits()
        t0 = time.monotonic()
        proxy.command("stall")
        s.check(b, t0)

    stage(zk_connect, kazoo, path, proxy, "stall", body)


def test_a_holder_cut_off_upstream_is_told_lost_before_the_next_holder_enters(zk_connect, kazoo, path, proxy):
    """A one-way loss, H to the server: H's requests and pings are held, while the watch
    notifications of locks it waits for (released every CHATTER_EVERY s by B's client) still
    arrive, well past the session: a client that takes any byte received for a sign that the
    server still hears it would keep believing it holds."""

    def body(s: Stage) -> None:
        b = s.b_waits()
        start, stop = threading.Event(), threading.Event()
        held_by_b = threading.Barrier(2)
        released: list[int] = []
        chatter = [f"{path}-chatter-{i}" for i in range(CHATTER)]

        def b_chatters() -> None:
            """B's client holds every chatter lock, then releases them CHATTER_EVERY s apart
            (from this thread, their owner) once the fault is on, until told to stop."""
            locks = [s.b.lock(p) for p in chatter]
            for lock in locks:
                assert lock.acquire(timeout=PATIENCE)
            held_by_b.wait()
            start.wait()
            for lock in locks:
                if not stop.wait(CHATTER_EVERY):
                    lock.release()
                    released.append(1)
                else:
                    lock.release()

        def h_waits(p: str) -> None:
            try:
                if s.h.lock(p).acquire(timeout=60):
                    pass  # released with the client
            except zklock.ZkLockError:
                pass  # the client closed, or its session ended

        releaser = threading.Thread(target=b_chatters, name="chatter")
        releaser.start()
        held_by_b.wait(PATIENCE)
        h_session = session_of(s.h)
        waiters = []
        for p in chatter:
            waiter = threading.Thread(target=h_waits, args=(p,), daemon=True)
            waiter.start()
            waiters.append(waiter)
            node = f"{p}/{wait_children(kazoo, p, 2)[0]}"
            wait_until(lambda: h_session in (watches(zk_connect) or {}).get(node, ()), f"H to watch {node}")

        t0 = time.monotonic()
        proxy.command("stall-upstream")
        start.set()
        try:
            s.check(b, t0)
        finally:
            stop.set()
            releaser.join(PATIENCE)
            print(f"stall-upstream: {len(released)} of {CHATTER} chatter locks released by then")
        assert len(released) < CHATTER, "B held while the chatter locks were still being released"
        s.h.close()  # ends the waiters
        for waiter in waiters:
            waiter.join(10)

    stage(zk_connect, kazoo, path, proxy, "stall-upstream", body)


def test_a_reconnect_cut_after_its_connect_response_is_told_lost_before_the_next_holder_enters(
    zk_connect, kazoo, path, proxy
):
    """Issue 42 item 5: the proxy cuts H, lets only the ConnectResponse of H's reconnect through,
    then refuses new connections. The reconnect renewed the session on the server, which expires
    it a session timeout later and lets B in; H must be told first, and never read held after."""

    def body(s: Stage) -> None:
        b = s.b_waits()
        t0 = time.monotonic()
        proxy.command("cut")
        assert s.disconnected.wait(PATIENCE), "H's connection is down"
        proxy.command("cut-after-connect-response")
        proxy.command("pass")
        proxy.command("wait-connect-cut")  # H reconnected, got its ConnectResponse, and was cut
        print(f"cut-after-connect-response: the ConnectResponse went through by {time.monotonic() - t0:.3f} s")
        s.check(b, t0)

    stage(zk_connect, kazoo, path, proxy, "cut-after-connect-response", body)
