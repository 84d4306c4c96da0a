//! The one place where core errors become Python exceptions. The classes live in the pure-Python
//! module `zklock._errors` (they need multiple inheritance: `LockTimeout` is also a
//! `TimeoutError`, `InvalidArgumentError` a `ValueError`, `NotOwnerError` and `DeadlockError` a
//! `RuntimeError`, `PermissionDeniedError` a `PermissionError`).

use pyo3::call::PyCallArgs;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use zklock::{Error, ErrorKind};

macro_rules! exception_classes {
    ($($getter:ident => $name:literal),* $(,)?) => {
        $(
            fn $getter(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
                static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
                CLASS.import(py, "zklock._errors", $name)
            }
        )*
    };
}

exception_classes! {
    base_class => "ZkLockError",
    invalid_argument_class => "InvalidArgumentError",
    timeout_class => "LockTimeout",
    not_owner_class => "NotOwnerError",
    session_expired_class => "SessionExpiredError",
    lock_lost_class => "LockLostError",
    connection_loss_class => "ConnectionLossError",
    auth_failed_class => "AuthFailedError",
    closed_class => "ClosedError",
    zookeeper_class => "ZooKeeperError",
    deadlock_class => "DeadlockError",
    permission_denied_class => "PermissionDeniedError",
    security_warning_class => "SecurityWarning",
}

/// Converts a core error into the exception of its kind, with `path` (and, for `ZooKeeperError`,
/// the server's `code`) as attributes. The message is core's, which names the path.
pub(crate) fn to_py(py: Python<'_>, err: &Error) -> PyErr {
    let message = err.to_string();
    let path = err.path();
    match err.kind() {
        ErrorKind::ZooKeeper => instance(zookeeper_class(py), (message, path, err.zookeeper_code())),
        ErrorKind::LockLost => {
            instance(lock_lost_class(py), (message, path, err.lost_reason().map(zklock::LostReason::as_str)))
        }
        kind => instance(class_of(py, kind), (message, path)),
    }
}

/// An instance of `class` made from `args`, or the failure to make one (which is raised instead).
fn instance<'py>(class: PyResult<&Bound<'py, PyType>>, args: impl PyCallArgs<'py>) -> PyErr {
    match class.and_then(|class| class.call1(args)) {
        Ok(exception) => PyErr::from_value(exception),
        Err(failed) => failed,
    }
}

fn class_of(py: Python<'_>, kind: ErrorKind) -> PyResult<&Bound<'_, PyType>> {
    match kind {
        ErrorKind::InvalidArgument => invalid_argument_class(py),
        ErrorKind::Timeout => timeout_class(py),
        ErrorKind::NotOwner => not_owner_class(py),
        ErrorKind::SessionExpired => session_expired_class(py),
        ErrorKind::LockLost => lock_lost_class(py),
        ErrorKind::ConnectionLoss => connection_loss_class(py),
        ErrorKind::AuthFailed => auth_failed_class(py),
        ErrorKind::Closed => closed_class(py),
        ErrorKind::ZooKeeper => zookeeper_class(py),
        ErrorKind::Deadlock => deadlock_class(py),
        ErrorKind::PermissionDenied => permission_denied_class(py),
        // Kinds added to core later still get the common base class.
        _ => base_class(py),
    }
}

/// Bad input found by the binding itself (before core sees it), worded as core words its own:
/// `invalid argument on <path>: <what>`.
pub(crate) fn invalid_argument(py: Python<'_>, subject: &str, what: impl std::fmt::Display) -> PyErr {
    let message = format!("invalid argument on {subject}: {what}");
    instance(invalid_argument_class(py), (message, subject))
}

/// A release of what was released already, worded as core words its own.
pub(crate) fn not_owner(py: Python<'_>, subject: &str, what: impl std::fmt::Display) -> PyErr {
    let message = format!("not owner on {subject}: {what}");
    instance(not_owner_class(py), (message, subject))
}

/// A wait given up on the server's answer (a release past its bound), worded as core words its own.
pub(crate) fn connection_loss(py: Python<'_>, subject: &str, what: impl std::fmt::Display) -> PyErr {
    let message = format!("connection loss on {subject}: {what}");
    instance(connection_loss_class(py), (message, subject))
}

/// A client used in a process other than the one that made it (after `fork()`).
pub(crate) fn forked(py: Python<'_>, subject: &str) -> PyErr {
    let message = format!(
        "client closed on {subject}: this client was made in the parent process before fork(); make a new one in the child"
    );
    instance(closed_class(py), (message, subject))
}

/// A core connect warning as `zklock.SecurityWarning`, attributed to the caller's line (no
/// Python frame of zklock's is on the stack in the native constructor). Raises where the
/// warnings filter makes it an error.
pub(crate) fn warn(py: Python<'_>, warning: zklock::ConnectWarning) -> PyResult<()> {
    let message = std::ffi::CString::new(warning.message()).expect("core's messages have no NUL");
    PyErr::warn(py, security_warning_class(py)?.as_any(), &message, 1)
}

/// Said when a client or a set of holds is collected unclosed or unreleased, as Python says of an
/// unclosed file: core closes or releases them all the same, but their holder may still believe it
/// holds them.
pub(crate) fn warn_collected_unreleased(message: &std::ffi::CStr) {
    Python::attach(|py| {
        let category = py.get_type::<pyo3::exceptions::PyResourceWarning>();
        if let Err(err) = PyErr::warn(py, &category, message, 1) {
            // Warnings made errors (-W error) cannot raise from a destructor.
            err.write_unraisable(py, None);
        }
    });
}

/// Extension for core results: `.py(py)?` raises the mapped exception.
pub(crate) trait IntoPyResult<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for zklock::Result<T> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|err| to_py(py, &err))
    }
}

/// A `str` argument (a path, an identifier, a label) as Rust text. Python's `str` may hold a lone
/// surrogate (U+D800..U+DFFF, as `os.fsdecode` makes of undecodable bytes), which no UTF-8 text,
/// and so no ZooKeeper node, can hold: that is bad input, an `InvalidArgumentError` (a
/// `ValueError`) like any other, not the `UnicodeEncodeError` of pyo3's own conversion. Anything
/// but a `str` is the `TypeError` pyo3 gives.
pub(crate) struct Text(pub(crate) String);

impl<'a, 'py> FromPyObject<'a, 'py> for Text {
    type Error = PyErr;

    fn extract(object: pyo3::Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        use pyo3::types::PyString;
        let text = object.cast::<PyString>().map_err(PyErr::from)?;
        match text.to_cow() {
            Ok(text) => Ok(Text(text.into_owned())),
            Err(_) => {
                let py = object.py();
                // The text as Python would show it (each surrogate escaped), and where the first is.
                let ord = py.import("builtins")?.getattr("ord")?;
                let (mut shown, mut first) = (String::new(), None);
                for (i, c) in text.try_iter()?.enumerate() {
                    let code: u32 = ord.call1((c?,))?.extract()?;
                    match char::from_u32(code) {
                        Some(c) => shown.push(c),
                        None => {
                            shown.push_str(&format!("\\u{code:04x}"));
                            first.get_or_insert((i, code));
                        }
                    }
                }
                let (index, unit) = first.unwrap_or((0, 0xD800));
                Err(invalid_argument(
                    py,
                    &shown,
                    format!(
                        "the text has a lone surrogate (U+{unit:04X}) at index {index}: it is not valid Unicode, \
                         and ZooKeeper takes only valid Unicode"
                    ),
                ))
            }
        }
    }
}
