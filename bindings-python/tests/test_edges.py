"""The core's hardening, seen from Python: requests over the packet limit, connect errors that say
why, a missing chroot, callbacks that block, and the order of one client's acquisitions."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid

import pytest
from conftest import children, wait_children, wait_until

import zklock


def test_an_oversized_path_or_identifier_is_refused_up_front(client, kazoo, path):
    started = time.monotonic()
    with pytest.raises(zklock.InvalidArgumentError, match="jute.maxbuffer") as err:
        client.lock("/zklock-py-tests/" + "p" * 1_100_000)
    assert "lock path of 1100017 bytes" in str(err.value)
    with pytest.raises(zklock.InvalidArgumentError, match="identifier of 2000000 bytes"):
        client.lock(path, identifier="i" * 2_000_000)
    assert time.monotonic() - started < 1.0
    assert children(kazoo, path) == []
    # The client is unharmed.
    with client.lock(path):
        pass


def test_the_packet_limit_follows_the_servers(zk_connect, path):
    with zklock.Client(zk_connect, jute_maxbuffer=64 * 1024) as small:
        with pytest.raises(zklock.InvalidArgumentError, match="packet limit of 65536 bytes"):
            small.lock(path, identifier="i" * 100_000)
    for bad in (0, -1, 10, 2**32):
        with pytest.raises(zklock.InvalidArgumentError, match="jute_maxbuffer"):
            zklock.Client(zk_connect, jute_maxbuffer=bad)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connect_errors_name_the_cause_and_carry_the_connect_string():
    refused = f"127.0.0.1:{_free_port()}"
    with pytest.raises(zklock.LockTimeout, match="connection refused") as err:
        zklock.Client(refused, connect_timeout=2)
    assert err.value.path == refused
    unknown = "no-such-host.invalid:2181"
    with pytest.raises(zklock.LockTimeout, match="cannot resolve") as err:
        zklock.Client(unknown, connect_timeout=2)
    assert err.value.path == unknown


def test_a_missing_chroot_says_so(zk_connect):
    connect = f"{zk_connect}/zklock-py-no-such-chroot-{uuid.uuid4().hex}"
    with pytest.raises(zklock.ZooKeeperError, match="does not exist") as err:
        zklock.Client(connect)
    assert err.value.code == -101
    assert err.value.path == connect


def test_session_timeouts_past_the_wire_range_are_refused():
    with pytest.raises(zklock.InvalidArgumentError, match="session_timeout|session timeout"):
        zklock.Client("127.0.0.1:1", session_timeout=2_147_484)


def test_a_blocking_callback_stalls_no_session(zk_connect, kazoo, path):
    """Two lost-lock callbacks that block for seconds must not delay another client's work."""
    release = threading.Event()
    called = []
    with zklock.Client(zk_connect) as victim, zklock.Client(zk_connect) as bystander:
        locks = [victim.lock(f"{path}-{i}") for i in range(2)]
        for lock in locks:
            lock.acquire()

            def blocked(reason, lock=lock):
                called.append(lock.path)
                release.wait(30)

            lock.on_lost(blocked)
        for i in range(2):
            for name in children(kazoo, f"{path}-{i}"):
                kazoo.delete(f"{path}-{i}/{name}")
        wait_until(lambda: len(called) >= 1, "a lost-lock callback runs")
        try:
            other = bystander.lock(path)
            started = time.monotonic()
            assert other.acquire(timeout=5)
            other.release()
            assert time.monotonic() - started < 2, "the bystander waited on a blocked callback"
            assert bystander.state == "connected"
            # One callback thread per client, in order: the second waits for the first.
            assert len(called) == 1
        finally:
            release.set()
        # Callbacks run one at a time, in order: the second after the first returned.
        wait_until(lambda: len(called) == 2, "the second callback runs after the first returns")


def test_one_clients_acquisitions_reach_the_server_in_call_order(client, kazoo, path):
    lock = client.lock(path)

    async def main() -> None:
        for _ in range(10):
            order: list[int] = []

            async def contender(i: int) -> None:
                async with lock:
                    order.append(i)

            # Created in order 0..7 with no waiting between: the tasks' first steps run in order
            # of creation, and their creates must reach the server in that order too.
            await asyncio.gather(*(contender(i) for i in range(8)))
            assert order == list(range(8))

    asyncio.run(main())
    wait_children(kazoo, path, 0)


def test_a_request_the_server_keeps_refusing_ends_in_an_error(zk_connect, kazoo, path):
    # Told the servers take 16 MB, the client sends a 2 MB path; the server (1 MB) drops the
    # connection each time: an error that names the limit, not a reconnect storm.
    with zklock.Client(zk_connect, jute_maxbuffer=16 << 20) as client:
        lock = client.lock(path + "/" + "p" * (2 << 20))
        started = time.monotonic()
        with pytest.raises(zklock.ConnectionLossError, match="jute.maxbuffer"):
            lock.acquire(timeout=120)
        assert time.monotonic() - started < 100
        with client.lock(path):  # the client goes on working
            pass
