//! The one error type of zklock, with a stable set of kinds that every binding maps one to one.

use std::borrow::Cow;
use std::fmt;

use static_assertions::assert_impl_all;

/// What went wrong, as a stable kind. The C ABI, Python and Node bindings map each kind to one
/// result code, exception class or `code` string; new kinds are only ever added.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Bad input, rejected before any network traffic: a path, a timeout, a connect string, or a
    /// call that makes no sense in the current state (such as a second concurrent acquire by the
    /// same owner).
    InvalidArgument,
    /// The lock was not obtained in time (including a `try_acquire` that found it held), or the
    /// client could not connect in time. Never for a try that got no answer: that is
    /// [`ErrorKind::ConnectionLoss`].
    Timeout,
    /// A release by an owner that does not hold the lock. Nothing was changed.
    NotOwner,
    /// The ZooKeeper session expired; every lock node of the session is gone.
    SessionExpired,
    /// The lock node of a holder is gone: the session ended, the client was closed, or someone
    /// else deleted the node.
    LockLost,
    /// The connection to ZooKeeper was lost and the operation could not be completed in time;
    /// also a try or a listing that got no answer within [`crate::TRY_BOUND`]: ZooKeeper could
    /// not be reached (see the crate docs' "Timeouts and deadlines").
    ConnectionLoss,
    /// ZooKeeper rejected the client's credentials; or, connecting over TLS, every server's
    /// handshake failed for the same certificate reason (a CA bundle that does not sign the
    /// servers' certificates, an expired one, a client certificate missing or refused).
    AuthFailed,
    /// The client was closed.
    Closed,
    /// Any other error reported by ZooKeeper; [`Error::zookeeper_code`] carries its code.
    ZooKeeper,
    /// The call would wait for itself forever, so it is refused at once: an owner holding the
    /// read side of a read/write lock asked for the write side (release the read lock first).
    Deadlock,
    /// ZooKeeper's access control stands in the way: the ACL of the lock path does not grant
    /// this client the rights it needs (the server answered NoAuth; connect with credentials the
    /// ACL names), or a lock with an ACL found its lock path with an ACL that grants others more
    /// than asked, so its nodes would not be protected.
    PermissionDenied,
}

impl ErrorKind {
    /// A short, stable, lowercase description.
    pub const fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidArgument => "invalid argument",
            ErrorKind::Timeout => "timed out",
            ErrorKind::NotOwner => "not owner",
            ErrorKind::SessionExpired => "session expired",
            ErrorKind::LockLost => "lock lost",
            ErrorKind::ConnectionLoss => "connection loss",
            ErrorKind::AuthFailed => "authentication failed",
            ErrorKind::Closed => "client closed",
            ErrorKind::ZooKeeper => "zookeeper error",
            ErrorKind::Deadlock => "would deadlock",
            ErrorKind::PermissionDenied => "permission denied",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error with its [`ErrorKind`], the lock path it concerns (if any), and a message saying what
/// happened. Displays as `"<kind> on <path>: <message>"`.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    /// Boxed so that results stay small: every `Result` on the reentrant path is moved through
    /// several calls, and an inline error would make each move a copy of ~100 bytes.
    inner: Box<Inner>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Inner {
    kind: ErrorKind,
    path: Option<String>,
    message: Cow<'static, str>,
    source: Option<zookeeper_client::Error>,
    /// An invalid argument because the path holds nodes of the other recipe.
    recipe_conflict: bool,
    /// Why the hold was lost, for a LockLost error that knows.
    lost_reason: Option<LostReason>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("kind", &self.inner.kind)
            .field("path", &self.inner.path)
            .field("message", &self.inner.message)
            .field("source", &self.inner.source)
            .field("recipe_conflict", &self.inner.recipe_conflict)
            .finish()
    }
}

assert_impl_all!(Error: Send, Sync, std::error::Error);

