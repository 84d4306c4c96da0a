//! A registered C callback with its userdata, callable from runtime threads and replaceable from
//! any thread, with one guarantee: once `set` returns, the old callback is not running and will
//! never be called again.

use std::cell::Cell;
use std::ffi::c_void;

use parking_lot::ReentrantMutex;

pub(crate) struct CallbackSlot<F: Copy> {
    /// Held for the whole call, so `set` from another thread waits for a call in progress;
    /// reentrant, so the callback itself may replace or remove itself (or free its object).
    current: ReentrantMutex<Cell<Option<(F, usize)>>>,
}

impl<F: Copy> CallbackSlot<F> {
    pub(crate) fn new() -> Self {
        CallbackSlot { current: ReentrantMutex::new(Cell::new(None)) }
    }

    /// Installs (or with `None` removes) the callback; userdata is kept as an address, since C
    /// owns what it points to.
    pub(crate) fn set(&self, callback: Option<F>, userdata: *mut c_void) {
        self.current.lock().set(callback.map(|f| (f, userdata as usize)));
    }

    /// Calls the current callback, if any, through `call`.
    pub(crate) fn call(&self, call: impl FnOnce(F, *mut c_void)) {
        let current = self.current.lock();
        if let Some((f, userdata)) = current.get() {
            call(f, userdata as *mut c_void);
        }
    }
}
