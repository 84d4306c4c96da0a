//! The panic boundary and the argument checks every entry point starts with.

/// The body of an entry point that returns a [`zkl_result`](super::zkl_result): `$body` yields
/// `Result<(), Failure>`. Errors become their code with the message saved for
/// `zkl_last_error_message`; a panic becomes `ZKL_PANIC`. Nothing unwinds into C.
macro_rules! ffi_result {
    ($name:literal, $body:block) => {
        $crate::ffi::error::boundary($name, move || -> ::std::result::Result<(), $crate::ffi::error::Failure> { $body })
    };
}

/// The body of an entry point that returns a plain value: on a panic it returns `$default`.
macro_rules! ffi_value {
    ($default:expr, $body:block) => {
        ::std::panic::catch_unwind(move || $body).unwrap_or($default)
    };
}

/// Fails with `ZKL_INVALID_ARGUMENT` ("`$what` is NULL") when `$ptr` is NULL.
macro_rules! non_null {
    ($ptr:expr, $what:literal) => {
        if $ptr.is_null() {
            return Err($crate::ffi::error::Failure::invalid(concat!($what, " is NULL")));
        }
    };
}

/// Writes `$value` to the caller's out-pointer `$out` (checked non-NULL before).
macro_rules! write_out {
    ($out:expr, $value:expr) => {
        // SAFETY: the caller passes a valid, writable, aligned pointer (checked non-NULL).
        unsafe { $out.write($value) }
    };
}

/// A `&'static CStr` from a string literal. (Not a `c"..."` literal: the pinned cbindgen cannot
/// parse those.)
macro_rules! cstr {
    ($($text:tt)+) => {
        match ::std::ffi::CStr::from_bytes_with_nul(concat!($($text)+, "\0").as_bytes()) {
            Ok(text) => text,
            Err(_) => panic!("a NUL inside a cstr! literal"),
        }
    };
}
