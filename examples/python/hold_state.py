"""Concepts, hold state: a lost-lock callback, and the state a hold is in."""
import os
import threading

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")
with zklock.Client(hosts) as client:
    lock = client.lock("/locks/hold-state")
    # ANCHOR: main
    lost = threading.Event()
    stop = lock.on_lost(lambda reason: lost.set())  # on the client's callback thread
    with lock:
        assert lock.state == "held" and lock.is_held
        # ... work, checking lost.is_set() (or lock.is_held) before each step ...
    stop()  # unregisters the callback
    # ANCHOR_END: main
