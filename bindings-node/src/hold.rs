//! What an owner holds, with its state and the lost signal's source.

use napi::bindgen_prelude::{BigInt, Function};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi_derive::napi;
use zklock::{HoldState, LostReason};

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
    pub fn fencing_token(&self) -> BigInt {
        BigInt::from(self.hold.fencing_token())
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
        state_name(self.hold.state())
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
        let notify = callback.build_threadsafe_function().callee_handled::<false>().weak::<true>().build()?;
        let hold = self.hold.clone();
        napi::bindgen_prelude::spawn(async move {
            if let Some(reason) = hold.lost().await {
                notify.call(Lost::from(reason), ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
        Ok(())
    }
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
        Lost { reason: reason_name(reason).to_owned(), description: reason.describe().to_owned() }
    }
}

pub(crate) fn state_name(state: HoldState) -> &'static str {
    match state {
        HoldState::Held => "held",
        HoldState::Suspended => "suspended",
        HoldState::Lost => "lost",
        HoldState::Released => "released",
    }
}

fn reason_name(reason: LostReason) -> &'static str {
    match reason {
        LostReason::SessionExpired => "sessionExpired",
        LostReason::DisconnectedTooLong => "disconnectedTooLong",
        LostReason::Closed => "closed",
        LostReason::NodeDeleted => "nodeDeleted",
        LostReason::AuthFailed => "authFailed",
    }
}
