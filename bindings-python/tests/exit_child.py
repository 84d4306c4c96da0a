"""One short process for test_exit.py: sets up TRIGGER (argv[1]) against HOSTS (argv[2]) with lock
path PATH (argv[3]), so that a zklock thread is inside Python, or about to enter it, as the
interpreter exits. Exits 0 on its own; the test counts the runs that died of a signal instead."""

import asyncio
import atexit
import sys
import threading

trigger, hosts, path = sys.argv[1:4]

if trigger == "atexit-async":
    # Registered before zklock's own hook, so it runs after it.
    def late() -> None:
        async def main() -> None:
            with zklock.Client(hosts) as c:
                async with c.lock(path):
                    print("acquired in atexit", flush=True)

        asyncio.run(asyncio.wait_for(main(), 20))

    atexit.register(late)

import zklock  # noqa: E402


def busy(*_: object) -> None:
    started.set()
    while True:  # Python code running on zklock's callback thread when the interpreter exits
        sum(range(100))


started = threading.Event()

if trigger == "state":
    # issue 45, item 5: a state callback registered, the client closed at the end of the script.
    with zklock.Client(hosts) as c:
        c.on_state_change(lambda state: None)
elif trigger == "lost-busy":
    c = zklock.Client(hosts)
    lock = c.lock(path)
    lock.acquire()
    lock.on_lost(busy)
    c.close()
    started.wait()
elif trigger == "state-busy":
    c = zklock.Client(hosts)
    c.on_state_change(busy)
    c.close()
    started.wait()
elif trigger == "lost":
    c = zklock.Client(hosts)
    lock = c.lock(path)
    lock.acquire()
    lock.on_lost(lambda reason: None)
    c.close()
elif trigger == "leases":
    c = zklock.Client(hosts)
    leases = c.semaphore(path, 2).acquire()
    leases.on_lost(lambda reason: None)
    c.close()
elif trigger == "multi":
    c = zklock.Client(hosts)
    guard = c.multi_lock([c.lock(path + "/a"), c.lock(path + "/b")]).acquire()
    guard.on_lost(lambda member: None)
    c.close()
elif trigger == "async-thread":
    # An event-loop thread inside `async with lock`, over and over, as the main thread exits.
    c = zklock.Client(hosts)
    lock = c.lock(path)

    async def loop_forever() -> None:
        while True:
            async with lock:
                started.set()

    threading.Thread(target=asyncio.run, args=(loop_forever(),), daemon=True).start()
    started.wait()
elif trigger == "dropped":
    # issue 48, item 4: a client out of scope while its lock is held, with a state callback.
    def hold() -> None:
        c = zklock.Client(hosts)
        c.on_state_change(lambda state: None)
        c.lock(path).acquire()

    hold()
    print("held", flush=True)
elif trigger == "atexit-async":
    pass
else:
    raise SystemExit(f"unknown trigger {trigger}")
