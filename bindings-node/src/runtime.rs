//! Promises over the core's futures, and the end of sessions when the environment exits.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue};
use napi::Env;

use crate::error;

/// How long closing the clients a script forgot may delay its exit. A live server answers a
/// CloseSession within milliseconds; an unreachable one must not hold the process hostage.
const EXIT_CLOSE_TIMEOUT: Duration = Duration::from_millis(1500);

/// Runs `future` on the runtime and settles a Promise with it on the JavaScript thread: `to_js`
/// makes the value, and an error becomes a JavaScript error with its `code`.
pub(crate) fn promise<'env, T, V, F, M>(env: &'env Env, future: F, to_js: M) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
    F: Future<Output = zklock::Result<T>> + Send + 'static,
    M: FnOnce(T) -> V + 'static,
{
    env.spawn_future_with_callback(async move { Ok(future.await) }, move |env, outcome| match outcome {
        Ok(value) => Ok(to_js(value)),
        Err(err) => Err(error::to_js(env, &err)),
    })
}

/// What the JavaScript client and its locks share; the exit hook holds it weakly, so a client
/// that JavaScript let go of is not kept alive by the hook.
pub(crate) struct Shared {
    pub(crate) client: zklock::Client,
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
/// nodes go at once rather than when the server times the session out. The JavaScript layer
/// calls it on the process's 'exit' event (which `process.exit()` emits but which skips the
/// cleanup hooks); the cleanup hook covers the rest (a Worker that ends, say).
#[napi_derive::napi(js_name = "closeSessionsAtExit")]
pub fn close_all_at_exit() {
    let clients: Vec<zklock::Client> = LIVE.with(|live| {
        live.borrow_mut().drain(..).filter_map(|shared| shared.upgrade()).map(|s| s.client.clone()).collect()
    });
    let open: Vec<_> = clients.into_iter().filter(|client| !client.is_closed()).collect();
    if open.is_empty() {
        return;
    }
    napi::bindgen_prelude::block_on(async move {
        let closing = open.iter().map(|client| tokio::time::timeout(EXIT_CLOSE_TIMEOUT, client.close()));
        futures::future::join_all(closing).await;
    });
}
