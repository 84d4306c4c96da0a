//! The one place where zklock's errors become JavaScript errors: an `Error` whose `code` is
//! `ZKLOCK_<KIND>`, one per core [`ErrorKind`], with the lock path and ZooKeeper's error code
//! when known.

use napi::bindgen_prelude::JsObjectValue;
use napi::bindgen_prelude::Object;
use napi::{Env, JsValue, Status};
use zklock::ErrorKind;

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

fn build<'env>(env: &'env Env, err: &zklock::Error) -> napi::Result<Object<'env>> {
    let mut error = env.create_error(napi::Error::new(Status::GenericFailure, err.to_string()))?;
    error.set_named_property("code", code(err.kind()))?;
    if let Some(path) = err.path() {
        error.set_named_property("path", path)?;
    }
    if let Some(zk_code) = err.zookeeper_code() {
        error.set_named_property("zookeeperCode", zk_code)?;
    }
    Ok(error)
}
