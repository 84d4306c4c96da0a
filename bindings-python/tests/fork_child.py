"""Forks while zklock's asyncio completions and callbacks flow (issue 48, item 2), run by
test_service.py: `fork_child.py ZK_CONNECT PATH FORKS`.

Two event-loop threads take and give back locks with `async with` (each grant is an asyncio
completion, run on a callback thread), and a thread makes short-lived clients that hold a lock,
register state and lost callbacks and close (each close runs both callbacks). Meanwhile the main
thread forks FORKS times; each child writes one byte on a pipe from its first line and exits.
A child that does not write its byte (or exit) within PATIENCE seconds is stuck: it is killed
and counted. Before the fix a completion made a thread state for a runtime thread under
CPython's HEAD lock; a fork in that window left the child stuck in PyOS_AfterFork_Child
(2 of 800 forks). Prints `forks=N stuck=N completions=N callbacks=N seconds=S`, what flowed during the forks."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import threading
import time
import warnings

import zklock

PATIENCE = 10.0

zk_connect, path, forks = sys.argv[1], sys.argv[2], int(sys.argv[3])
warnings.simplefilter("ignore", DeprecationWarning)  # "use of fork() may lead to deadlocks": the point
stop = threading.Event()
counts = {"completions": 0, "callbacks": 0}
counted = threading.Lock()
client = zklock.Client(zk_connect)


def count(what: str) -> None:
    with counted:
        counts[what] += 1


def completions(name: str) -> None:
    async def main() -> None:
        lock = client.lock(f"{path}/{name}")
        while not stop.is_set():
            async with lock:
                count("completions")

    asyncio.run(main())


def callbacks() -> None:
    while not stop.is_set():
        with zklock.Client(zk_connect) as other:
            other.on_state_change(lambda state: count("callbacks"))
            lock = other.lock(f"{path}/cb")
            lock.acquire()
            lock.on_lost(lambda reason: count("callbacks"))


threads = [threading.Thread(target=completions, args=(f"a{i}",)) for i in range(2)]
threads.append(threading.Thread(target=callbacks))
for thread in threads:
    thread.start()
# Under way before the first fork.
while counts["completions"] < 20 or counts["callbacks"] < 2:
    time.sleep(0.01)

started, before = time.monotonic(), dict(counts)
stuck = 0
for _ in range(forks):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, b"x")
        os._exit(0)
    os.close(write)
    reached = select.select([read], [], [], PATIENCE)[0] and os.read(read, 1) == b"x"
    os.close(read)
    deadline = time.monotonic() + PATIENCE
    exited = False
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            exited = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            break
        time.sleep(0.001)
    if not (reached and exited):
        stuck += 1
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
took = time.monotonic() - started
during = {what: counts[what] - before[what] for what in counts}
stop.set()
for thread in threads:
    thread.join()
client.close()
print(f"forks={forks} stuck={stuck} completions={during['completions']} callbacks={during['callbacks']} seconds={took:.1f}")
