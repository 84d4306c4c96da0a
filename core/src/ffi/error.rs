//! Result codes, the thread-local detailed message, and the panic boundary.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::{Error, ErrorKind};

/// The result of a zkl_ function. The numbers are stable: they never change, and new codes are
/// only ever added after the last one. `ZKL_OK` is 0; every other code comes with a message
/// from `zkl_last_error_message()`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum zkl_result {
    /// Success.
    ZKL_OK = 0,
    /// The lock was not obtained in time (including a try, timeout 0, that found it held), or
    /// no session could be established within the connect timeout (by zkl_client_connect, or by
    /// an acquisition with a timeout; one with -1 tries again instead, as long as it takes).
    /// Never for a try that got no answer: that is ZKL_CONNECTION_LOSS.
    ZKL_TIMEOUT = 1,
    /// A release (or a query) by an owner that does not hold the lock. Nothing was changed.
    ZKL_NOT_OWNER = 2,
    /// The ZooKeeper session expired while waiting; every lock node of the session is gone.
    /// The next call on the client starts a new session.
    ZKL_SESSION_EXPIRED = 3,
    /// The hold was lost (session expired, client closed, or node deleted by someone else):
    /// a release reports it, deletes nothing, and the hold is gone.
    ZKL_LOCK_LOST = 4,
    /// The connection was lost and the operation could not complete in time; also a try
    /// (timeout 0) or a listing that got no answer within 2 s: ZooKeeper could not be reached.
    /// A release that reports it goes on deleting the node in the background.
    ZKL_CONNECTION_LOSS = 5,
    /// The servers rejected the credentials.
    ZKL_AUTH_FAILED = 6,
    /// The client of this lock was closed (also what an acquisition in progress returns when
    /// another thread closes the client).
    ZKL_CLOSED = 7,
    /// Bad input, detected before any network traffic: a NULL pointer, an invalid path, connect
    /// string, option or timeout, a closed or freed handle, or a blocking call from a callback.
    ZKL_INVALID_ARGUMENT = 8,
    /// Any other error reported by ZooKeeper; `zkl_last_error_zookeeper_code()` gives its code.
    ZKL_ZOOKEEPER = 9,
    /// An internal failure: a panic inside zklock (caught: nothing unwinds into C and the
    /// process is not aborted), or the background runtime could not start.
    ZKL_PANIC = 10,
    /// The call would wait for itself forever, so it is refused at once: the owner holds the
    /// read side of a read/write lock and asked for the write side (release the read first).
    ZKL_DEADLOCK = 11,
    /// ZooKeeper's access control stands in the way: the lock path's ACL does not grant this
    /// client the rights it needs (the server answered NoAuth: connect with digest credentials
    /// the ACL names), or a lock made with an ACL found its lock path with an ACL that grants
    /// others more than asked (see zkl_lock_options). The message names the path and the entry.
    ZKL_PERMISSION_DENIED = 12,
    /// An acquisition waiting was cancelled, by zkl_lock_cancel or by zkl_lock_free of its
    /// lock from another thread (or the semaphore's and multi-lock's cancel and free); its
    /// nodes were removed before it returned.
    ZKL_CANCELLED = 13,
}

impl zkl_result {
    /// Every code, in order; `zkl_result_str` and the C tests cover exactly these.
    pub(crate) const ALL: [zkl_result; 14] = [
        zkl_result::ZKL_OK,
        zkl_result::ZKL_TIMEOUT,
        zkl_result::ZKL_NOT_OWNER,
        zkl_result::ZKL_SESSION_EXPIRED,
        zkl_result::ZKL_LOCK_LOST,
        zkl_result::ZKL_CONNECTION_LOSS,
        zkl_result::ZKL_AUTH_FAILED,
        zkl_result::ZKL_CLOSED,
        zkl_result::ZKL_INVALID_ARGUMENT,
        zkl_result::ZKL_ZOOKEEPER,
        zkl_result::ZKL_PANIC,
        zkl_result::ZKL_DEADLOCK,
        zkl_result::ZKL_PERMISSION_DENIED,
        zkl_result::ZKL_CANCELLED,
    ];

