//! Promises over the core's futures, and the end of sessions when the environment exits.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::{sys, Env};

use crate::error;

/// How long closing the clients at exit may delay it: those a script forgot, and those whose
/// close() was called but not awaited (`client.close(); process.exit(0)`), waited for until their
/// CloseSession is answered. A live server answers within milliseconds; an unreachable one must
/// not hold the process hostage.
const EXIT_CLOSE_TIMEOUT: Duration = Duration::from_millis(1500);

/// Runs `future` on the runtime and settles a Promise with it on the JavaScript thread: `to_js`
/// makes the value, and an error becomes a JavaScript error with its `code`.
///
/// Every promise of an environment is settled through one threadsafe function ([`Settler`]).
/// napi-rs's own futures make one per promise (with an async resource and a cleanup hook): at
/// 10,000 waiting acquisitions that alone was megabytes, and CPU at every call.
pub(crate) fn promise<'env, T, V, F, M>(env: &'env Env, future: F, to_js: M) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
    F: Future<Output = zklock::Result<T>> + Send + 'static,
    M: FnOnce(&Env, T) -> V + Send + 'static,
{
    // SAFETY: called on the JavaScript thread, with its environment (see `settle`).
    let settle = move |env: &Env, outcome: zklock::Result<T>| match outcome {
        Ok(value) => unsafe { V::to_napi_value(env.raw(), to_js(env, value)) },
        Err(err) => Err(error::to_js(env, &err)),
    };
    Ok(PromiseRaw::new(env.raw(), settled_by(env, future, settle)?))
}

/// As [`promise`], with `settle` making the value to resolve with, or the error to reject with,
/// from the future's whole outcome (on the JavaScript thread). If the environment is torn down
/// first, `settle` is dropped uncalled, on whichever thread.
pub(crate) fn settled_by<T, F, S>(env: &Env, future: F, settle: S) -> napi::Result<sys::napi_value>
where
    T: Send + 'static,
    F: Future<Output = zklock::Result<T>> + Send + 'static,
    S: FnOnce(&Env, zklock::Result<T>) -> napi::Result<sys::napi_value> + Send + 'static,
{
    let settler = Settler::of(env)?;
    let (mut deferred, mut promise) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: on the JavaScript thread of `env`, with out-pointers to fill.
    check(unsafe { sys::napi_create_promise(env.raw(), &mut deferred, &mut promise) })?;
    settler.pending(env, 1);
    let unsettled = Some((Deferred(deferred), settle));
    napi::bindgen_prelude::spawn(Settling { future, settler, unsettled, output: PhantomData });
    Ok(promise)
}

pin_project_lite::pin_project! {
    /// A future run to the settling of its promise. Written out rather than an async block,
    /// which kept the future twice (as its capture and as what it awaited): every waiting
    /// acquisition is one of these.
    struct Settling<T, F, S> {
        #[pin]
        future: F,
        settler: Arc<Settler>,
        // The promise and how to settle it: taken when the future ends.
        unsettled: Option<(Deferred, S)>,
        output: PhantomData<fn() -> T>,
    }
}

impl<T, F, S> Future for Settling<T, F, S>
where
    T: Send + 'static,
    F: Future<Output = zklock::Result<T>>,
    S: FnOnce(&Env, zklock::Result<T>) -> napi::Result<sys::napi_value> + Send + 'static,
{
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        let Poll::Ready(outcome) = this.future.poll(cx) else { return Poll::Pending };
        if let Some((deferred, settle)) = this.unsettled.take() {
            this.settler.send(Box::new(Settlement { deferred, settle: Box::new(move |env| settle(env, outcome)) }));
        }
        Poll::Ready(())
    }
}

fn check(status: sys::napi_status) -> napi::Result<()> {
    match status {
        sys::Status::napi_ok => Ok(()),
        status => Err(napi::Error::new(napi::Status::from(status), "Node-API call failed")),
    }
}

/// A JavaScript value kept alive while a future runs on the runtime's threads, taken back on the
/// JavaScript thread. Not taken (the environment torn down first), the reference is leaked with
/// the environment.
pub(crate) struct JsRef(sys::napi_ref);

// SAFETY: carried through runtime threads, used only on the JavaScript thread (`new`, `take`).
unsafe impl Send for JsRef {}

impl JsRef {
    pub(crate) fn new(env: &Env, value: sys::napi_value) -> napi::Result<JsRef> {
        let mut reference = std::ptr::null_mut();
        // SAFETY: on the JavaScript thread, with a value of this environment.
        check(unsafe { sys::napi_create_reference(env.raw(), value, 1, &mut reference) })?;
        Ok(JsRef(reference))
    }

    /// The value, and the reference deleted.
    pub(crate) fn take(self, env: &Env) -> napi::Result<sys::napi_value> {
        let mut value = std::ptr::null_mut();
        // SAFETY: on the JavaScript thread, with the reference made there, deleted once, here.
        unsafe {
            check(sys::napi_get_reference_value(env.raw(), self.0, &mut value))?;
            check(sys::napi_delete_reference(env.raw(), self.0))?;
        }
        Ok(value)
    }
}

