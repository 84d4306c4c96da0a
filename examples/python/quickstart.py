"""The README's Python example: take a lock, use its fencing token, release it."""
# ANCHOR: main
import os

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")
with zklock.Client(hosts, session_timeout=10.0) as client:
    lock = client.lock("/locks/nightly-report")
    with lock:  # like threading.RLock: the owner is the calling thread
        print("holding, fencing token", lock.fencing_token)
        with lock:  # re-entry costs no ZooKeeper traffic
            pass
    if lock.acquire(timeout=5):  # RLock.acquire's signature and meaning
        lock.release()
    with lock.hold(timeout=5):  # raises zklock.LockTimeout (a TimeoutError)
        pass
# ANCHOR_END: main
