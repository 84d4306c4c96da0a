"""Interop: kazoo's locks beside zklock's on one path, told to respect zklock's nodes."""
import os

from kazoo.client import KazooClient

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")
kazoo = KazooClient(hosts=hosts)
kazoo.start()
# ANCHOR: main
from kazoo.recipe.lock import Lock, ReadLock, WriteLock

mutex = Lock(kazoo, "/locks/report", extra_lock_patterns=["-lock-"])  # beside zklock's mutex
reader = ReadLock(kazoo, "/locks/catalog", extra_lock_patterns=["__WRIT__"])  # beside zklock's read/write lock
writer = WriteLock(kazoo, "/locks/catalog", extra_lock_patterns=["__READ__", "__WRIT__"])
# ANCHOR_END: main
with zklock.Client(hosts) as client:
    ours = client.lock("/locks/report")
    with ours:  # zklock holds: kazoo, told its pattern, waits
        assert not mutex.acquire(blocking=False)
    assert mutex.acquire(timeout=5)  # free again: kazoo holds ...
    assert not ours.acquire(blocking=False)  # ... and zklock counts kazoo's node as a holder
    mutex.release()
kazoo.stop()
kazoo.close()
