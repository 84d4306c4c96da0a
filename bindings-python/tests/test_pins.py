"""Review r-pins: what a Python program keeps alone stays held while it keeps it. The core keeps
its client while any user handle (a lease, a multi-lock guard) lives; the Python objects must not
close it under them."""

from __future__ import annotations

import gc
import time
import warnings

from conftest import children

import zklock


def _drop(names: dict, *which: str) -> list[str]:
    """Drops `which` from `names` and collects, returning the warnings said meanwhile (a client
    collected unclosed warns, and then closes it)."""
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        for name in which:
            del names[name]
        gc.collect()
        time.sleep(1.0)
    return [str(w.message) for w in said]


def test_leases_kept_alone_stay_held(zk_connect, kazoo, path):
    client = zklock.Client(zk_connect)
    semaphore = client.semaphore(path, max_leases=2)
    leases = semaphore.acquire()
    kept = {"semaphore": semaphore, "client": client}
    del semaphore, client
    said = _drop(kept, "semaphore", "client")
    try:
        assert leases.state == "held", f"leases kept alone were lost: {leases.state} ({said})"
        assert len(children(kazoo, f"{path}/leases")) == 1
    finally:
        if leases.state == "held":
            leases.release()
        # The client goes with the leases, unclosed (so it warns, and closes then).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            del leases
            gc.collect()


def test_multi_guard_kept_alone_stays_held(zk_connect, kazoo, path):
    client = zklock.Client(zk_connect)
    multi = client.multi_lock([client.lock(f"{path}/a"), client.lock(f"{path}/b")])
    guard = multi.acquire()
    kept = {"multi": multi, "client": client}
    del multi, client
    said = _drop(kept, "multi", "client")
    try:
        assert guard.state == "held", f"a multi-lock guard kept alone was lost: {guard.state} ({said})"
        assert len(children(kazoo, f"{path}/a")) == 1
    finally:
        if guard.state == "held":
            guard.release()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            del guard
            gc.collect()
