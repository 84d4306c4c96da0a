//! The one place where zklock's errors become JavaScript errors: an `Error` whose `code` is
//! `ZKLOCK_<KIND>`, one per core [`ErrorKind`], with the lock path and ZooKeeper's error code
//! when known.

use std::cell::RefCell;

use napi::bindgen_prelude::{Function, FunctionRef, JsObjectValue, Object};
use napi::{Env, JsValue, Status};
use napi_derive::napi;
use zklock::ErrorKind;

thread_local! {
    /// The JavaScript layer's ZkLockError class, per JavaScript thread (each Worker loads the
    /// layer, and registers its own).
    static ERROR_CLASS: RefCell<Option<FunctionRef<ErrorArgs, ()>>> = const { RefCell::new(None) };
}

/// The constructor's two arguments, `(message, code)`: `FnArgs`, as a bare tuple is passed as one
/// array argument.
type ErrorArgs = napi::bindgen_prelude::FnArgs<(String, &'static str)>;

/// Registers the class every zklock error is an instance of: `new ZkLockError(message, code)`.
#[napi]
pub fn set_error_class(class: Function<ErrorArgs, ()>) -> napi::Result<()> {
    let class = class.create_ref()?;
    ERROR_CLASS.with(|registered| *registered.borrow_mut() = Some(class));
    Ok(())
}

/// The stable `code` of each kind. The JS layer's `codes` export lists the same strings.
pub(crate) fn code(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidArgument => "ZKLOCK_INVALID_ARGUMENT",
        ErrorKind::Timeout => "ZKLOCK_TIMEOUT",
        ErrorKind::NotOwner => "ZKLOCK_NOT_OWNER",
        ErrorKind::SessionExpired => "ZKLOCK_SESSION_EXPIRED",
        ErrorKind::LockLost => "ZKLOCK_LOCK_LOST",
        ErrorKind::ConnectionLoss => "ZKLOCK_CONNECTION_LOSS",
        ErrorKind::AuthFailed => "ZKLOCK_AUTH_FAILED",
        ErrorKind::Closed => "ZKLOCK_CLOSED",
        ErrorKind::ZooKeeper => "ZKLOCK_ZOOKEEPER",
        ErrorKind::Deadlock => "ZKLOCK_DEADLOCK",
        ErrorKind::PermissionDenied => "ZKLOCK_PERMISSION_DENIED",
        // ErrorKind is non-exhaustive: a kind added to core shows up as a ZooKeeper error
        // until it gets a code of its own here.
        _ => "ZKLOCK_ZOOKEEPER",
    }
}

/// Builds the JavaScript error on the JavaScript thread and wraps it so that napi throws (or
/// rejects with) that very object.
pub(crate) fn to_js(env: &Env, err: &zklock::Error) -> napi::Error {
    match build(env, err) {
        Ok(error) => napi::Error::from(error.to_unknown()),
        // Only if the engine cannot even make an object: keep the code in the message.
        Err(_) => napi::Error::from_reason(format!("{}: {err}", code(err.kind()))),
    }
}

pub(crate) fn build<'env>(env: &'env Env, err: &zklock::Error) -> napi::Result<Object<'env>> {
    let registered = ERROR_CLASS.with(|class| -> napi::Result<Option<Object<'env>>> {
        let Some(class) = class.borrow().as_ref().map(|class| class.borrow_back(env)).transpose()? else {
            return Ok(None);
        };
        let instance = class.new_instance((err.to_string(), code(err.kind())).into())?;
        // SAFETY: `new` makes an object.
        Ok(Some(unsafe { instance.cast::<Object<'env>>() }?))
    })?;
    let mut error = match registered {
        Some(error) => error,
        None => env.create_error(napi::Error::new(Status::GenericFailure, err.to_string()))?,
    };
    error.set_named_property("code", code(err.kind()))?;
    if let Some(path) = err.path() {
        error.set_named_property("path", path)?;
    }
    if let Some(zk_code) = err.zookeeper_code() {
        error.set_named_property("zookeeperCode", zk_code)?;
    }
    if let Some(reason) = err.lost_reason() {
        error.set_named_property("lostReason", crate::names::camel_case(reason.as_str()))?;
    }
    Ok(error)
}
