//! The conversions every entry point shares: C strings, and timeouts in milliseconds.

use std::ffi::{c_char, CStr};
use std::time::Duration;

use super::error::Failure;

/// A C timeout in ms: -1 forever, 0 only tries, else that many ms.
pub(crate) fn timeout(timeout_ms: i64) -> Result<Option<Duration>, Failure> {
    match timeout_ms {
        -1 => Ok(None),
        ms if ms >= 0 => Ok(Some(Duration::from_millis(ms as u64))),
        ms => Err(Failure::invalid(format!(
            "timeout_ms is {ms}: use -1 to wait forever, 0 to only try, or a number of ms"
        ))),
    }
}

/// A timeout field of `zkl_options`: `None` for 0 (keep the core's default).
pub(crate) fn option_timeout(ms: i64, what: &str) -> Result<Option<Duration>, Failure> {
    match ms {
        0 => Ok(None),
        ms if ms > 0 => Ok(Some(Duration::from_millis(ms as u64))),
        ms => Err(Failure::invalid(format!("{what} is {ms}: it must be positive, or 0 for the default"))),
    }
}

pub(crate) fn c_str<'a>(ptr: *const c_char, what: &str) -> Result<&'a str, Failure> {
    // SAFETY: the caller passes a NUL-terminated string (checked non-NULL) that outlives the call.
    unsafe { CStr::from_ptr(ptr) }.to_str().map_err(|_| Failure::invalid(format!("{what} is not valid UTF-8")))
}

/// An optional string field.
pub(crate) fn c_field(ptr: *const c_char, what: &str) -> Result<Option<String>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    Ok(Some(c_str(ptr, what)?.to_owned()))
}
