"""The example of the PyPI page (bindings-python/README.md)."""
# ANCHOR: main
import os

import zklock

with zklock.Client(os.environ.get("ZK_CONNECT", "127.0.0.1:2181")) as client:
    lock = client.lock("/locks/nightly-report")
    with lock:  # the owner is the calling thread; `async with` in asyncio code
        print("holding, fencing token", lock.fencing_token)
# ANCHOR_END: main