/// JavaScript's `null`.
pub(crate) fn null(env: &Env) -> napi::Result<sys::napi_value> {
    let mut value = std::ptr::null_mut();
    // SAFETY: on the JavaScript thread, with an out-pointer.
    check(unsafe { sys::napi_get_null(env.raw(), &mut value) })?;
    Ok(value)
}

/// A JavaScript number.
pub(crate) fn number(env: &Env, n: i64) -> napi::Result<sys::napi_value> {
    let mut value = std::ptr::null_mut();
    // SAFETY: on the JavaScript thread, with an out-pointer.
    check(unsafe { sys::napi_create_int64(env.raw(), n, &mut value) })?;
    Ok(value)
}

/// A JavaScript array of `items`.
pub(crate) fn array(env: &Env, items: &[sys::napi_value]) -> napi::Result<sys::napi_value> {
    let mut array = std::ptr::null_mut();
    // SAFETY: on the JavaScript thread, with values of this environment.
    unsafe {
        check(sys::napi_create_array_with_length(env.raw(), items.len(), &mut array))?;
        for (index, item) in (0u32..).zip(items) {
            check(sys::napi_set_element(env.raw(), array, index, *item))?;
        }
    }
    Ok(array)
}

/// A promise's resolver; only ever used on its environment's JavaScript thread.
struct Deferred(sys::napi_deferred);

// SAFETY: carried through runtime threads, used only on the JavaScript thread (in `settle`).
unsafe impl Send for Deferred {}

/// What a future's outcome becomes, made on the JavaScript thread: the value to resolve with, or
/// the error to reject with.
type Settle = Box<dyn FnOnce(&Env) -> napi::Result<sys::napi_value> + Send>;

struct Settlement {
    deferred: Deferred,
    settle: Settle,
}

/// The threadsafe function that settles an environment's promises, and how many it has yet to
/// settle: it keeps the event loop alive only while some are pending, as a pending promise of
/// napi-rs's did.
pub(crate) struct Settler {
    /// None once the environment is torn down: outcomes arriving later are dropped.
    tsfn: parking_lot::Mutex<Option<Tsfn>>,
}

struct Tsfn(sys::napi_threadsafe_function);

// SAFETY: a threadsafe function is made to be called from any thread; the mutex keeps a call
// from racing its release at teardown.
unsafe impl Send for Tsfn {}

thread_local! {
    // Per JavaScript thread, i.e. per environment (the main thread and each Worker).
    static SETTLER: RefCell<Option<Arc<Settler>>> = const { RefCell::new(None) };
    static PENDING: Cell<usize> = const { Cell::new(0) };
}

