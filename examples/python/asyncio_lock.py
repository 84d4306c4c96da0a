"""Getting started, asyncio: the owner is the current task."""
import asyncio
import os

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")


# ANCHOR: main
async def job(lock: zklock.Lock, name: str) -> None:
    async with lock:  # the owner is the current task; cancelling it removes its node
        print(name, "holding, fencing token", lock.fencing_token)
        await asyncio.sleep(0.01)


async def main() -> None:
    with zklock.Client(hosts) as client:
        lock = client.lock("/locks/async-report")
        await asyncio.gather(*(job(lock, f"task-{i}") for i in range(3)))  # one at a time, in order


asyncio.run(main())
# ANCHOR_END: main
