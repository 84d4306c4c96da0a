"""Recipes, the semaphore and the multi-lock in Python."""
import asyncio
import os

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")
with zklock.Client(hosts) as client:
    # ANCHOR: semaphore
    semaphore = client.semaphore("/jobs/nightly", max_leases=3)  # or shared_count_path=..., seed=3
    with semaphore.acquire(2, timeout=30) as leases:  # 2 leases or none (LockTimeout); not reentrant
        print("fencing tokens", leases.fencing_tokens)  # one per lease

    async def nightly() -> None:
        async with semaphore.hold(1, timeout=30) as leases:
            print("async lease", leases.fencing_tokens)

    asyncio.run(nightly())
    # ANCHOR_END: semaphore
    # ANCHOR: multi
    transfer = client.multi_lock(
        [client.lock("/accounts/alice"), client.lock("/accounts/bob"), (semaphore, 1)]
    )  # taken sorted by path, whatever the order here
    with transfer.acquire(timeout=10) as guard:  # all or none; guard.lost_member names a lost one
        print("holding", len(guard.fencing_tokens), "members")
    # ANCHOR_END: multi
