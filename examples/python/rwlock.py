"""Recipes, the read/write lock in Python."""
import os

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")
with zklock.Client(hosts) as client:
    # ANCHOR: main
    rw = client.read_write_lock("/locks/catalog")  # .read and .write are zklock.Lock objects
    with rw.read:  # shared with other readers
        pass
    with rw.write:  # alone
        with rw.read:  # a downgrade: the read side taken under the write side
            pass
    print(rw.holders())  # the readers holding together, or the writer (each with .mode)
    with rw.read:
        try:
            rw.write.acquire()  # an upgrade is refused at once
        except zklock.DeadlockError:
            pass
    # ANCHOR_END: main
