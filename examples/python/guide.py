"""Python, the whole API: the blocks of the Python guide page, run in order."""
import asyncio
import os

import zklock

hosts = os.environ.get("ZK_CONNECT", "127.0.0.1:2181")
with zklock.Client(hosts, session_timeout=10.0) as client:
    # ANCHOR: use
    lock = client.lock("/locks/nightly-report", identifier="report-job")

    with lock:  # waits as long as it takes
        token = lock.fencing_token  # pass it to the resource you protect
        with lock:  # re-entry: no ZooKeeper traffic
            pass

    if lock.acquire(timeout=5):  # threading.RLock.acquire(blocking=True, timeout=-1)
        try:
            pass
        finally:
            lock.release()

    with lock.hold(timeout=5) as token:  # raises zklock.LockTimeout (a TimeoutError)
        print("fencing token", token)
    # ANCHOR_END: use

    # ANCHOR: asyncio
    async def job(lock: zklock.Lock) -> None:
        async with lock:
            pass
        if await lock.acquire_async(timeout=2.5):  # None waits forever, 0 only tries
            try:
                pass
            finally:
                await lock.release_async()
        async with lock.hold(timeout=5) as token:
            print("fencing token", token)
    # ANCHOR_END: asyncio
    asyncio.run(job(lock))

    # ANCHOR: rwlock
    rw = client.read_write_lock("/locks/catalog")

    with rw.read:  # shared with other readers
        pass
    with rw.write.hold(timeout=5) as token:  # alone: no reader, no other writer
        pass

    rw.write.acquire()  # downgrade: write, then read, then let the write go
    rw.read.acquire()  # at once: it reads on its write node
    rw.write.release()  # still reading; writers already waiting stay out
    rw.read.release()

    with rw.read:
        try:
            rw.write.acquire()  # raises zklock.DeadlockError at once: release the read first
        except zklock.DeadlockError:
            pass
    # ANCHOR_END: rwlock

    # ANCHOR: semaphore
    semaphore = client.semaphore("/jobs/nightly", max_leases=3)
    with semaphore.acquire(2, timeout=30) as leases:  # both, or neither; LockTimeout after 30 s
        tokens = leases.fencing_tokens  # one per lease
    leases = semaphore.acquire(blocking=False)  # None if no room now
    if leases is not None:
        leases.release()
    shared = client.semaphore("/jobs/nightly-shared", shared_count_path="/jobs/nightly-max", seed=3)
    print(shared.participants().holders, shared.current_max_leases())

    async def nightly() -> None:
        async with semaphore.hold(1, timeout=30) as leases:  # or: await semaphore.acquire_async(1)
            pass
    # ANCHOR_END: semaphore
    asyncio.run(nightly())

    # ANCHOR: multi
    transfer = client.multi_lock([client.lock("/accounts/alice"), client.lock("/accounts/bob"),
                                  (client.semaphore("/backends/ledger", max_leases=4), 1)])
    with transfer.acquire(timeout=10) as guard:  # all, or none: LockTimeout naming the member
        for path, kind, tokens in guard.fencing_tokens:
            print(path, kind, tokens)
        guard.on_lost(lambda member: print(member.path, member.kind, member.reason))

    async def move() -> None:
        async with transfer.hold(timeout=10) as guard:  # or: await transfer.acquire_async(10)
            pass
    # ANCHOR_END: multi
    asyncio.run(move())