/// `Result` with zklock's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Error {
            inner: Box::new(Inner {
                kind,
                path: None,
                message: message.into(),
                source: None,
                recipe_conflict: false,
                lost_reason: None,
            }),
        }
    }

    /// The invalid argument of a lock whose path holds nodes of the other recipe.
    pub(crate) fn recipe_conflict(message: impl Into<Cow<'static, str>>) -> Self {
        let mut err = Error::invalid(message);
        err.inner.recipe_conflict = true;
        err
    }

    pub(crate) fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Error::new(ErrorKind::InvalidArgument, message)
    }

    /// A [`ErrorKind::LockLost`] error for a hold lost because of `reason` (if known).
    pub(crate) fn lost(reason: Option<LostReason>, message: impl Into<Cow<'static, str>>) -> Self {
        Error::new(ErrorKind::LockLost, message).with_lost_reason(reason)
    }

    /// Why the hold was lost (LockLost), or the session under the operation ended (SessionExpired).
    pub(crate) fn with_lost_reason(mut self, reason: Option<LostReason>) -> Self {
        self.inner.lost_reason = reason;
        self
    }

    pub(crate) fn with_message(mut self, message: impl Into<Cow<'static, str>>) -> Self {
        self.inner.message = message.into();
        self
    }

    pub(crate) fn with_path(mut self, path: &str) -> Self {
        self.inner.path = Some(shown(path));
        self
    }

    /// Translates an error of the ZooKeeper client that happened while doing `doing` on `path`.
    pub(crate) fn from_zk(err: zookeeper_client::Error, path: &str, doing: &str) -> Self {
        use zookeeper_client::Error as Zk;
        let kind = match err {
            Zk::SessionExpired | Zk::SessionMoved => ErrorKind::SessionExpired,
            Zk::ConnectionLoss | Zk::Custom(_) => ErrorKind::ConnectionLoss,
            Zk::AuthFailed => ErrorKind::AuthFailed,
            Zk::ClientClosed => ErrorKind::Closed,
            Zk::NoAuth => ErrorKind::PermissionDenied,
            _ => ErrorKind::ZooKeeper,
        };
        let message = match err {
            Zk::NoAuth => format!(
                "{doing}: ZooKeeper refused it for want of rights (NoAuth): the ACL of the lock path (or, creating \
                 the path, of its parent) does not grant this client's credentials what it needs; connect with \
                 digest auth or SASL as a user the ACL names, or use another path"
            ),
            _ => format!("{doing}: {err}"),
        }
        .into();
        Error {
            inner: Box::new(Inner {
                kind,
                path: Some(shown(path)),
                message,
                source: Some(err),
                recipe_conflict: false,
                lost_reason: None,
            }),
        }
    }

    /// An error the server reported, explained in `message`.
    pub(crate) fn zookeeper(err: zookeeper_client::Error, message: impl Into<Cow<'static, str>>) -> Self {
        let message = message.into();
        Error {
            inner: Box::new(Inner {
                kind: ErrorKind::ZooKeeper,
                path: None,
                message,
                source: Some(err),
                recipe_conflict: false,
                lost_reason: None,
            }),
        }
    }

    /// For a [`ErrorKind::LockLost`] error, why the hold was lost, when known (each binding
    /// shows it: `lostReason` in Node, `lost_reason` in Python); for a
    /// [`ErrorKind::SessionExpired`] one, why the session ended.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.inner.lost_reason
    }

    /// The stable kind of this error.
    pub fn kind(&self) -> ErrorKind {
        self.inner.kind
    }

    /// The lock path (relative to the client's chroot) this error concerns, if any; for an error
    /// connecting, the connect string.
    pub fn path(&self) -> Option<&str> {
        self.inner.path.as_deref()
    }

    /// What happened, without the kind and path.
    pub fn message(&self) -> &str {
        &self.inner.message
    }

    /// Whether this is the [`ErrorKind::InvalidArgument`] of an acquisition on a path that holds
    /// nodes of the other recipe (a mutex on a read/write lock's path, or the reverse): it may
    /// succeed once those nodes are gone, unlike other invalid arguments.
    pub fn is_recipe_conflict(&self) -> bool {
        self.inner.recipe_conflict
    }

    /// The ZooKeeper error code (as in the Java client's `KeeperException.Code`), when the error
    /// came from ZooKeeper.
    pub fn zookeeper_code(&self) -> Option<i32> {
        self.inner.source.as_ref().map(zookeeper_code)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner { kind, path, message, .. } = &*self.inner;
        match path {
            Some(path) => write!(f, "{kind} on {path}: {message}"),
            None => write!(f, "{kind}: {message}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.inner.source.as_ref().map(|e| e as _)
    }
}

/// Text from ZooKeeper (a node's name, a label, another client's data) safe to print on a
/// terminal or in a log line: control characters, and those that reorder or hide text
/// (bidirectional overrides and isolates, line and paragraph separators), as Rust escapes
/// (`\u{202e}`). ZooKeeper allows U+202E in a node's name, which would make a message read
/// backwards from there. Messages that name another client's node show it so; `zklock` shows
/// every such text so.
pub fn printable(text: &str) -> Cow<'_, str> {
    let hides = |c: char| {
        c.is_control() || matches!(c, '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if !text.contains(hides) {
        return Cow::Borrowed(text);
    }
    let escaped = text.chars().fold(String::with_capacity(text.len() + 8), |mut out, c| {
        if hides(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
        out
    });
    Cow::Owned(escaped)
}

/// A path as errors show it: whole, unless it is so long (a path refused for its size, say) that
/// the message would be mostly path.
fn shown(path: &str) -> String {
    const LONGEST: usize = 4096;
    if path.len() <= LONGEST {
        return path.to_owned();
    }
    let mut end = 64;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &path[..end], path.len())
}

/// The numeric code of a ZooKeeper error, as the server and the Java client number them.
fn zookeeper_code(err: &zookeeper_client::Error) -> i32 {
    use zookeeper_client::Error as Zk;
    match err {
        Zk::NoNode => -101,
        Zk::NoAuth => -102,
        Zk::BadVersion => -103,
        Zk::NoChildrenForEphemerals => -108,
        Zk::NodeExists => -110,
        Zk::NotEmpty => -111,
        Zk::SessionExpired => -112,
        Zk::InvalidAcl => -114,
        Zk::AuthFailed => -115,
        Zk::SessionMoved => -118,
        Zk::NotReadOnly => -119,
        Zk::NoWatcher => -121,
        Zk::ReconfigDisabled => -123,
        Zk::QuotaExceeded => -125,
        Zk::Throttled => -127,
        Zk::RuntimeInconsistent => -2,
        Zk::ConnectionLoss => -4,
        Zk::MarshallingError => -5,
        Zk::Unimplemented => -6,
        Zk::Timeout => -7,
        Zk::BadArguments(_) => -8,
        Zk::UnexpectedErrorCode(code) => *code,
        _ => -1,
    }
}

/// Why a held lock was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LostReason {
    /// The server expired the session, deleting its lock nodes.
    SessionExpired,
    /// The client stayed disconnected so long that the server may already have expired the
    /// session and let the next waiter in; the client gave the session up itself.
    DisconnectedTooLong,
    /// The client was closed.
    Closed,
    /// Someone else deleted the lock node.
    NodeDeleted,
    /// The servers rejected the client's credentials.
    AuthFailed,
}

