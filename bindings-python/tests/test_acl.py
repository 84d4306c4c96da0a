"""Access control on lock nodes (``acl=``), against a real ZooKeeper: other clients, through
zklock or as attackers with kazoo, unauthenticated or authenticated as someone else, can list the
queue but can neither delete a holder's node nor queue; their acquisitions fail with
PermissionDeniedError naming the ACL problem and the path, and leave nothing behind; the owner
releases and its node goes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import warnings
from typing import Iterator

import pytest
from conftest import children, wait_children, wait_until
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

import zklock

ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")

# These tests' clients use digest auth over plaintext, which warns (SecurityWarning, asserted by
# the warning's own tests below); the suite's filterwarnings = error would fail them.
pytestmark = pytest.mark.filterwarnings("ignore::zklock.SecurityWarning")


def digest_id(user: str, password: str) -> str:
    """The identity ZooKeeper's digest scheme stores: user:base64(sha1("user:password"))."""
    return f"{user}:" + base64.b64encode(hashlib.sha1(f"{user}:{password}".encode()).digest()).decode()


@pytest.fixture
def alice(zk_connect: str) -> Iterator[zklock.Client]:
    with zklock.Client(zk_connect, auth=ALICE) as c:
        yield c


@pytest.fixture
def bob(zk_connect: str) -> Iterator[zklock.Client]:
    with zklock.Client(zk_connect, auth="bob:bob-secret") as c:
        yield c


@pytest.fixture
def bob_kazoo(zk_connect: str) -> Iterator[KazooClient]:
    observer = KazooClient(hosts=zk_connect, auth_data=[("digest", "bob:bob-secret")])
    observer.start(timeout=15)
    yield observer
    observer.stop()
    observer.close()


def attack(kazoo: KazooClient, path: str, node: str) -> None:
    """What an attacker would do with a plain client: both refused by the server."""
    with pytest.raises(NoAuthError):
        kazoo.delete(f"{path}/{node}")
    with pytest.raises(NoAuthError):
        kazoo.create(f"{path}/_c_00000000-0000-0000-0000-000000000000-lock-", ephemeral=True, sequence=True)


def test_creator_all_world_read_lets_others_list_but_not_delete_or_queue(
    alice, bob, client, kazoo, bob_kazoo, zk_connect, path
):
    lock = alice.lock(path, acl="creator_all_world_read")
    with lock.hold() as token:
        [node] = children(kazoo, path)
        acl, _ = kazoo.get_acls(path)
        assert sorted((a.perms, a.id.scheme, a.id.id) for a in acl) == [
            (zklock.PERM_READ, "world", "anyone"),
            (zklock.PERM_ALL, "digest", "alice:x"),  # the server hides the hash from others
        ]
        for attacker in (kazoo, bob_kazoo):
            assert attacker.get_children(path) == [node]
            attack(attacker, path, node)

        # Through zklock, unauthenticated: it sees the queue and who holds, but cannot queue.
        outsider = client.lock(path)
        [holder] = outsider.contenders()
        assert holder.node == node and holder.identity is not None and holder.identity["lang"] == "python"
        with pytest.raises(zklock.PermissionDeniedError) as denied:
            outsider.acquire(timeout=10)
        assert isinstance(denied.value, PermissionError)
        assert denied.value.path == path and path in str(denied.value)
        assert "NoAuth" in str(denied.value) and "ACL of the lock path" in str(denied.value)
        # Bob, asking for the same preset: the path is alice's.
        with pytest.raises(zklock.PermissionDeniedError, match="does not grant this client \\(digest user bob\\)"):
            bob.lock(path, acl="creator_all_world_read").acquire(timeout=10)
        assert children(kazoo, path) == [node], "nothing of theirs was left"
        assert lock.is_held and lock.fencing_token == token

        # Alice's other client queues behind her.
        with zklock.Client(zk_connect, auth="alice:alice-secret") as alice2:
            second = alice2.lock(path, acl="creator_all_world_read")
            assert not second.acquire(timeout=0)
    wait_children(kazoo, path, 0)
    assert kazoo.exists(path) is not None, "the protected lock path is persistent"


