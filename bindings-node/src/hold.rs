//! What an owner holds, with its state and the lost signal's source.

use napi::bindgen_prelude::{BigInt, Function};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;
use zklock::LostReason;

use crate::names::camel_case;

#[napi]
pub struct NativeHold {
    hold: zklock::Hold,
}

impl NativeHold {
    pub(crate) fn new(hold: zklock::Hold) -> NativeHold {
        NativeHold { hold }
    }
}

#[napi]
impl NativeHold {
    /// The lock node's creation zxid, as a BigInt: zxids are 64-bit, and a fencing token that
    /// rounded could compare equal to its successor's.
    #[napi(getter)]
    pub fn fencing_token(&self, env: &napi::Env) -> napi::Result<BigInt> {
        self.hold.live_fencing_token().map(BigInt::from).map_err(|err| crate::error::to_js(env, &err))
    }

    /// The hold's id ([`zklock::Hold::id`]): the JavaScript layer's memo of this handle is
    /// still the owner's hold while the ids match.
    #[napi(getter)]
    pub fn id(&self) -> f64 {
        self.hold.id() as f64
    }

    #[napi(getter)]
    pub fn sequence(&self) -> i64 {
        self.hold.sequence()
    }

    #[napi(getter)]
    pub fn node_path(&self) -> String {
        self.hold.node_path().to_owned()
    }

    /// `held`, `suspended`, `lost` or `released`.
    #[napi(getter)]
    pub fn state(&self) -> &'static str {
        self.hold.state().as_str()
    }

    /// Why the hold was lost, once it is.
    #[napi(getter)]
    pub fn lost(&self) -> Option<Lost> {
        self.hold.lost_reason().map(Lost::from)
    }

    /// Calls `callback` with why once the hold is lost; never if it is released first.
    /// The callback never keeps the process alive.
    #[napi]
    pub fn watch_lost(&self, callback: Function<Lost, ()>) -> napi::Result<()> {
        watch_first_loss(vec![self.hold.clone()], callback, |_, reason| Lost::from(reason))
    }
}

/// Calls `callback` once, with what `describe` makes of the first of `holds` to be lost (which
/// one is core's [`zklock::first_loss`] to say); never if they are all released.
pub(crate) fn watch_first_loss<T: napi::bindgen_prelude::ToNapiValue + Send + 'static>(
    holds: Vec<zklock::Hold>,
    callback: Function<T, ()>,
    describe: impl FnOnce(usize, LostReason) -> T + Send + 'static,
) -> napi::Result<()> {
    notify_loss(
        async move { zklock::first_loss(&holds).await.map(|(index, reason)| describe(index, reason)) },
        callback,
    )
}

/// Calls `callback` once with what `loss` finds, if it finds a loss. The callback never keeps
/// the process alive.
pub(crate) fn notify_loss<T: napi::bindgen_prelude::ToNapiValue + Send + 'static>(
    loss: impl std::future::Future<Output = Option<T>> + Send + 'static,
    callback: Function<T, ()>,
) -> napi::Result<()> {
    let notify = callback.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?;
    napi::bindgen_prelude::spawn(async move {
        if let Some(lost) = loss.await {
            notify.call(lost, ThreadsafeFunctionCallMode::NonBlocking);
        }
    });
    Ok(())
}

/// Why a hold was lost: the reason's code, and the core's description of it, so that the
/// message reads the same in every language.
#[napi(object)]
pub struct Lost {
    pub reason: String,
    pub description: String,
}

impl From<LostReason> for Lost {
    fn from(reason: LostReason) -> Lost {
        Lost { reason: camel_case(reason.as_str()), description: reason.describe().to_owned() }
    }
}
