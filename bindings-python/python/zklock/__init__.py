"""zklock: a fair, reentrant ZooKeeper lock that behaves like ``threading.RLock``.

The recipes (Apache Curator's InterProcessMutex, InterProcessReadWriteLock, InterProcessSemaphoreV2
and InterProcessMultiLock, node for node, the multi-lock without its deadlock)
live in the Rust core; this package translates types, errors, ownership and blocking. Owners: the
sync API acquires for the calling thread, the asyncio API for the current task.

    with zklock.Client("127.0.0.1:2181") as client:
        lock = client.lock("/locks/report")
        with lock:
            ...
        rw = client.read_write_lock("/locks/catalog")
        with rw.read:
            ...
        with client.semaphore("/jobs/nightly", max_leases=3).acquire(2) as leases:
            ...
        with client.multi_lock([client.lock("/accounts/a"), client.lock("/accounts/b")]).acquire():
            ...
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import threading
import weakref
from types import TracebackType
from typing import (
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    Generic,
    Iterator,
    List,
    Literal,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
    overload,
)

from . import _native
from ._errors import (
    AuthFailedError,
    ClosedError,
    ConnectionLossError,
    DeadlockError,
    InvalidArgumentError,
    LockLostError,
    LockTimeout,
    NotOwnerError,
    PermissionDeniedError,
    SecurityWarning,
    SessionExpiredError,
    ZkLockError,
    ZooKeeperError,
    attach_release_error,
)
from ._identity import ParticipantIdentity
from ._native import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_SESSION_TIMEOUT,
    PERM_ADMIN,
    PERM_ALL,
    PERM_CREATE,
    PERM_DELETE,
    PERM_READ,
    PERM_WRITE,
    Participant,
    SemaphoreParticipants,
)

# Spelled out: type checkers (mypy, stubtest) read only literal lists, not `_errors.__all__`.
__all__ = [
    "Client",
    "Lock",
    "ReadWriteLock",
    "Semaphore",
    "Leases",
    "SemaphoreParticipants",
    "MultiLock",
    "MultiGuard",
    "MemberLost",
    "MultiLockMember",
    "Participant",
    "ParticipantIdentity",
    "ZkLockError",
    "InvalidArgumentError",
    "LockTimeout",
    "NotOwnerError",
    "SessionExpiredError",
    "LockLostError",
    "ConnectionLossError",
    "AuthFailedError",
    "ClosedError",
    "DeadlockError",
    "PermissionDeniedError",
    "ZooKeeperError",
    "SecurityWarning",
    "Acl",
    "PERM_READ",
    "PERM_WRITE",
    "PERM_CREATE",
    "PERM_DELETE",
    "PERM_ADMIN",
    "PERM_ALL",
    "DEFAULT_SESSION_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
]

#: zklock's version: one number for the crate, the wheel and the npm package (Cargo.toml's).
__version__: str = _native.__version__

#: A lock's ``acl=``: who may queue for, delete in and read it. ``"open"`` (the default: anyone
#: may do anything, so any client can delete a holder's node); ``"creator_all_world_read"`` (full
#: rights for the clients authenticated as the creator, read for everyone: others see the queue
#: but can neither queue nor delete); ``"creator_all"`` (others cannot even list the queue); or
#: custom ``(perms, scheme, id)`` entries, perms from ``PERM_*`` (e.g.
#: ``(PERM_ALL, "digest", "user:" + base64(sha1(b"user:password")))``, ``(PERM_READ, "world",
#: "anyone")``, ``(PERM_ALL, "sasl", "alice")``). The creator presets need ``auth`` or
#: ``sasl_options`` on the client (the creator is its digest user and its SASL identity).
Acl = Union[Literal["open", "creator_all_world_read", "creator_all"], Sequence[Tuple[int, str, str]]]

# Owner of each asyncio task. Keyed weakly by the task itself, not by id(task): ids are reused
# once a task is garbage collected, and a new task must never inherit an old one's hold.
_task_owners: "weakref.WeakKeyDictionary[asyncio.Task[Any], _native.Owner]" = weakref.WeakKeyDictionary()


def _current_task() -> Optional["asyncio.Task[Any]"]:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running event loop in this thread
        return None


def _task_owner(create: bool = True) -> Optional[_native.Owner]:
    task = _current_task()
    if task is None:
        raise RuntimeError("zklock's asyncio API must be awaited inside an asyncio task")
    owner = _task_owners.get(task)
    if owner is None and create:
        owner = _task_owners[task] = _native.Owner(f"task:{task.get_name()}")
    return owner


class _Subscription:
    """A registered callback, until cancelled: the native side keeps calling this object, which
    calls the callback only while registered."""

    __slots__ = ("_callback",)

    def __init__(self, callback: Callable[..., Any]) -> None:
        self._callback: Optional[Callable[..., Any]] = callback

    def __call__(self, *args: Any) -> None:
        # (A collection may have cleared the slot, the subscription being garbage in a cycle
        # whose native side still held a call of it: then there is nothing to call.)
        callback = getattr(self, "_callback", None)
        if callback is not None:
            callback(*args)

    def cancel(self) -> None:
        self._callback = None


# The callback threads: Python threads that run what the runtime hands to Python (user callbacks
# and asyncio completions; see bindings-python/src/callbacks.rs), so that no thread of zklock's
# own ever enters the interpreter. One is idle at any time (started when the last idle one takes
# a job, exiting when another is idle): a user callback that blocks holds up only its own
# client's later callbacks. Made in the process that first makes a client (again after a fork).
_callbacks_lock = threading.Lock()
_callbacks_pid = -1
_callbacks_idle = 0
_callbacks_pipe = -1


def _start_callback_thread() -> bool:
    global _callbacks_idle
    thread = threading.Thread(target=_callback_worker, args=(_callbacks_pipe,), name="zklock-callbacks", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # "can't create new thread at interpreter shutdown": the others go on
        return False
    _callbacks_idle += 1
    return True


def _ensure_callback_threads() -> None:
    global _callbacks_pid, _callbacks_pipe, _callbacks_idle
    if _callbacks_pid == os.getpid():
        return
    with _callbacks_lock:
        if _callbacks_pid == os.getpid():
            return
        read, write = os.pipe()
        os.set_blocking(write, False)
        _callbacks_pipe, _callbacks_idle = read, 0
        if _start_callback_thread():
            _callbacks_pid = os.getpid()
            _native._callback_pipe(write)


def _callback_worker(pipe: int) -> None:
    global _callbacks_idle
    take = _native._take_callback
    while True:
        job = take()
        if job is None:
            os.read(pipe, 1)  # the interpreter may end this thread here, at exit: CPython's frames only
            continue
        callable_, args, finished = job
        if callable_ is None:  # a reference to let go of, here
            del job, args
            continue
        with _callbacks_lock:
            _callbacks_idle -= 1
            if _callbacks_idle == 0:
                _start_callback_thread()
        try:
            callable_(*args)
        except BaseException as exc:  # noqa: B036 - reported, as the interpreter reports an exception in __del__
            _native._unraisable(exc, callable_)
            del exc
        # Its turn is over: the client's next callback may run.
        del job, callable_, args, finished
        with _callbacks_lock:
            if _callbacks_idle > 0:
                return
            _callbacks_idle += 1


class Client(_native.Client):
    """A ZooKeeper client: one session at a time, shared by every lock made from it.

    ``Client(hosts)`` connects (blocking, GIL released, Ctrl-C interrupts it). ``hosts`` is
    ``"host:port[,host:port...][/chroot]"``; ``auth`` is ``"user:password"`` or
    ``(user, password)`` for ZooKeeper's digest scheme (without ``use_ssl`` the password crosses
    the network in clear: connecting warns, ``SecurityWarning``). ``jute_maxbuffer`` is the servers'
    packet limit in bytes (default 0xfffff, ZooKeeper's): a lock whose path, identifier or owner
    would make a larger request is refused with ``InvalidArgumentError``, since the server would
    only drop the connection. Use it as a context manager, or call
    ``close()``: closing ends the session, so the server deletes its lock nodes at once.
    Clients still open at interpreter exit are closed then. After ``fork()`` a child process
    can make clients of its own; a client inherited from the parent is closed there (``closed``
    is True, ``state`` is ``"closed"``, ``close()`` does nothing) and its locks raise
    ``ClosedError``.

    TLS, with kazoo's names: ``use_ssl=True`` reaches every server on its ``secureClientPort``.
    ``ca`` is the CA bundle file (PEM) the servers' certificates must chain to (required: no
    system store is consulted); ``certfile`` and ``keyfile`` the client's certificate chain and
    key files (PEM), for mutual TLS and ZooKeeper's x509 auth; ``keyfile_password`` the
    password of an encrypted key (PKCS#8). All are paths, read at connect. Unlike kazoo's,
    host names are checked by default: ``check_hostname=False`` turns that off (the chain is
    still verified), ``server_hostname`` verifies (and sends as SNI) that name instead of each
    host of ``hosts``. ``verify_certs=False`` verifies nothing, for tests only. Bad TLS
    arguments (an unreadable file, a wrong key password, TLS arguments without ``use_ssl``)
    raise ``InvalidArgumentError`` before any network traffic, and no message shows a key or
    its password; a refused handshake ends in ``LockTimeout`` naming its cause.
    """

    def __init__(
        self,
        hosts: str,
        *,
        session_timeout: Optional[float] = None,
        connect_timeout: Optional[float] = None,
        auth: Union[str, Tuple[str, str], None] = None,
        jute_maxbuffer: Optional[int] = None,
        sasl_options: Optional[Dict[str, str]] = None,
        use_ssl: bool = False,
        ca: Union[str, "os.PathLike[str]", None] = None,
        certfile: Union[str, "os.PathLike[str]", None] = None,
        keyfile: Union[str, "os.PathLike[str]", None] = None,
        keyfile_password: Optional[str] = None,
        verify_certs: bool = True,
        check_hostname: Optional[bool] = None,
        server_hostname: Optional[str] = None,
    ) -> None:
        """Connects to ``hosts`` (``"host:port[,host:port...][/chroot]"``), blocking until a
        session is established or ``connect_timeout`` seconds pass (then ``LockTimeout``).
        ``session_timeout`` is asked of the server, in seconds. Either left out (or None) is the
        core's default, ``DEFAULT_SESSION_TIMEOUT`` and ``DEFAULT_CONNECT_TIMEOUT`` (10 s each,
        the same in every language). ``auth`` is
        ``"user:password"`` or ``(user, password)`` (digest); ``jute_maxbuffer`` is the servers'
        packet limit in bytes, if they allow more than ZooKeeper's default.

        ``sasl_options`` authenticates every connection with SASL, in kazoo's words:
        ``{"mechanism": "DIGEST-MD5", "username": ..., "password": ...}``, or
        ``{"mechanism": "GSSAPI", "principal": "alice@EXAMPLE.COM"}`` for Kerberos with the
        default credential cache, plus ``"keytab"`` (a path) or ``"credential_cache"``, and
        ``"service"`` (default ``"zookeeper"``) and ``"host"`` for the servers' principals.
        Refused credentials raise ``AuthFailedError`` at once; Kerberos needs MIT Kerberos's
        ``libgssapi_krb5.so.2`` on the host (``InvalidArgumentError`` says so if it is missing).
        ``use_ssl`` and the TLS arguments after it: see the class."""
        # The native constructor connected already; this only registers for the exit hook.
        _open_clients.add(self)
        _ensure_callback_threads()

    def on_state_change(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """Calls ``callback(state)`` on each session state change (``"connected"``,
        ``"disconnected"``, ``"expired"``, ``"auth_failed"``, ``"closed"``), on the client's
        callback thread (in order, after the client's earlier callbacks), holding the GIL.
        Returns a function that unregisters it: once it returns, ``callback`` is not called
        again (but for a call already running), and nothing of the registration is kept."""
        key = super().on_state_change(callback)  # a callable, or refused there
        client = weakref.ref(self)

        def cancel() -> None:
            alive = client()
            if alive is not None:
                alive._cancel_state_change(key)

        return cancel

    def lock(self, path: str, *, identifier: Optional[str] = None, acl: Optional[Acl] = None) -> "Lock":
        """A fair, reentrant lock on ``path`` (nothing is sent until the first acquisition).

        ``acl`` (see ``zklock.Acl``) protects its nodes: the lock path (made persistent, not a
        container) and every lock node get it, and an existing lock path whose ACL grants others
        more is refused with ``PermissionDeniedError``. A creator preset on a client without
        ``auth`` raises ``InvalidArgumentError`` here, before any network traffic."""
        return Lock(self, path, identifier=identifier, acl=acl)

    def read_write_lock(
        self, path: str, *, identifier: Optional[str] = None, acl: Optional[Acl] = None
    ) -> "ReadWriteLock":
        """A fair read/write lock on ``path``: ``.read`` is shared, ``.write`` exclusive (nothing
        is sent until the first acquisition). ``acl`` as for ``lock``."""
        return ReadWriteLock(self, path, identifier=identifier, acl=acl)

    def semaphore(
        self,
        path: str,
        max_leases: Optional[int] = None,
        *,
        shared_count_path: Optional[str] = None,
        seed: Optional[int] = None,
        identifier: Optional[str] = None,
        acl: Optional[Acl] = None,
        label: Optional[str] = None,
    ) -> "Semaphore":
        """A counting semaphore on ``path`` (Curator's InterProcessSemaphoreV2, node for node):
        at most ``max_leases`` leases at once; or as many as the shared count at
        ``shared_count_path`` says, a 4-byte int as Curator's ``SharedCount`` stores it (made
        with ``seed`` if missing; change it at run time and waiters follow). Sends nothing; a
        max below 1, or a missing or extra argument, raises ``InvalidArgumentError`` here.

        ``acl`` as for ``lock``: by default open, as Curator makes the nodes (anyone may delete
        a lease or change the count); otherwise every node the semaphore makes (its path, its
        internal mutex and lease parent, the leases, the shared count) gets it, and an existing
        one whose ACL grants others more is refused with ``PermissionDeniedError``.

        ``label`` is the owner label of its nodes, which ``zklock status`` shows (at most 1,024
        bytes); by default each acquisition's are labelled after the acquiring thread
        (``thread:<name>``) or asyncio task (``task:<name>``), as a lock's are."""
        return Semaphore(
            self,
            path,
            max_leases,
            shared_count_path=shared_count_path,
            seed=seed,
            identifier=identifier,
            acl=acl,
            label=label,
        )

    def multi_lock(self, members: "Sequence[MultiLockMember]") -> "MultiLock":
        """Several locks taken together, all or none: each member a ``Lock`` (a mutex, or a side
        of a read/write lock), a ``Semaphore`` (one lease) or a ``(semaphore, n)`` pair (n leases).
        Members may come from other clients too. See ``MultiLock``. Sends nothing."""
        return MultiLock(members)

    def __enter__(self) -> "Client":
        return self


_open_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    _native._at_exit(list(_open_clients))


def _after_fork_in_child() -> None:
    # The child has no callback threads (made again with its first client), and the lock may
    # have been held by one of the parent's.
    global _callbacks_pid, _callbacks_lock
    _callbacks_pid, _callbacks_lock = -1, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


async def _decided(acquired: bool, unawaited: "_Unawaited") -> bool:
    """An acquisition decided at the call, as the coroutine ``Lock.acquire_async`` always gives."""
    unawaited.started()
    return acquired


class _Unawaited:
    """Gives up an ``acquire_async()`` whose coroutine is collected without ever running. Passed
    to the coroutine, it is freed with it, and then, unless the coroutine started, gives up the
    acquisition (``_abandoned``). A plain object rather than a ``weakref.finalize`` per
    acquisition (a weak reference, a registry entry and its removal: issue 52). As the finalizer
    did (``atexit=False``), nothing is given up at interpreter exit."""

    __slots__ = ("abandon",)

    def __init__(
        self,
        lock: "Lock",
        owner: _native.Owner,
        operation: Union[bool, _native.AsyncOp],
        future: "asyncio.Future[bool]",
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.abandon: Optional[Tuple[Any, ...]] = (lock, owner, operation, future, loop)

    def started(self) -> None:
        self.abandon = None  # the coroutine runs: it settles the acquisition itself

    def __del__(self) -> None:
        abandon, self.abandon = self.abandon, None
        if abandon is not None and not sys.is_finalizing():
            _abandoned(*abandon)


def _abandoned(
    lock: "Lock",
    owner: _native.Owner,
    operation: Union[bool, _native.AsyncOp],
    future: "asyncio.Future[bool]",
    loop: asyncio.AbstractEventLoop,
) -> None:
    """``acquire_async()``'s coroutine was collected without ever running."""
    if isinstance(operation, bool):
        if operation:
            lock._release_async(owner)  # the level counted at the call
        return
    operation.cancel()  # drops the acquisition in the runtime: core removes its node

    def give_back() -> None:
        # Cancelled, a settle arriving later gives back what it got (see _settle_acquire).
        if future.done() and not future.cancelled() and future.exception() is None and future.result():
            lock._release_async(owner)
        future.cancel()

    try:
        loop.call_soon_threadsafe(give_back)
    except RuntimeError:  # the loop is closed: its settles will not run either
        pass


#: A grant given back because it came while the task's event loop was stopped: queue again.
_RETRY: Any = object()


class _LockAttempt:
    """One ``Lock.acquire_async``: its native acquisitions (a second one if the first was granted
    while the loop was stopped), each with its future."""

    __slots__ = ("lock", "owner", "loop", "deadline", "future", "operation")

    def __init__(
        self, lock: "Lock", owner: _native.Owner, loop: asyncio.AbstractEventLoop, timeout: Optional[float]
    ) -> None:
        self.lock, self.owner, self.loop = lock, owner, loop
        forever = timeout is None or timeout == -1 or not timeout >= 0
        self.deadline: Optional[float] = None if forever else loop.time() + float(timeout or 0.0)
        self.future: "asyncio.Future[Any]" = loop.create_future()
        self.operation: Optional[_native.AsyncOp] = None

    def remaining(self) -> Optional[float]:
        return None if self.deadline is None else max(0.0, self.deadline - self.loop.time())

    def begin(self, timeout: Optional[float]) -> Union[bool, _native.AsyncOp]:
        future = self.future = self.loop.create_future()
        loop: asyncio.AbstractEventLoop = self.loop
        begun: "list[_native.AsyncOp]" = []

        def done(ok: bool, value: Any) -> None:  # on a callback thread, holding the GIL
            operation = begun[0] if begun else None
            if ok and value is True and operation is not None and not loop.is_running():
                # Nobody can receive it now (a loop stopped, maybe for good): give it back.
                operation.cancel()
                value = _RETRY
            try:
                # (On the loop, after begin() returned: the operation is known there.)
                loop.call_soon_threadsafe(_settle_acquire, future, ok, value, begun)
            except RuntimeError:  # the loop is closed: nobody will use the lock, give it back
                if operation is not None:
                    operation.cancel()

        operation = self.lock._acquire_async(self.owner, timeout, done)
        if not isinstance(operation, bool):
            begun.append(operation)
            self.operation = operation
        return operation


class Lock(_native.Lock):
    """A fair, reentrant distributed mutex that behaves like ``threading.RLock``.

    Sync API (owner: the calling thread): ``acquire(blocking=True, timeout=-1)``, ``release()``,
    ``with lock:``, ``with lock.hold(timeout=...)``. Blocking calls release the GIL; Ctrl-C in
    ``acquire()`` raises KeyboardInterrupt and removes the attempt's node.

    asyncio API (owner: the current task): ``await acquire_async(timeout=None)``,
    ``await release_async()``, ``async with lock:``, ``async with lock.hold(timeout=...)``.
    Cancelling the task removes its attempt's node; the event loop never blocks.

    Timeouts (seconds): None, -1 or ``math.inf`` wait as long as it takes, also through ZooKeeper
    outages of any length: when the session ends meanwhile the acquisition tries for a new one
    again after each connect timeout and queues again on it; it never raises ``LockTimeout``. 0
    (or ``blocking=False``) only tries, answering within 2 s: True, False (someone else holds), or
    ``ConnectionLossError`` if ZooKeeper could not be reached by then; a positive timeout gives
    False within 100 ms of it, the server reachable or not. ``contenders()``, ``holder()`` and
    ``holders()`` answer too, or raise ``ConnectionLossError`` once unanswered for 2 s (or the
    connection's read timeout, 2/5 of the session timeout, if longer).

    ``mode`` is ``"exclusive"`` for the mutex of ``client.lock``, ``"read"`` or ``"write"`` for
    the sides of a ``ReadWriteLock``, which are Locks in every other respect.
    """

    # --------------------------------------------------------------- asyncio

    def acquire_async(self, timeout: Optional[float] = None) -> Coroutine[Any, Any, bool]:
        """Acquires for the task that calls this (not the one that awaits the result, such as
        the inner task of ``asyncio.wait_for`` or ``gather``). ``timeout``: None waits forever
        (through outages and new sessions: see the class), 0 only tries (within 2 s;
        ``ConnectionLossError`` if ZooKeeper could not be reached). The awaitable gives False if
        not acquired in time.

        The acquisition begins at the call: the creates of one client's acquisitions reach the
        server in the order the calls were made. A task cancelled (or timed out by
        ``asyncio.timeout``) is never left holding: once the CancelledError (or TimeoutError)
        reaches it, ``is_held`` and ``state`` say so. The lock granted while the task's event
        loop is stopped is given back at once (nobody could receive it, and a loop stopped for
        good would keep it forever); if the loop runs again, the task queues again, for what
        is left of ``timeout``."""
        owner = _task_owner()
        assert owner is not None
        attempt = _LockAttempt(self, owner, asyncio.get_running_loop(), timeout)
        operation = attempt.begin(timeout)
        # Dropped without ever being awaited: the acquisition is given up (its node removed), or
        # the level it got given back, rather than held until the client closes.
        unawaited = _Unawaited(self, owner, operation, attempt.future, attempt.loop)
        if isinstance(operation, bool):
            # Decided at once (a re-entry, or a try the core answered already): no thread hop.
            # Still a coroutine, so that asyncio.create_task() takes it whichever way it went.
            return _decided(operation, unawaited)
        return self._finish_acquire(attempt, unawaited)

    async def _finish_acquire(self, attempt: "_LockAttempt", unawaited: "_Unawaited") -> bool:
        unawaited.started()
        del unawaited
        while True:
            future, operation = attempt.future, attempt.operation
            assert operation is not None
            try:
                acquired = await future
            except asyncio.CancelledError:
                # Drops the acquisition in the runtime (core removes its node), or gives back, here
                # and now, a grant that had not reached the task.
                operation.cancel()
                if future.done() and not future.cancelled() and future.exception() is None and future.result() is True:
                    self._release_async(attempt.owner)  # received just before the cancel: given back now
                raise
            if acquired is not _RETRY:
                return bool(acquired)
            # Granted while the loop was stopped, and given back: queue again.
            again = attempt.begin(attempt.remaining())
            if isinstance(again, bool):
                return again

    async def release_async(self) -> None:
        """Releases one level of the current task's hold (``NotOwnerError`` if it holds none)."""
        owner = _task_owner()
        assert owner is not None
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[bool]" = loop.create_future()

        def done(ok: bool, value: Any) -> None:
            try:
                loop.call_soon_threadsafe(_settle, future, ok, value)
            except RuntimeError:
                pass

        # An inner level (or NotOwnerError) finishes at once, with no network. Otherwise not
        # cancellable: a release runs to completion so that no node is left behind.
        if not self._release_async(owner, done):
            await future

    async def holder_async(self) -> Optional[Participant]:
        """As ``holder()``, without blocking the event loop: the query runs in the loop's default
        executor, whose thread waits with the GIL released."""
        return await asyncio.get_running_loop().run_in_executor(None, self.holder)

    async def contenders_async(self) -> "list[Participant]":
        """As ``contenders()``, without blocking the event loop (see ``holder_async``)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.contenders)

    async def holders_async(self) -> "list[Participant]":
        """As ``holders()``, without blocking the event loop (see ``holder_async``)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.holders)

    async def __aenter__(self) -> bool:
        return await self.acquire_async()

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await _leave_async(self.release_async, exc)

    # --------------------------------------------------------------- both

    def hold(self, timeout: Optional[float] = None) -> "_Hold":
        """A context manager (``with`` or ``async with``) that acquires, raising ``LockTimeout``
        (a ``TimeoutError``) if the lock is not obtained within ``timeout`` seconds (None waits
        forever, through outages and new sessions), and releases on exit. It gives the lock's fencing token."""
        return _Hold(self, timeout)

    def _caller_owners(self) -> Iterator[_native.Owner]:
        """The current task when called inside one, else the calling thread: the owner that
        ``release_async`` or ``release`` would release for. (Inside a coroutine the views are the
        task's: a sync ``with lock:`` there holds for the thread, as ``release()`` would release
        it, but ``is_held`` answers for the task, as ``release_async()`` would; use ``async with``
        in coroutines.)"""
        if _current_task() is not None:
            owner = _task_owner(create=False)
            if owner is not None:
                yield owner
            return
        yield _native.Owner.current_thread()

    def _caller_hold(self) -> Optional[Tuple[str, int, int, int]]:
        for owner in self._caller_owners():
            held = self._hold_of(owner)
            if held is not None:
                return held
        return None

    @property
    def is_held(self) -> bool:
        """Whether the caller (current task, else thread) holds the lock and may act on it:
        ``state == "held"``. False while ``"suspended"`` (the node may still be ours, but the
        server may be about to let the next holder in) and once ``"lost"``."""
        held = self._caller_hold()
        return held is not None and held[0] == "held"

    @property
    def state(self) -> Optional[Literal["held", "suspended", "lost"]]:
        """The caller's hold: ``"held"``, ``"suspended"`` (connection down: stop touching the
        resource) or ``"lost"``; None if the caller holds nothing."""
        held = self._caller_hold()
        return None if held is None else held[0]  # type: ignore[return-value]

    @property
    def fencing_token(self) -> Optional[int]:
        """The caller's hold's fencing token (creation zxid of its node, rising across holders);
        None if the caller holds nothing. ``LockLostError`` if its hold was lost: a lost hold is
        not held, and its token must not pass for a holder's."""
        for owner in self._caller_owners():
            return self._fencing_token_of(owner)
        return None

    @property
    def sequence(self) -> Optional[int]:
        """The sequence number ZooKeeper gave the caller's lock node; as ``fencing_token``, None
        if the caller holds nothing and ``LockLostError`` if its hold was lost."""
        for owner in self._caller_owners():
            return self._sequence_of(owner)
        return None

    @property
    def client(self) -> "Client":
        """The client this lock was made from."""
        client = super().client
        assert isinstance(client, Client)
        return client

    # ------------------------------------------- threading.Condition(lock), as with RLock

    def condition(self) -> threading.Condition:
        """``threading.Condition(lock)``, typed: a condition variable over this lock for threads.
        ``wait()`` releases every level of the calling thread's hold and restores them after.
        (Type checkers take only the standard library's own locks for ``threading.Condition``'s
        argument, as typeshed declares it, so ``threading.Condition(lock)`` itself needs a cast
        there; this does not.)"""
        return threading.Condition(self)  # type: ignore[arg-type]  # an RLock in all but name

    def _is_owned(self) -> bool:
        return self._hold_of(_native.Owner.current_thread()) is not None

    def _release_save(self) -> int:
        """Releases every level of the calling thread's hold (``Condition.wait``); returns the
        count for ``_acquire_restore``."""
        owner = _native.Owner.current_thread()
        if self._hold_of(owner) is None:
            raise RuntimeError("cannot wait on un-acquired lock")
        return self._release_every_level(owner)

    def _acquire_restore(self, count: int) -> None:
        """Acquires again, with as many levels as ``_release_save`` released."""
        self._acquire_levels(_native.Owner.current_thread(), count)

    def on_lost(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """Calls ``callback(reason)`` once for each hold of this lock that is lost:
        ``"session_expired"``, ``"disconnected_too_long"``, ``"closed"``, ``"node_deleted"`` or
        ``"auth_failed"``.

        It covers every hold of the lock, by any thread or task, taken before it was registered
        (unless lost already) or after, through this ``Lock`` or another of the client for the
        same path (they are one lock); a hold is reported once, whatever its levels, and never
        once released. The rule is the core's, the same in every language. The callback runs on
        the client's callback thread (one per client: callbacks run one at a time, in order, so
        one that blocks delays only the later ones, never a session), holding the GIL; an
        exception it raises goes to ``sys.unraisablehook``.

        Returns a function that unregisters ``callback``: once it returns, ``callback`` is not
        called again (but for a call already running). It stays registered until then, or until
        this ``Lock`` object is collected."""
        key = self._on_lost(callback)  # a callable, or refused there
        lock = weakref.ref(self)

        def cancel() -> None:
            alive = lock()
            if alive is not None:
                alive._cancel_on_lost(key)

        return cancel


class ReadWriteLock(_native.ReadWriteLock):
    """A fair read/write lock (Apache Curator's InterProcessReadWriteLock, node for node):
    ``read`` lets many owners hold at once, ``write`` one owner, and no reader while a writer
    holds. Each side is a ``Lock`` with all of its API (sync and asyncio, reentrant per owner,
    ``hold()``, ``is_held``, ``fencing_token``, ``on_lost``...).

    A reader that comes after a waiting writer waits behind it. The write holder may take the
    read side (downgrade: it reads on its write node), release the write side and go on reading;
    writers already waiting stay out until the read is released too. A reader that asks for the
    write side gets ``DeadlockError`` at once (release the read side first).
    """

    def __init__(  # pyright: ignore[reportInconsistentConstructor]  # the same signature, _native's alias
        self, client: Client, path: str, *, identifier: Optional[str] = None, acl: Optional[Acl] = None
    ) -> None:
        # The native constructor made the pair; its two sides share one table of owners.
        # `_side` is left out of the public signature (and so of the stub).
        self._read = Lock(client, path, _side=self._side("read"))  # type: ignore[call-arg]
        self._write = Lock(client, path, _side=self._side("write"))  # type: ignore[call-arg]

    @property
    def read(self) -> Lock:
        """The read side: shared with other readers."""
        return self._read

    @property
    def write(self) -> Lock:
        """The write side: exclusive."""
        return self._write

    @property
    def client(self) -> "Client":
        """The client this lock was made from."""
        client = super().client
        assert isinstance(client, Client)
        return client

    async def contenders_async(self) -> "list[Participant]":
        """As ``contenders()``, without blocking the event loop (see ``Lock.holder_async``)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.contenders)

    async def holders_async(self) -> "list[Participant]":
        """As ``holders()``, without blocking the event loop (see ``Lock.holder_async``)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.holders)


_Self = TypeVar("_Self", bound="_Releasable")


class _Releasable:
    """What an acquisition gives (``Leases``, ``MultiGuard``): a context manager, ``with`` and
    ``async with``, that releases on leaving the block (a failed release rides along on the
    block's own exception, as for a lock)."""

    __slots__ = ()

    def release(self) -> None:
        raise NotImplementedError

    async def release_async(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        _leave(self.release, exc)

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        await _leave_async(self.release_async, exc)

    def __repr__(self) -> str:
        return repr(getattr(self, "_native"))


class Leases(_Releasable):
    """Leases taken together by one ``Semaphore.acquire`` (n of them, all or nothing). Not owned
    by a thread or a task: any may release them, once. A context manager, ``with`` and
    ``async with``: released on leaving the block.

    Each lease is a node of its own with its fencing token (``fencing_tokens``; the creation
    zxid, rising across the leases of a path). ``state`` is ``"held"``, ``"suspended"`` (the
    connection is down: stop touching the resource), ``"lost"`` if any lease is (session expired,
    client closed, node deleted), or ``"released"``; ``on_lost`` calls back on the first loss.
    """

    # `_semaphore` keeps its client: a Client collected unclosed closes its session, which would
    # lose leases kept alone (`leases = zklock.Client(hosts).semaphore(path).acquire()`).
    __slots__ = ("_native", "_semaphore")

    def __init__(self, native: _native.Leases, semaphore: Semaphore) -> None:
        self._native = native
        self._semaphore = semaphore

    @property
    def path(self) -> str:
        """The semaphore's path."""
        return self._native.path

    @property
    def nodes(self) -> List[str]:
        """Each lease node's name (``_c_<uuid>-lease-<sequence>``), in the order they were made."""
        return self._native.nodes

    @property
    def fencing_tokens(self) -> List[int]:
        """Each lease's fencing token, in the order the nodes were made; ``LockLostError`` if a
        lease was lost, ``NotOwnerError`` once released (such a token must not pass for a
        holder's)."""
        return self._native.fencing_tokens

    @property
    def fencing_token(self) -> int:
        """The first lease's fencing token (with one lease, its only one); as ``fencing_tokens``."""
        return self._native.fencing_tokens[0]

    @property
    def state(self) -> Literal["held", "suspended", "lost", "released"]:
        """``"lost"`` if any lease is lost, else ``"suspended"`` if any is, else ``"held"``;
        ``"released"`` once released."""
        return self._native.state

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the first lease found lost was lost (as ``on_lost`` says it), or None."""
        return self._native.lost_reason

    def __len__(self) -> int:
        return len(self._native)

    def release(self) -> None:
        """Releases every lease, returning once the server confirmed each delete (blocking, GIL
        released, not interruptible). ``LockLostError`` if one was lost (the others are still
        released); ``NotOwnerError`` if they were released already."""
        self._native.release()

    async def release_async(self) -> None:
        """As ``release``, without blocking the event loop (not cancellable: a release runs to
        completion so that no node is left behind)."""
        await _run_async(self._native._release_async)

    def on_lost(self, callback: Callable[[str], Any]) -> Callable[[], None]:
        """Calls ``callback(reason)`` once, when the first of these leases is lost (as
        ``Lock.on_lost``: on the client's callback thread, holding the GIL). Returns a function
        that unregisters it."""
        if not callable(callback):
            raise InvalidArgumentError(f"invalid argument on {self.path}: on_lost needs a callable", self.path)
        subscription = _Subscription(callback)
        self._native._watch(subscription)
        return subscription.cancel


class Semaphore(_native.Semaphore):
    """A counting semaphore (Apache Curator's InterProcessSemaphoreV2, node for node, so Curator
    and zklock count the same leases on one path): at most ``max_leases`` leases at once across
    every process, or as many as a shared count says (``shared_count_path``, ``seed``: Curator's
    ``SharedCount``, a 4-byte int; change it at run time and waiters follow).

    Acquirers are served first come, first served (they queue at the internal mutex
    ``<path>/locks``). ``acquire(n)`` takes n leases all or nothing, under one deadline: it holds
    nothing while it queues, so two acquirers never each hold part of what the other waits for
    (as Curator's ``acquire(qty)`` can); a timeout, a cancel or an error leaves no node.

    Not reentrant, as in Curator: a lease is a thing held, not an owner's count, and any thread
    or task may release it. With max 1 it is Curator's InterProcessSemaphoreMutex: a
    non-reentrant mutex releasable from anywhere.

    ``with sem.acquire(2) as leases:`` (blocking) or ``async with sem.hold(2) as leases:``.

    ``label`` is the owner label of its nodes (``zklock status`` shows it); by default each
    acquisition's nodes are labelled after the acquiring thread (``thread:<name>``) or asyncio
    task (``task:<name>``), as a lock's are.
    """

    @overload  # type: ignore[override]
    def acquire(self, n: int = 1, timeout: Optional[float] = None, blocking: Literal[True] = True) -> Leases: ...
    @overload
    def acquire(self, n: int = 1, timeout: Optional[float] = None, *, blocking: bool) -> Optional[Leases]: ...
    @overload
    def acquire(self, n: int, timeout: Optional[float], blocking: bool) -> Optional[Leases]: ...

    def acquire(  # pyright: ignore[reportIncompatibleMethodOverride]  # (mypy: on the overloads)
        self, n: int = 1, timeout: Optional[float] = None, blocking: bool = True
    ) -> Optional[Leases]:
        """Acquires ``n`` leases, all or nothing, and returns them (a context manager). Blocks
        with the GIL released; Ctrl-C raises KeyboardInterrupt and removes every node the
        attempt made. ``timeout`` in seconds (None or -1: forever, through ZooKeeper outages and
        new sessions, as a lock's; 0: one try) raises ``LockTimeout`` (a ``TimeoutError``) when it
        passes. ``blocking=False`` tries once and
        returns None if the leases do not fit now (or another acquirer is at the mutex). These
        are kazoo's ``Semaphore.acquire(blocking, timeout)`` rules, giving the leases for True
        (a lock's ``acquire`` gives False on a timeout; ``hold`` raises, as here).

        ``InvalidArgumentError`` before any traffic for n below 1, above a fixed max or above
        1,024 (zklock's limit on leases in one acquisition); before
        any node is made for n above the shared count, or a path holding lock nodes."""
        native = super().acquire(n, timeout, blocking)
        return None if native is None else Leases(native, self)

    async def acquire_async(self, n: int = 1, timeout: Optional[float] = None) -> Leases:
        """As ``acquire``, without blocking the event loop: ``LockTimeout`` once ``timeout``
        passes (None waits forever, through outages and new sessions). Cancelling the task removes every node the attempt made
        (and gives back leases acquired just as it was cancelled)."""
        owner = _task_owner()
        caller = None if owner is None else owner.label
        return Leases(await _acquire_async(lambda done: self._acquire_async(n, timeout, done, caller)), self)

    def hold(self, n: int = 1, timeout: Optional[float] = None) -> "_Acquiring[Leases]":
        """A context manager (``with`` or ``async with``) that acquires ``n`` leases on entry
        (``LockTimeout`` after ``timeout`` seconds), gives them, and releases them on exit."""
        return _Acquiring(lambda: self.acquire(n, timeout), lambda: self.acquire_async(n, timeout))

    async def participants_async(self) -> SemaphoreParticipants:
        """As ``participants()``, without blocking the event loop (see ``Lock.holder_async``)."""
        return await asyncio.get_running_loop().run_in_executor(None, self.participants)

    @property
    def client(self) -> "Client":
        """The client this semaphore was made from."""
        client = super().client
        assert isinstance(client, Client)
        return client


#: What a member of a ``MultiLock`` takes: a mutex, a read or write side, or semaphore leases.
# A Union at run time, as mypy's stubtest wants an alias of several literals to be.
_MemberKind = Union[Literal["mutex"], Literal["read"], Literal["write"], Literal["leases"]]

#: A member of a ``MultiLock``: a ``Lock`` (a mutex, or a side of a read/write lock), a
#: ``Semaphore`` (one lease), or a ``(semaphore, n)`` pair (n leases).
MultiLockMember = Union[Lock, Semaphore, Tuple[Semaphore, int]]


class MemberLost(NamedTuple):
    """A member of a held multi-lock that was lost: its ``path``, its ``kind`` (``"mutex"``,
    ``"read"``, ``"write"`` or ``"leases"``) and the ``reason`` (as ``Lock.on_lost`` says it)."""

    path: str
    kind: _MemberKind
    reason: str


class MultiGuard(_Releasable):
    """Every member of a ``MultiLock``, held: from ``MultiLock.acquire``. Any thread or task may
    release it, once; a context manager (``with`` and ``async with``), released on leaving.

    ``state`` is ``"lost"`` if any member is lost, else ``"suspended"`` if any is, else
    ``"held"`` (``"released"`` once released); ``lost_member`` and ``on_lost`` say which member
    and why."""

    # `_multi_lock` keeps its members' clients open while the guard is kept (see Leases).
    __slots__ = ("_native", "_multi_lock")

    def __init__(self, native: _native.MultiGuard, multi_lock: MultiLock) -> None:
        self._native = native
        self._multi_lock = multi_lock

    @property
    def members(self) -> List[Tuple[str, _MemberKind]]:
        """``(path, kind)`` of each member, in the canonical order they were taken."""
        return self._native.members

    @property
    def fencing_tokens(self) -> List[Tuple[str, _MemberKind, List[int]]]:
        """``(path, kind, tokens)`` of each member in canonical order: one token for a lock, one
        per lease. ``LockLostError`` if a member was lost, ``NotOwnerError`` once released."""
        return self._native.fencing_tokens

    @property
    def state(self) -> Literal["held", "suspended", "lost", "released"]:
        """``"lost"`` if any member is, else ``"suspended"`` if any is, else ``"held"``;
        ``"released"`` once released."""
        return self._native.state

    @property
    def lost_member(self) -> Optional[MemberLost]:
        """The first member (in canonical order) found lost, or None."""
        lost = self._native.lost_member
        return None if lost is None else MemberLost(*lost)

    def __len__(self) -> int:
        return len(self._native)

    def release(self) -> None:
        """Releases every member in reverse canonical order, each confirmed by the server before
        the next (blocking, not interruptible). ``LockLostError`` if a member was lost (the
        others are still released); ``NotOwnerError`` if released already."""
        self._native.release()

    async def release_async(self) -> None:
        """As ``release``, without blocking the event loop (not cancellable)."""
        await _run_async(self._native._release_async)

    def on_lost(self, callback: Callable[[MemberLost], Any]) -> Callable[[], None]:
        """Calls ``callback(MemberLost(path, kind, reason))`` once, when the first member is
        lost (as ``Lock.on_lost``). Returns a function that unregisters it."""
        if not callable(callback):
            raise InvalidArgumentError("invalid argument on multi_lock: on_lost needs a callable", "multi_lock")
        def lost(path: str, kind: _MemberKind, reason: str) -> None:
            callback(MemberLost(path, kind, reason))

        subscription = _Subscription(lost)
        self._native._watch(subscription)
        return subscription.cancel


class MultiLock(_native.MultiLock):
    """Several locks taken together, all or none (Curator's InterProcessMultiLock, without its
    deadlock): mutexes, read or write sides, and semaphore leases (see ``MultiLockMember``).

    Members are taken in one canonical order, by path (on the server) then kind, whatever order
    they were given in (``members`` shows it), so two multi-locks over the same paths never each
    hold what the other waits for. One deadline for all of them; on a timeout, a cancel or an
    error what was taken is released in reverse order and nothing is left. Release is in
    reverse order too. Locks are taken for the caller (the calling thread, or the current task
    in the asyncio API) and re-enter as a ``Lock`` does; leases are not reentrant.

    ``with multi.acquire(timeout=10) as guard:`` or ``async with multi.hold(10) as guard:``.
    Bad members (none, two on one path, 0 leases, more than a fixed max) raise
    ``InvalidArgumentError`` before any traffic.
    """

    @overload  # type: ignore[override]
    def acquire(self, timeout: Optional[float] = None, blocking: Literal[True] = True) -> MultiGuard: ...
    @overload
    def acquire(self, timeout: Optional[float] = None, *, blocking: bool) -> Optional[MultiGuard]: ...
    @overload
    def acquire(self, timeout: Optional[float], blocking: bool) -> Optional[MultiGuard]: ...

    def acquire(  # pyright: ignore[reportIncompatibleMethodOverride]  # (mypy: on the overloads)
        self, timeout: Optional[float] = None, blocking: bool = True
    ) -> Optional[MultiGuard]:
        """Takes every member for the calling thread and returns the guard (a context manager).
        Blocks with the GIL released; Ctrl-C raises KeyboardInterrupt and releases what was
        taken. ``timeout`` in seconds (None or -1: forever, through ZooKeeper outages and new
        sessions, as a lock's) raises ``LockTimeout`` naming the member waited for; ``blocking=False`` tries each member once and returns None if one is
        taken."""
        native = super().acquire(timeout, blocking)
        return None if native is None else MultiGuard(native, self)

    def acquire_async(self, timeout: Optional[float] = None) -> Coroutine[Any, Any, MultiGuard]:
        """As ``acquire``, without blocking the event loop, for the task that calls this (not the
        one that awaits the result, such as the inner task of ``asyncio.wait_for`` before Python
        3.12): that task re-enters the member locks. Cancelling the awaiting task releases what
        was taken, in reverse order."""
        owner = _task_owner()
        assert owner is not None

        async def acquired() -> MultiGuard:
            return MultiGuard(await _acquire_async(lambda done: self._acquire_async(owner, timeout, done)), self)

        return acquired()

    def hold(self, timeout: Optional[float] = None) -> "_Acquiring[MultiGuard]":
        """A context manager (``with`` or ``async with``) that takes every member on entry
        (``LockTimeout`` after ``timeout`` seconds), gives the guard, and releases on exit."""
        return _Acquiring(lambda: self.acquire(timeout), lambda: self.acquire_async(timeout))


_Held = TypeVar("_Held", Leases, MultiGuard)


class _Acquiring(Generic[_Held]):
    """``Semaphore.hold`` and ``MultiLock.hold``: acquires on entry, releases on exit."""

    def __init__(self, acquire: Callable[[], _Held], acquire_async: Callable[[], Awaitable[_Held]]) -> None:
        self._acquire: Callable[[], _Held] = acquire
        self._acquire_async: Callable[[], Awaitable[_Held]] = acquire_async
        self._held: Optional[_Held] = None

    def __enter__(self) -> _Held:
        self._held = self._acquire()
        return self._held

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        assert self._held is not None
        held, self._held = self._held, None
        _leave(held.release, exc)

    async def __aenter__(self) -> _Held:
        self._held = await self._acquire_async()
        return self._held

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        assert self._held is not None
        held, self._held = self._held, None
        await _leave_async(held.release_async, exc)


def _ignore(ok: bool, value: Any) -> None:
    pass


def _settle_held(future: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    """``_settle`` for what an acquisition gives (native leases or guard): given back if the task
    was cancelled while it was acquired."""
    if future.cancelled():
        if ok and value is not _RETRY:
            value._release_async(_ignore)
        return
    _settle(future, ok, value)


async def _acquire_async(start: Callable[[Callable[[bool, Any], None]], _native.AsyncOp]) -> Any:
    """Runs a native acquisition (a semaphore's, a multi-lock's) for the event loop: ``start(done)``
    begins it; a cancel drops it (core removes its nodes) and gives back what arrived meanwhile."""
    loop = asyncio.get_running_loop()
    while True:
        future: "asyncio.Future[Any]" = loop.create_future()

        def done(ok: bool, value: Any, future: "asyncio.Future[Any]" = future) -> None:  # on a callback thread
            if ok and not loop.is_running():
                # Nobody can receive it now (a loop stopped, maybe for good): give it back, and
                # queue again if the loop runs again.
                value._release_async(_ignore)
                ok, value = True, _RETRY
            try:
                loop.call_soon_threadsafe(_settle_held, future, ok, value)
            except RuntimeError:  # the loop is closed: nobody will use it, give it back
                if ok and value is not _RETRY:
                    value._release_async(_ignore)

        operation = start(done)
        try:
            held = await future
        except asyncio.CancelledError:
            operation.cancel()
            if future.done() and not future.cancelled() and future.exception() is None:
                if future.result() is not _RETRY:
                    future.result()._release_async(_ignore)
            raise
        if held is not _RETRY:
            return held


async def _run_async(start: Callable[[Callable[[bool, Any], None]], None]) -> None:
    """Runs a native release for the event loop, to its end: not cancellable, so no node is left."""
    loop = asyncio.get_running_loop()
    future: "asyncio.Future[Any]" = loop.create_future()

    def done(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(_settle, future, ok, value)
        except RuntimeError:
            pass

    start(done)
    await asyncio.shield(future)


def _settle(future: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


def _settle_acquire(future: "asyncio.Future[Any]", ok: bool, value: Any, begun: "list[_native.AsyncOp]") -> None:
    """On the loop: hands a lock's acquisition to its task, which takes the grant (``_claim``)."""
    operation = begun[0]
    if future.cancelled():
        operation.cancel()  # the task was cancelled meanwhile: a grant nobody received goes back
        return
    if ok and value is True and not operation._claim():
        value = _RETRY  # given back while the loop was stopped
    _settle(future, ok, value)


def _leave(release: Callable[[], None], body: Optional[BaseException]) -> None:
    """Releases on leaving a ``with`` block: if the body raised, its exception propagates and a
    failed release rides along on it (``attach_release_error``) instead of replacing it."""
    if body is None:
        release()
        return
    try:
        release()
    except Exception as failed:
        attach_release_error(body, failed)


async def _leave_async(release: Callable[[], Awaitable[None]], body: Optional[BaseException]) -> None:
    """``_leave`` for ``async with``."""
    if body is None:
        await release()
        return
    try:
        await release()
    except Exception as failed:
        attach_release_error(body, failed)


class _Hold:
    """``lock.hold(timeout)``: acquires on entry (raising ``LockTimeout``), releases on exit."""

    def __init__(self, lock: Lock, timeout: Optional[float]) -> None:
        self._lock = lock
        self._timeout = timeout

    def _timed_out(self) -> BaseException:
        return self._lock._timeout_error(self._timeout or 0.0)

    def __enter__(self) -> int:
        if not self._lock.acquire(timeout=self._timeout):
            raise self._timed_out()
        return self._token(_native.Owner.current_thread())

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        _leave(self._lock.release, exc)

    async def __aenter__(self) -> int:
        if not await self._lock.acquire_async(self._timeout):
            raise self._timed_out()
        owner = _task_owner(create=False)
        assert owner is not None, "acquire_async made the task's owner"
        return self._token(owner)

    def _token(self, owner: _native.Owner) -> int:
        # `owner` holds now (a lost hold raises LockLostError): never None here.
        token = self._lock._fencing_token_of(owner)
        assert token is not None
        return token

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], traceback: Any) -> None:
        await _leave_async(self._lock.release_async, exc)