def test_the_asyncio_api_says_so_too(alice, client, kazoo, path):
    async def main() -> None:
        async with alice.lock(path, acl="creator_all_world_read"):
            with pytest.raises(zklock.PermissionDeniedError, match="NoAuth"):
                await client.lock(path).acquire_async(timeout=10)
            assert len(children(kazoo, path)) == 1

    asyncio.run(main())
    wait_children(kazoo, path, 0)


def test_creator_all_hides_the_queue(alice, client, kazoo, path):
    with alice.lock(path, acl="creator_all") as held:
        assert held
        with pytest.raises(NoAuthError):
            kazoo.get_children(path)
        with pytest.raises(zklock.PermissionDeniedError, match="listing the contenders"):
            client.lock(path).contenders()
        assert len(alice.lock(path, acl="creator_all").contenders()) == 1


def test_the_read_write_lock_is_protected_too(alice, bob, kazoo, bob_kazoo, path):
    rw = alice.read_write_lock(path, acl="creator_all_world_read")
    with rw.read:
        [node] = children(kazoo, path)
        attack(bob_kazoo, path, node)
        bob_rw = bob.read_write_lock(path, acl="creator_all_world_read")
        assert [p.mode for p in bob_rw.holders()] == ["read"]
        with pytest.raises(zklock.PermissionDeniedError, match="digest user bob"):
            bob_rw.write.acquire(timeout=10)
        with pytest.raises(zklock.PermissionDeniedError, match="NoAuth"):
            bob.read_write_lock(path).read.acquire(timeout=0)
        assert children(kazoo, path) == [node]
    with rw.write:
        assert len(children(kazoo, path)) == 1
    wait_children(kazoo, path, 0)


def test_a_custom_acl_names_several_users(alice, bob, zk_connect, kazoo, path):
    # Each with ADMIN: only then does the server show a client the digest hashes it checks.
    acl = [
        (zklock.PERM_ALL, "digest", digest_id(*ALICE)),
        (zklock.PERM_ALL, "digest", digest_id(*BOB)),
        (zklock.PERM_READ, "world", "anyone"),
    ]
    with alice.lock(path, acl=acl):
        bob_lock = bob.lock(path, acl=acl)
        assert not bob_lock.acquire(timeout=0), "bob queues (a try: alice holds)"
        with zklock.Client(zk_connect, auth=("carol", "carol-secret")) as carol:
            with pytest.raises(zklock.PermissionDeniedError, match="NoAuth"):
                carol.lock(path).acquire(timeout=0)
    with bob_lock:
        assert len(children(kazoo, path)) == 1
    wait_children(kazoo, path, 0)


def test_an_existing_open_lock_path_is_refused(alice, kazoo, path):
    kazoo.create(path, makepath=True, acl=OPEN_ACL_UNSAFE)
    with pytest.raises(zklock.PermissionDeniedError, match="world:anyone ALL") as denied:
        alice.lock(path, acl="creator_all_world_read").acquire(timeout=10)
    assert "grants more than this lock's ACL (CreatorAllWorldRead) allows" in str(denied.value)
    assert children(kazoo, path) == []