impl LostReason {
    /// The reason's stable snake_case name: `session_expired`, `disconnected_too_long`,
    /// `closed`, `node_deleted`, `auth_failed` (each binding shows these, in its own case style).
    pub const fn as_str(self) -> &'static str {
        match self {
            LostReason::SessionExpired => "session_expired",
            LostReason::DisconnectedTooLong => "disconnected_too_long",
            LostReason::Closed => "closed",
            LostReason::NodeDeleted => "node_deleted",
            LostReason::AuthFailed => "auth_failed",
        }
    }

    /// What happened, as a sentence fragment (`"the session expired"`), for messages in every
    /// language.
    pub fn describe(self) -> &'static str {
        match self {
            LostReason::SessionExpired => "the session expired",
            LostReason::DisconnectedTooLong => "the client was disconnected for too long and gave up its session",
            LostReason::Closed => "the client was closed",
            LostReason::NodeDeleted => "someone else deleted the lock node",
            LostReason::AuthFailed => "authentication failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn node_text_cannot_move_the_cursor_or_colour_the_terminal() {
        assert_eq!(printable("thread:worker-3"), "thread:worker-3");
        assert_eq!(printable("a\nb\x1b[31m"), "a\\u{a}b\\u{1b}[31m");
        assert_eq!(printable("x\u{202e}y\u{7f}\u{2028}\u{2066}"), "x\\u{202e}y\\u{7f}\\u{2028}\\u{2066}");
        assert_eq!(printable("ünïcode 🔒"), "ünïcode 🔒");
        assert_eq!(printable(&printable("x\u{202e}")), "x\\u{202e}", "escaped once, whatever shows it again");
    }
}
