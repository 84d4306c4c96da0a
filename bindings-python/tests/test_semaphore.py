"""The counting semaphore (Curator's InterProcessSemaphoreV2 nodes): at most max across processes,
FIFO, n leases all or nothing, a lost lease, a shared count changed at run time, bad input."""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import textwrap
import threading

import pytest
from conftest import Proxy, children, identity, python_child, wait_children, wait_until

import zklock


def leases_of(kazoo, path: str) -> list[str]:
    return children(kazoo, f"{path}/leases")


def mutex_of(kazoo, path: str) -> list[str]:
    return children(kazoo, f"{path}/locks")


def _lease_taker(connect: str, path: str, max_leases: int, rounds: int, holding, peak, over, reached) -> None:
    with zklock.Client(connect) as client:
        semaphore = client.semaphore(path, max_leases=max_leases)
        for _ in range(rounds):
            with semaphore.acquire(timeout=30) as leases:
                assert leases.state == "held"
                with holding.get_lock():
                    holding.value += 1
                    now = holding.value
                    peak.value = max(peak.value, now)
                    if now > max_leases:
                        over.value += 1
                if now == max_leases:
                    reached.set()
                # The first holders stay until max holders are in at once: max is reached, not
                # only never passed (bounded, so a broken semaphore fails rather than hangs).
                reached.wait(timeout=20)
                with holding.get_lock():
                    holding.value -= 1


def test_never_more_than_max_leases_across_processes(kazoo, path, zk_connect):
    context = multiprocessing.get_context("spawn")
    holding, peak, over = context.Value("i", 0), context.Value("i", 0), context.Value("i", 0)
    reached = context.Event()
    processes = [
        context.Process(target=_lease_taker, args=(zk_connect, path, 3, 4, holding, peak, over, reached))
        for _ in range(5)
    ]
    for process in processes:  # started together: each with its own session
        process.start()
    for process in processes:
        process.join(timeout=90)
        if process.is_alive():
            process.kill()
    assert [process.exitcode for process in processes] == [0] * 5
    assert over.value == 0, f"more than 3 leases were held at once ({peak.value})"
    assert peak.value == 3, "3 leases were never held at once"
    assert leases_of(kazoo, path) == [] and mutex_of(kazoo, path) == []


def test_acquirers_are_served_in_the_order_they_queued(client, kazoo, path, zk_connect):
    # Max 1 (Curator's InterProcessSemaphoreMutex): each holds alone, so the order in which they
    # hold is the order in which they passed the mutex.
    first = client.semaphore(path, max_leases=1).acquire()
    assert first is not None
    order: list[str] = []
    names = [f"waiter-{i}" for i in range(4)]
    clients = [zklock.Client(zk_connect) for _ in names]

    def wait(semaphore: zklock.Semaphore, name: str) -> None:
        with semaphore.acquire(timeout=30):
            order.append(name)

    threads = []
    try:
        for i, (other, name) in enumerate(zip(clients, names)):
            thread = threading.Thread(target=wait, args=(other.semaphore(path, 1, identifier=name), name))
            thread.start()
            threads.append(thread)
            queue = wait_children(kazoo, f"{path}/locks", i + 1)  # queued before the next one starts
            assert identity(kazoo, f"{path}/locks", queue[-1])["identifier"] == name
        # The head of the mutex queue has made its lease node and waits for it to fit.
        participants = client.semaphore(path, 1).participants()
        assert (len(participants.holders), participants.waiting_leases, len(participants.queue)) == (1, 1, 4)
        assert participants.holders[0].node == first.nodes[0]
        assert [p.identity["identifier"] for p in participants.queue] == names
        first.release()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        for other in clients:
            other.close()
    assert order == names
    assert leases_of(kazoo, path) == [] and mutex_of(kazoo, path) == []