impl Settler {
    fn of(env: &Env) -> napi::Result<Arc<Settler>> {
        if let Some(settler) = SETTLER.with(|settler| settler.borrow().clone()) {
            return Ok(settler);
        }
        let mut name = std::ptr::null_mut();
        // SAFETY: on the JavaScript thread; a static string and out-pointers.
        check(unsafe { sys::napi_create_string_utf8(env.raw(), c"zklock".as_ptr(), 6, &mut name) })?;
        let mut tsfn = std::ptr::null_mut();
        // SAFETY: no JavaScript function (`settle` does the calling), an unbounded queue, one
        // owning thread (released at teardown).
        check(unsafe {
            sys::napi_create_threadsafe_function(
                env.raw(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                name,
                0,
                1,
                std::ptr::null_mut(),
                None,
                std::ptr::null_mut(),
                Some(settle),
                &mut tsfn,
            )
        })?;
        // Nothing pending yet: no reason to keep the process alive.
        // SAFETY: the function just made, on its thread.
        check(unsafe { sys::napi_unref_threadsafe_function(env.raw(), tsfn) })?;
        let settler = Arc::new(Settler { tsfn: parking_lot::Mutex::new(Some(Tsfn(tsfn))) });
        // Registered after the threadsafe function, so it runs before Node finalizes it (cleanup
        // hooks run last-in first-out).
        env.add_env_cleanup_hook(settler.clone(), |settler| settler.tear_down())?;
        SETTLER.with(|slot| *slot.borrow_mut() = Some(settler.clone()));
        Ok(settler)
    }

    /// Counts promises made (+1) or settled (-1) on the JavaScript thread, and keeps the event
    /// loop alive while any is pending.
    fn pending(&self, env: &Env, change: isize) {
        let before = PENDING.with(Cell::get);
        let after = before.saturating_add_signed(change);
        PENDING.with(|pending| pending.set(after));
        if let Some(tsfn) = self.tsfn.lock().as_ref() {
            // SAFETY: on the function's own thread, while it is alive (under the lock).
            unsafe {
                match (before, after) {
                    (0, 1..) => sys::napi_ref_threadsafe_function(env.raw(), tsfn.0),
                    (1.., 0) => sys::napi_unref_threadsafe_function(env.raw(), tsfn.0),
                    _ => sys::Status::napi_ok,
                };
            }
        }
    }

    fn send(&self, settlement: Box<Settlement>) {
        let guard = self.tsfn.lock();
        let Some(tsfn) = guard.as_ref() else { return };
        let data = Box::into_raw(settlement);
        // SAFETY: the function is alive while the lock is held; `settle` takes the box back.
        let status = unsafe { sys::napi_call_threadsafe_function(tsfn.0, data.cast(), 0) };
        if status != sys::Status::napi_ok {
            // Closing: the environment is going, and nobody awaits the promise.
            // SAFETY: not queued, so still ours.
            drop(unsafe { Box::from_raw(data) });
        }
    }

    fn tear_down(&self) {
        if let Some(tsfn) = self.tsfn.lock().take() {
            // SAFETY: released once, here; queued outcomes reach `settle` without an environment.
            unsafe { sys::napi_release_threadsafe_function(tsfn.0, 1) };
        }
    }
}

/// Settles one promise on the JavaScript thread (or, with no environment, at teardown, only
/// frees what was queued).
unsafe extern "C" fn settle(
    raw_env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut std::ffi::c_void,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: `send` queued a boxed Settlement, taken back once, here.
    let settlement = unsafe { Box::from_raw(data.cast::<Settlement>()) };
    if raw_env.is_null() {
        return;
    }
    let env = Env::from_raw(raw_env);
    if let Some(settler) = SETTLER.with(|settler| settler.borrow().clone()) {
        settler.pending(&env, -1);
    }
    let Settlement { deferred, settle } = *settlement;
    // SAFETY: on the JavaScript thread, with the deferred made there and settled once.
    unsafe {
        match settle(&env) {
            Ok(value) => sys::napi_resolve_deferred(raw_env, deferred.0, value),
            Err(err) => sys::napi_reject_deferred(raw_env, deferred.0, napi::JsError::from(err).into_value(raw_env)),
        };
    }
}

/// What the JavaScript client and its locks share; the exit hook holds it weakly, so a client
/// that JavaScript let go of is not kept alive by the hook.
pub(crate) struct Shared {
    pub(crate) client: zklock::Client,
    /// Leases and multi-lock guards whose JavaScript handle was collected unreleased: held until
    /// released by the session's end (see `semaphore::keep_unreleased`).
    pub(crate) kept: parking_lot::Mutex<Vec<Box<dyn std::any::Any + Send>>>,
}

thread_local! {
    // Per JavaScript thread, i.e. per Node environment (the main thread and each Worker).
    static LIVE: RefCell<Vec<Weak<Shared>>> = const { RefCell::new(Vec::new()) };
    static HOOKED: Cell<bool> = const { Cell::new(false) };
}

/// Records a connected client, so that the environment's exit closes its session.
pub(crate) fn register(env: &Env, shared: &Arc<Shared>) -> napi::Result<()> {
    // Installed at the first connect, after napi's own hook (installed at module load): cleanup
    // hooks run last-in first-out, so this one still finds napi's runtime running.
    if !HOOKED.with(|hooked| hooked.replace(true)) {
        env.add_env_cleanup_hook((), |()| close_all_at_exit())?;
    }
    LIVE.with(|live| {
        let mut live = live.borrow_mut();
        live.retain(|client| client.strong_count() > 0);
        live.push(Arc::downgrade(shared));
    });
    Ok(())
}

/// Ends every session this environment left open, each with a CloseSession, so that its lock
/// nodes go at once rather than when the server times the session out: closes the clients not
/// closed, and waits for the closes in flight (a client is marked closed before its CloseSession
/// is sent), all within [`EXIT_CLOSE_TIMEOUT`]. The JavaScript layer
/// calls it on the process's 'exit' event (which `process.exit()` emits but which skips the
/// cleanup hooks); the cleanup hook covers the rest (a Worker that ends, say).
#[napi_derive::napi(js_name = "closeSessionsAtExit")]
pub fn close_all_at_exit() {
    let clients: Vec<zklock::Client> = LIVE.with(|live| {
        live.borrow_mut().drain(..).filter_map(|shared| shared.upgrade()).map(|s| s.client.clone()).collect()
    });
    if clients.is_empty() {
        return;
    }
    let deadline = std::time::Instant::now() + EXIT_CLOSE_TIMEOUT;
    let (in_flight, open): (Vec<_>, Vec<_>) = clients.into_iter().partition(zklock::Client::is_closed);
    if !open.is_empty() {
        napi::bindgen_prelude::block_on(async {
            let closing = open.iter().map(|client| tokio::time::timeout_at(deadline.into(), client.close()));
            futures::future::join_all(closing).await;
        });
    }
    // Their closes run on the runtime, not on this thread: each is over by now or soon.
    for client in &in_flight {
        client.wait_closed(deadline);
    }
}
