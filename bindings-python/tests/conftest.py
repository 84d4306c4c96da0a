"""Fixtures for zklock's Python tests: a real ZooKeeper (ZK_CONNECT, from `scripts/zk run`), kazoo
as an independent observer of the lock nodes, and zklock-proxy for real session expiries."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterator, Optional

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

import zklock

NODE_NAME = re.compile(r"^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lock-\d{10}$")
DEADLINE = 20.0


@pytest.fixture(scope="session")
def zk_connect() -> str:
    connect = os.environ.get("ZK_CONNECT")
    if not connect:
        pytest.fail("ZK_CONNECT is not set: run the tests through scripts/test-python (or scripts/zk run)")
    return connect


@pytest.fixture(scope="session")
def kazoo(zk_connect: str) -> Iterator[KazooClient]:
    observer = KazooClient(hosts=zk_connect)
    observer.start(timeout=15)
    yield observer
    observer.stop()
    observer.close()


@pytest.fixture
def path(request: pytest.FixtureRequest) -> str:
    """A lock path of this test's own."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[:60]
    return f"/zklock-py-tests/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def client(zk_connect: str) -> Iterator[zklock.Client]:
    with zklock.Client(zk_connect) as c:
        yield c


def wait_until(predicate: Callable[[], Any], what: str, timeout: float = DEADLINE) -> Any:
    """Polls `predicate` until it is truthy (returning its value), failing after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)


def children(kazoo: KazooClient, path: str) -> list[str]:
    """The lock's children in queue order (by sequence), as kazoo sees them."""
    try:
        names = kazoo.get_children(path)
    except NoNodeError:
        return []
    return sorted(names, key=lambda name: name[-10:])


def identity(kazoo: KazooClient, path: str, name: str) -> dict[str, Any]:
    data, _ = kazoo.get(f"{path}/{name}")
    return json.loads(data)


def wait_children(kazoo: KazooClient, path: str, count: int, timeout: float = DEADLINE) -> list[str]:
    """Waits until the lock has exactly `count` children; returns them in queue order."""
    found: list[list[str]] = []

    def check() -> bool:
        found[:] = [children(kazoo, path)]
        return len(found[0]) == count

    wait_until(check, f"{count} children of {path}", timeout)
    return found[0]


def hand_over(first: zklock.Client, second: zklock.Client, kazoo: KazooClient, path: str) -> None:
    """`first` holds the lock at `path`, `second` finds it held, queues (kazoo sees both nodes)
    and gets it when `first` releases; nothing is left under `path`."""
    lock = first.lock(path)
    assert lock.acquire()
    assert len(children(kazoo, path)) == 1
    seconds = second.lock(path)
    assert not seconds.acquire(blocking=False)
    got = threading.Event()

    def wait() -> None:
        if seconds.acquire(timeout=15):
            got.set()
            seconds.release()

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_children(kazoo, path, 2)
    lock.release()
    waiter.join()
    assert got.is_set()
    wait_children(kazoo, path, 0)


def session_of(client: Any) -> int:
    """The session id of a zklock or kazoo client, as the server writes it (unsigned)."""
    session = client.session_id if isinstance(client, zklock.Client) else client.client_id[0]
    assert session is not None
    return int(session) & 0xFFFF_FFFF_FFFF_FFFF


_noted_skips: set[str] = set()


def note_skip(reason: str) -> None:
    """Says that a part of a test did not run, and why (once per reason): on stderr, and as a line
    of the file ZKL_TEST_SKIPS names, which the suite's closing line counts (scripts/test fails
    on a skip unless its reason begins with "n/a" or ZKL_TEST_ALLOW_SKIPS=1)."""
    if reason in _noted_skips:
        return
    _noted_skips.add(reason)
    print(f"SKIPPED: {reason}", file=sys.stderr)
    if os.environ.get("ZKL_TEST_SKIPS"):
        with open(os.environ["ZKL_TEST_SKIPS"], "a", encoding="utf-8") as skips:
            skips.write(reason.replace("\n", " ") + "\n")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Every skipped test, with its reason, into ZKL_TEST_SKIPS (see `note_skip`)."""
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        note_skip(f"{reason.removeprefix('Skipped: ')} ({report.nodeid})")


def watches(zk_connect: str) -> Optional[dict[str, set[int]]]:
    """Every server's data and child watches (`wchp`: path, then the sessions watching it), or
    None if the servers do not answer four-letter words."""
    hosts, _, chroot = zk_connect.partition("/")
    found: dict[str, set[int]] = {}
    for host in hosts.split(","):
        name, _, port = host.rpartition(":")
        with socket.create_connection((name.strip("[]"), int(port)), timeout=5) as sock:
            sock.sendall(b"wchp")
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        text = reply.decode()
        if "not in the whitelist" in text or "not executed" in text:
            note_skip("the watch checks (the kazoo interop barrier): the servers answer no four-letter words")
            return None
        watched: Optional[str] = None
        for line in text.splitlines():
            if line and not line[0].isspace():
                watched = line.strip()
                if chroot:
                    prefix = "/" + chroot.rstrip("/")
                    watched = watched[len(prefix) :] if watched.startswith(prefix + "/") else None
            elif line.strip().startswith("0x") and watched is not None:
                found.setdefault(watched, set()).add(int(line.strip(), 16))
    return found


class Proxy:
    """zklock-proxy in front of the server: `stall` makes a real session expiry."""

    def __init__(self, upstream: str) -> None:
        binary = os.environ.get("ZKLOCK_PROXY") or os.path.join(
            os.path.dirname(__file__), "..", "..", "target", "debug", "zklock-proxy"
        )
        self.process = subprocess.Popen(
            [binary, upstream.split(",")[0]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().split()
        assert line and line[0] == "LISTEN", f"zklock-proxy said {line!r}"
        self.address: str = line[1]

    def command(self, command: str) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        assert answer == f"OK {command}", f"zklock-proxy answered {answer!r} to {command!r}"

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def proxy(zk_connect: str) -> Iterator[Proxy]:
    p = Proxy(zk_connect)
    yield p
    p.close()


def python_child(code: str, env: Optional[dict[str, str]] = None, **kwargs: Any) -> "subprocess.Popen[str]":
    """A child Python process running `code` (with this environment, ZK_CONNECT included)."""
    import sys

    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        **kwargs,
    )


def run_child(code: str, env: Optional[dict[str, str]] = None, timeout: float = 60) -> "tuple[int, str, str]":
    """Runs `code` in a `python_child` to the end (killed after `timeout` s): (returncode, out, err)."""
    child = python_child(code, env)
    try:
        out, err = child.communicate(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    return child.returncode, out, err
