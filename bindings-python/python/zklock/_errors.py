"""zklock's exceptions: one class per core error kind, all rooted at ZkLockError; and its warning.

The native module raises these (mapped in one place, ``bindings-python/src/error.rs``), which is
why they live in a module of their own that imports nothing from the native side. The package
re-exports them all (its ``__all__`` is the one list of public names).
"""

from __future__ import annotations

from typing import Optional, cast


class ZkLockError(Exception):
    """Base class of every zklock error. ``path`` is the lock path (or connect string) concerned."""

    path: Optional[str]

    def __init__(self, message: str, path: Optional[str] = None) -> None:
        super().__init__(message)
        self.path = path


class InvalidArgumentError(ZkLockError, ValueError):
    """Bad input (a path, a timeout, a connect string), rejected before any network traffic."""


class LockTimeout(ZkLockError, TimeoutError):
    """The lock was not obtained in time (or the client could not connect in time)."""


class NotOwnerError(ZkLockError, RuntimeError):
    """A release by an owner that does not hold the lock, as ``threading.RLock`` raises it."""


class SessionExpiredError(ZkLockError):
    """The ZooKeeper session expired: every lock node of the session is gone."""


class LockLostError(ZkLockError):
    """The hold was lost (session expired, client closed, node deleted): nothing was deleted.
    ``lost_reason`` says why when known, as ``on_lost`` callbacks name it (``"session_expired"``,
    ``"disconnected_too_long"``, ``"closed"``, ``"node_deleted"``, ``"auth_failed"``)."""

    lost_reason: Optional[str]

    def __init__(self, message: str, path: Optional[str] = None, lost_reason: Optional[str] = None) -> None:
        super().__init__(message, path)
        self.lost_reason = lost_reason


class ConnectionLossError(ZkLockError):
    """The connection dropped before the operation completed."""


class AuthFailedError(ZkLockError):
    """ZooKeeper rejected the credentials."""


class ClosedError(ZkLockError):
    """The client was closed, or was inherited from the parent of a forked process (where the
    child can make clients of its own)."""


class DeadlockError(ZkLockError, RuntimeError):
    """The call would wait for itself forever, so it was refused at once: the owner holds the read
    side of a read/write lock and asked for the write side (release the read side first). A
    ``RuntimeError``, as Python's own "would deadlock" errors are."""


class PermissionDeniedError(ZkLockError, PermissionError):
    """ZooKeeper's access control stands in the way: the lock path's ACL does not grant this
    client the rights it needs (the server answered NoAuth: connect with ``auth`` credentials the
    ACL names), or a lock made with ``acl=`` found its lock path with an ACL that grants others
    more than asked, so its nodes would not be protected. The message names the path and the
    ACL entry. A ``PermissionError``, as Python's own "not allowed" errors are."""


class ZooKeeperError(ZkLockError):
    """Any other error reported by ZooKeeper; ``code`` is the server's error code."""

    code: Optional[int]

    def __init__(self, message: str, path: Optional[str] = None, code: Optional[int] = None) -> None:
        super().__init__(message, path)
        self.code = code


class SecurityWarning(UserWarning):
    """A client was made in a way that exposes a secret: ``auth`` (digest) without ``use_ssl``
    sends the password in clear, readable by anyone on the network path (use TLS, or SASL
    DIGEST-MD5, which never sends it). Warned once per client, when it has connected; silence it
    with ``warnings.filterwarnings("ignore", category=zklock.SecurityWarning)``."""


def attach_release_error(body: BaseException, failed: BaseException) -> None:
    """Leaving a ``with`` block whose body raised ``body``, the release failed too (say, the lock
    was lost meanwhile): ``body`` is what propagates, and ``failed`` rides along as a note (PEP
    678: shown by tracebacks from Python 3.11) and as ``body.__zklock_release_error__``."""
    note = f"zklock: releasing the lock on the way out failed too: {type(failed).__name__}: {failed}"
    if hasattr(body, "add_note"):
        body.add_note(note)
    else:  # Python < 3.11: the same attribute, which traceback shows from 3.11 on
        notes: object = getattr(body, "__notes__", None)
        if not isinstance(notes, list):
            notes = cast("list[str]", [])
            try:
                setattr(body, "__notes__", notes)
            except AttributeError:
                return
        cast("list[str]", notes).append(note)
    try:
        setattr(body, "__zklock_release_error__", failed)
    except AttributeError:
        pass