def test_a_semaphore_takes_a_locks_acl(alice, client, kazoo, bob_kazoo, path):
    count = f"{path}-max/count"  # its own parent, made with the ACL: nobody else may remake it
    semaphore = alice.semaphore(path, shared_count_path=count, seed=2, acl="creator_all_world_read")
    with semaphore.acquire() as leases:
        [name] = leases.nodes
        lease = f"{path}/leases/{name}"
        for node in (path, f"{path}/locks", f"{path}/leases", lease, count):
            acl, _ = kazoo.get_acls(node)
            assert sorted((a.perms, a.id.scheme, a.id.id) for a in acl) == [
                (zklock.PERM_READ, "world", "anyone"),
                (zklock.PERM_ALL, "digest", "alice:x"),
            ], node
        for attacker in (kazoo, bob_kazoo):
            with pytest.raises(NoAuthError):
                attacker.delete(lease)
            with pytest.raises(NoAuthError):
                attacker.set(count, (100).to_bytes(4, "big"))
        # Through zklock, unauthenticated: it reads the max and the leases but takes none.
        outsider = client.semaphore(path, shared_count_path=count, seed=2)
        assert outsider.current_max_leases() == 2 and len(outsider.participants().holders) == 1
        with pytest.raises(zklock.PermissionDeniedError, match="NoAuth"):
            outsider.acquire(timeout=10)
        assert children(kazoo, f"{path}/leases") == [name]
    # Bad ACLs are refused here, as a lock's, before any traffic.
    with pytest.raises(zklock.InvalidArgumentError, match="perms 0x40"):
        alice.semaphore(f"{path}-bad", 2, acl=[(64, "world", "anyone")])
    with pytest.raises(zklock.InvalidArgumentError, match="digest auth"):
        client.semaphore(f"{path}-bad", 2, acl="creator_all")
    assert kazoo.exists(f"{path}-bad") is None


@pytest.mark.parametrize(
    "acl, words",
    [
        ("creator-all", 'not "creator-all"'),
        (42, "not 42"),
        ([(zklock.PERM_ALL, "world")], "entry 0"),
        ([(64, "world", "anyone")], "perms 0x40"),
        ([], "empty"),
        ([(zklock.PERM_READ, "world", "anyone")], "READ, CREATE and DELETE"),
        ([(zklock.PERM_ALL, "world", "everyone")], "anyone"),
    ],
)
def test_bad_acls_are_refused_before_any_traffic(alice, kazoo, path, acl, words):
    with pytest.raises(zklock.InvalidArgumentError, match=words) as refused:
        alice.lock(path, acl=acl)
    assert refused.value.path == path
    with pytest.raises(zklock.InvalidArgumentError, match=words):
        alice.read_write_lock(path, acl=acl)
    assert kazoo.exists(path) is None


def test_a_creator_acl_needs_credentials(client, kazoo, path):
    for acl in ("creator_all_world_read", "creator_all"):
        with pytest.raises(zklock.InvalidArgumentError, match="digest auth"):
            client.lock(path, acl=acl)
    with pytest.raises(zklock.InvalidArgumentError, match="digest auth"):
        client.read_write_lock(path, acl=[(zklock.PERM_ALL, "auth", "")])
    # The default, spelled out, is the open lock of before.
    with client.lock(path, acl="open"):
        acl, _ = kazoo.get_acls(path)
        assert [(a.perms, a.id.scheme, a.id.id) for a in acl] == [(zklock.PERM_ALL, "world", "anyone")]
    wait_until(lambda: children(kazoo, path) == [], "the node is gone")


def test_digest_auth_without_tls_warns_once_at_connect(zk_connect, path):
    with pytest.warns(zklock.SecurityWarning) as warned:
        with zklock.Client(zk_connect, auth=ALICE) as alice:
            with alice.lock(path, acl="creator_all"):
                pass
    assert len(warned) == 1, [str(w.message) for w in warned]
    message = str(warned[0].message)
    assert "in clear" in message and "TLS" in message and "alice-secret" not in message
    assert warned[0].filename == __file__, "attributed to the caller's line"
    # A filter that makes it an error raises it at construction.
    with warnings.catch_warnings():
        warnings.simplefilter("error", zklock.SecurityWarning)
        with pytest.raises(zklock.SecurityWarning, match="in clear"):
            zklock.Client(zk_connect, auth="bob:bob-secret")


def test_no_auth_or_sasl_only_does_not_warn(zk_connect):
    sasl_users = os.environ.get("ZK_SASL_USERS")  # scripts/zk run --sasl's
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        zklock.Client(zk_connect).close()
        if sasl_users:
            user, password = sasl_users.split(",")[0].split(":", 1)
            sasl = {"mechanism": "DIGEST-MD5", "username": user, "password": password}
            zklock.Client(zk_connect, sasl_options=sasl).close()
    assert [str(w.message) for w in warned] == []