def test_n_leases_are_all_or_nothing_and_a_timeout_leaves_nothing(client, kazoo, path, zk_connect):
    semaphore = client.semaphore(path, max_leases=3)
    held = semaphore.acquire(2)
    assert held is not None and len(held) == 2 and held.state == "held"
    tokens = held.fencing_tokens
    assert len(tokens) == 2 and tokens[0] < tokens[1] and held.fencing_token == tokens[0]
    assert held.nodes == leases_of(kazoo, path)  # in the order made
    with zklock.Client(zk_connect) as other_client:
        other = other_client.semaphore(path, max_leases=3)
        with pytest.raises(zklock.LockTimeout, match=path):
            other.acquire(2, timeout=0.5)  # one would fit, two do not: it takes none
        assert leases_of(kazoo, path) == held.nodes and mutex_of(kazoo, path) == []
        assert other.acquire(2, blocking=False) is None
        assert leases_of(kazoo, path) == held.nodes and mutex_of(kazoo, path) == []

        async def in_tasks() -> None:
            with pytest.raises(zklock.LockTimeout):
                await other.acquire_async(2, timeout=0.3)
            waiting = asyncio.ensure_future(other.acquire_async(2))
            await asyncio.get_running_loop().run_in_executor(None, wait_children, kazoo, f"{path}/leases", 4)
            waiting.cancel()  # cancelling the task removes its lease nodes and its mutex node
            with pytest.raises(asyncio.CancelledError):
                await waiting

        asyncio.run(in_tasks())
        wait_children(kazoo, f"{path}/leases", 2)
        wait_children(kazoo, f"{path}/locks", 0)
        with other.acquire(1, timeout=5) as one:  # the third still fits
            assert len(leases_of(kazoo, path)) == 3 and one.state == "held"
        assert one.state == "released"
    held.release()
    assert held.state == "released"
    with pytest.raises(zklock.NotOwnerError):
        held.release()
    with pytest.raises(zklock.NotOwnerError):
        held.fencing_tokens  # a released lease's token must not pass for a holder's
    assert leases_of(kazoo, path) == []


def test_a_lease_is_lost_when_its_session_expires(kazoo, path, proxy: Proxy):
    client = zklock.Client(proxy.address, session_timeout=2.0)
    try:
        leases = client.semaphore(path, max_leases=2).acquire()
        assert leases is not None
        reasons: list[str] = []
        lost = threading.Event()
        leases.on_lost(lambda reason: (reasons.append(reason), lost.set()))
        [node] = leases_of(kazoo, path)
        proxy.command("stall")  # the client hears nothing; the server expires the session
        assert lost.wait(timeout=15), "on_lost did not fire"
        assert reasons == [leases.lost_reason] and reasons[0] in ("disconnected_too_long", "session_expired")
        assert leases.state == "lost"
        with pytest.raises(zklock.LockLostError):
            leases.fencing_tokens  # a lost lease's token must not pass for a holder's
        wait_until(lambda: node not in leases_of(kazoo, path), "the server to expire the session")
        with pytest.raises(zklock.LockLostError, match=path):
            leases.release()  # nothing deleted: the node went with the session
        # Released, as in every language, once the release reported the loss.
        assert leases.state == "released" and leases.lost_reason is None
    finally:
        client.close()


def test_the_max_follows_a_shared_count_changed_at_run_time(client, kazoo, path, zk_connect):
    count = f"{path}-count"
    semaphore = client.semaphore(path, shared_count_path=count, seed=1)
    assert (semaphore.max_leases, semaphore.shared_count_path) == (None, count)
    first = semaphore.acquire()
    assert kazoo.get(count)[0] == (1).to_bytes(4, "big")  # made with the seed, as SharedCount does
    got: list[zklock.Leases] = []
    with zklock.Client(zk_connect) as other_client:
        other = other_client.semaphore(path, shared_count_path=count, seed=1)
        waiter = threading.Thread(target=lambda: got.append(other.acquire(timeout=30)))
        waiter.start()
        wait_children(kazoo, f"{path}/leases", 2)  # its lease node made; 2 > 1: it waits
        assert semaphore.participants().waiting_leases == 1
        kazoo.set(count, (2).to_bytes(4, "big"))  # as Curator's SharedCount.setCount writes it
        waiter.join(timeout=30)
        assert got and got[0].state == "held"
        assert first.state == "held" and other.current_max_leases() == 2
        got[0].release()
    first.release()
    assert leases_of(kazoo, path) == []