    fn describe(self) -> &'static CStr {
        // The same words as the core's ErrorKind::as_str, so all bindings read alike.
        match self {
            zkl_result::ZKL_OK => cstr!("ok"),
            zkl_result::ZKL_TIMEOUT => cstr!("timed out"),
            zkl_result::ZKL_NOT_OWNER => cstr!("not owner"),
            zkl_result::ZKL_SESSION_EXPIRED => cstr!("session expired"),
            zkl_result::ZKL_LOCK_LOST => cstr!("lock lost"),
            zkl_result::ZKL_CONNECTION_LOSS => cstr!("connection loss"),
            zkl_result::ZKL_AUTH_FAILED => cstr!("authentication failed"),
            zkl_result::ZKL_CLOSED => cstr!("client closed"),
            zkl_result::ZKL_INVALID_ARGUMENT => cstr!("invalid argument"),
            zkl_result::ZKL_ZOOKEEPER => cstr!("zookeeper error"),
            zkl_result::ZKL_PANIC => cstr!("panic"),
            zkl_result::ZKL_DEADLOCK => cstr!("would deadlock"),
            zkl_result::ZKL_PERMISSION_DENIED => cstr!("permission denied"),
            zkl_result::ZKL_CANCELLED => cstr!("cancelled"),
        }
    }
}

impl From<ErrorKind> for zkl_result {
    fn from(kind: ErrorKind) -> zkl_result {
        // Exhaustive (non_exhaustive does not apply inside the crate): a new kind fails to
        // compile here until it has its own code.
        match kind {
            ErrorKind::InvalidArgument => zkl_result::ZKL_INVALID_ARGUMENT,
            ErrorKind::Timeout => zkl_result::ZKL_TIMEOUT,
            ErrorKind::NotOwner => zkl_result::ZKL_NOT_OWNER,
            ErrorKind::SessionExpired => zkl_result::ZKL_SESSION_EXPIRED,
            ErrorKind::LockLost => zkl_result::ZKL_LOCK_LOST,
            ErrorKind::ConnectionLoss => zkl_result::ZKL_CONNECTION_LOSS,
            ErrorKind::AuthFailed => zkl_result::ZKL_AUTH_FAILED,
            ErrorKind::Closed => zkl_result::ZKL_CLOSED,
            ErrorKind::ZooKeeper => zkl_result::ZKL_ZOOKEEPER,
            ErrorKind::Deadlock => zkl_result::ZKL_DEADLOCK,
            ErrorKind::PermissionDenied => zkl_result::ZKL_PERMISSION_DENIED,
        }
    }
}

/// Why an entry point failed: its code, and the message for `zkl_last_error_message`.
#[derive(Debug)]
pub(crate) struct Failure {
    code: zkl_result,
    message: String,
    zookeeper_code: i32,
}

impl Failure {
    pub(crate) fn new(code: zkl_result, message: impl Into<String>) -> Failure {
        Failure { code, message: message.into(), zookeeper_code: 0 }
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Failure {
        Failure::new(zkl_result::ZKL_INVALID_ARGUMENT, message)
    }
}

impl From<Error> for Failure {
    fn from(err: Error) -> Failure {
        Failure { code: err.kind().into(), message: err.to_string(), zookeeper_code: err.zookeeper_code().unwrap_or(0) }
    }
}

struct LastError {
    message: CString,
    zookeeper_code: i32,
}

thread_local! {
    static LAST_ERROR: RefCell<Option<LastError>> = const { RefCell::new(None) };
}

fn set_last_error(function: &str, message: &str, zookeeper_code: i32) {
    // A message with a NUL inside (from a path, say) is cut there rather than lost.
    let text = format!("{function}: {message}");
    let text = CString::new(text).unwrap_or_else(|err| {
        let end = err.nul_position();
        CString::new(&err.into_vec()[..end]).expect("cut at the first NUL")
    });
    // try_with: a call during thread teardown still returns its code, just without a message.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = Some(LastError { message: text, zookeeper_code }));
}

/// Runs an entry point's body: see `ffi_result!`.
pub(crate) fn boundary(function: &'static str, body: impl FnOnce() -> Result<(), Failure>) -> zkl_result {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => zkl_result::ZKL_OK,
        Ok(Err(failure)) => {
            set_last_error(function, &failure.message, failure.zookeeper_code);
            failure.code
        }
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            set_last_error(function, &format!("internal error (panic): {what}"), 0);
            zkl_result::ZKL_PANIC
        }
    }
}