def test_bad_input_is_refused_before_any_traffic(client, kazoo, path, zk_connect):
    for kwargs, words in [
        ({"max_leases": 0}, "max leases must be at least 1, not 0"),
        ({"max_leases": -1}, "max_leases must be at least 1, not -1"),
        ({}, "needs max_leases"),
        ({"max_leases": 2, "shared_count_path": f"{path}-count", "seed": 1}, "not both"),
        ({"shared_count_path": f"{path}-count"}, "needs seed"),
        ({"shared_count_path": f"{path}-count", "seed": 0}, "seed must be from 1"),
        ({"shared_count_path": "no-slash", "seed": 1}, "shared count path"),
    ]:
        with pytest.raises(zklock.InvalidArgumentError, match=words):
            client.semaphore(path, **kwargs)
    closed = zklock.Client(zk_connect)
    semaphore = closed.semaphore(path, max_leases=3)
    closed.close()
    # Checked before the client is even looked at: a closed client still says what was wrong.
    for n, words in [(0, "not 0"), (-2, "not -2"), (4, "more than the semaphore's max of 3")]:
        with pytest.raises(zklock.InvalidArgumentError, match=words):
            semaphore.acquire(n)
    with pytest.raises(zklock.InvalidArgumentError, match="non-blocking"):
        semaphore.acquire(1, timeout=1, blocking=False)
    assert not kazoo.exists(path)
    # A shared count node that is no count: refused before any lease or mutex node is made.
    kazoo.create(f"{path}-bad-count", b"three", makepath=True)
    with pytest.raises(zklock.InvalidArgumentError, match="holds 5 bytes, not a count"):
        client.semaphore(path, shared_count_path=f"{path}-bad-count", seed=1).acquire(timeout=5)
    assert not kazoo.exists(path)
    # A lock's nodes and a semaphore's refuse each other's path, leaving nothing behind.
    with client.lock(path):
        with pytest.raises(zklock.InvalidArgumentError, match="a semaphore cannot use this path"):
            client.semaphore(path, 2).acquire(timeout=5)
        assert leases_of(kazoo, path) == [] and len(children(kazoo, path)) == 1
    with client.semaphore(f"{path}-sem", 2).acquire():
        with pytest.raises(zklock.InvalidArgumentError, match="semaphore's"):
            client.lock(f"{path}-sem").acquire(timeout=5)
        assert len(leases_of(kazoo, f"{path}-sem")) == 1


def test_asyncio_leases_and_hold(client, kazoo, path):
    semaphore = client.semaphore(path, max_leases=2)

    async def main() -> None:
        async with semaphore.hold(2) as leases:
            assert len(leases) == 2 and leases.state == "held"
            assert leases.nodes == leases_of(kazoo, path)
            with pytest.raises(zklock.LockTimeout):
                await semaphore.acquire_async(timeout=0)
        assert leases.state == "released"
        async with await semaphore.acquire_async() as one:
            assert len(one) == 1
        participants = await semaphore.participants_async()
        assert participants.leases == [] and participants.max_leases == 2

    asyncio.run(main())
    assert leases_of(kazoo, path) == [] and mutex_of(kazoo, path) == []


def test_leases_collected_unreleased_are_released_in_the_background(client, kazoo, path):
    semaphore = client.semaphore(path, max_leases=1)
    with pytest.warns(ResourceWarning, match="Leases collected unreleased"):
        semaphore.acquire()  # not kept: nothing can release them later, so they go now
    wait_children(kazoo, f"{path}/leases", 0)
    with semaphore.acquire(timeout=10) as leases:
        assert leases.state == "held"


def test_max_one_is_a_non_reentrant_mutex_released_from_another_thread(client, kazoo, path):
    semaphore = client.semaphore(path, max_leases=1)
    leases = semaphore.acquire()
    assert semaphore.acquire(blocking=False) is None  # the same thread asking again gets nothing
    released = threading.Thread(target=leases.release)
    released.start()
    released.join(timeout=10)
    assert leases.state == "released" and leases_of(kazoo, path) == []


BLOCKED_IN_ACQUIRE = textwrap.dedent(
    """
    import os, sys, zklock
    client = zklock.Client(os.environ["ZK_CONNECT"])
    semaphore = client.semaphore(os.environ["SEMAPHORE_PATH"], max_leases=2)
    print("acquiring", flush=True)
    try:
        semaphore.acquire(2)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_during_acquire_removes_every_node_it_made(client, kazoo, path):
    held = client.semaphore(path, max_leases=2).acquire()
    child = python_child(BLOCKED_IN_ACQUIRE, env={"SEMAPHORE_PATH": path})
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "acquiring"
        wait_children(kazoo, f"{path}/leases", 3)  # its two lease nodes made: 3 > 2, it waits
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline().strip() == "interrupted"
        assert child.wait(timeout=10) == 3
        # Removed as the acquisition is dropped, long before its session could time out.
        wait_children(kazoo, f"{path}/leases", 1, timeout=2)
        wait_children(kazoo, f"{path}/locks", 0, timeout=2)
    finally:
        if child.poll() is None:
            child.kill()
        child.communicate()
    held.release()


def test_a_cut_connection_suspends_leases_and_a_multi_guard_until_it_comes_back(kazoo, path, proxy: Proxy):
    with zklock.Client(proxy.address, session_timeout=10.0) as client:
        semaphore = client.semaphore(path, max_leases=2)
        lost: list[object] = []
        with semaphore.acquire() as leases, client.multi_lock([client.lock(f"{path}-lock")]).acquire() as guard:
            leases.on_lost(lost.append)
            guard.on_lost(lost.append)
            proxy.command("cut")  # connections reset; the session lives on for its timeout
            wait_until(lambda: (leases.state, guard.state) == ("suspended", "suspended"), "both to be suspended")
            proxy.command("pass")
            wait_until(lambda: (leases.state, guard.state) == ("held", "held"), "both held again", timeout=10)
        assert lost == []
    assert leases_of(kazoo, path) == [] and children(kazoo, f"{path}-lock") == []


def test_leases_are_labelled_after_their_acquirer_or_the_label_given(client, path):
    """`zklock status` showed a Python semaphore's leases owned by a bare id
    (9223372036854775809): they carry the acquiring thread's or task's label, as a lock's nodes
    do, or the semaphore's `label=`."""
    semaphore = client.semaphore(path, max_leases=5)

    def owners() -> list[str]:
        return [lease.identity["owner"] for lease in semaphore.participants().holders]

    with semaphore.acquire(1):
        assert owners() == [f"thread:{threading.current_thread().name}"]

    seen: list[list[str]] = []

    def in_thread() -> None:
        with semaphore.acquire(1):
            seen.append(owners())

    worker = threading.Thread(target=in_thread, name="worker-7")
    worker.start()
    worker.join(timeout=30)
    assert seen == [["thread:worker-7"]]

    async def in_task() -> None:
        async with semaphore.hold(2):
            assert owners() == ["task:nightly", "task:nightly"]

    async def main() -> None:
        await asyncio.create_task(in_task(), name="nightly")

    asyncio.run(main())
    labelled = client.semaphore(path, max_leases=5, label="billing-job")
    with labelled.acquire(1):
        assert owners() == ["billing-job"]
    assert owners() == []