/// A static, lowercase description of a result code, such as "timed out" for `ZKL_TIMEOUT`.
/// Any int is accepted: a value that is not a zkl_result gives "unknown result".
///
/// Ownership: the string is static; do not free it. Concurrency: any thread, any time.
#[no_mangle]
pub extern "C" fn zkl_result_str(result: c_int) -> *const c_char {
    ffi_value!(cstr!("unknown result").as_ptr(), {
        zkl_result::ALL
            .iter()
            .find(|code| **code as c_int == result)
            .map_or(cstr!("unknown result"), |code| code.describe())
            .as_ptr()
    })
}

/// The detailed message of the last zkl_ call on this thread that did not return ZKL_OK, as
/// "function: what happened", naming the lock path or argument concerned; "" if none failed yet.
/// Successful calls leave it unchanged.
///
/// Ownership: the string belongs to zklock and stays valid until the next failing zkl_ call on
/// this thread (or until the thread exits); copy it to keep it. Concurrency: each thread has its
/// own.
#[no_mangle]
pub extern "C" fn zkl_last_error_message() -> *const c_char {
    ffi_value!(cstr!("").as_ptr(), {
        let message = LAST_ERROR.try_with(|last| last.borrow().as_ref().map(|last| last.message.as_ptr()));
        message.ok().flatten().unwrap_or(cstr!("").as_ptr())
    })
}

/// The ZooKeeper error code (as the server and the Java client's KeeperException.Code number
/// them, e.g. -101 for NoNode) of the last failing zkl_ call on this thread, or 0 if that
/// failure did not come from ZooKeeper. Meaningful after ZKL_ZOOKEEPER.
///
/// Concurrency: any thread, any time; each thread has its own.
#[no_mangle]
pub extern "C" fn zkl_last_error_zookeeper_code() -> i32 {
    ffi_value!(0, {
        LAST_ERROR.try_with(|last| last.borrow().as_ref().map_or(0, |last| last.zookeeper_code)).unwrap_or(0)
    })
}

/// The library's version, "MAJOR.MINOR.PATCH": compare with ZKL_VERSION to check that the
/// header and the library match.
///
/// Ownership: static; do not free. Concurrency: any thread, any time.
#[no_mangle]
pub extern "C" fn zkl_version() -> *const c_char {
    const VERSION: &CStr = cstr!(env!("CARGO_PKG_VERSION"));
    VERSION.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_the_core_words() {
        for (i, code) in zkl_result::ALL.iter().enumerate() {
            assert_eq!(*code as usize, i, "codes are numbered 0.. in order");
        }
        let kinds = [
            ErrorKind::InvalidArgument,
            ErrorKind::Timeout,
            ErrorKind::NotOwner,
            ErrorKind::SessionExpired,
            ErrorKind::LockLost,
            ErrorKind::ConnectionLoss,
            ErrorKind::AuthFailed,
            ErrorKind::Closed,
            ErrorKind::ZooKeeper,
            ErrorKind::Deadlock,
            ErrorKind::PermissionDenied,
        ];
        for kind in kinds {
            assert_eq!(zkl_result::from(kind).describe().to_str().unwrap(), kind.as_str());
        }
    }

    #[test]
    fn a_panic_becomes_zkl_panic_with_a_message() {
        let code = ffi_result!("zkl_test", {
            if true {
                panic!("boom");
            }
            Ok(())
        });
        assert_eq!(code, zkl_result::ZKL_PANIC);
        let message = unsafe { CStr::from_ptr(zkl_last_error_message()) };
        assert_eq!(message.to_str().unwrap(), "zkl_test: internal error (panic): boom");
    }
}
