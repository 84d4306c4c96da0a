//! Releasing a hold: its node deleted, or the loss reported.

use std::sync::Arc;

use zookeeper_client as zk;

use super::attempt::{remove_node, NodeName};
use super::Recipe;
use crate::connection::ClientInner;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::Hold;
use crate::retry::{refused, Requests, Stop};
use crate::session::Session;

impl Recipe {
    /// Deletes a held node and reports how the release went. On connection loss, or if this
    /// future is dropped before the delete is answered, the delete goes on in the background,
    /// until the node is gone or its session is over.
    pub(crate) async fn delete_held(&self, hold: &Hold) -> Result<()> {
        let lost = |reason: crate::error::LostReason| {
            Error::lost(Some(reason), format!("{}; nothing was deleted", reason.describe())).with_path(&self.path)
        };
        if let Some(reason) = hold.inner.finish() {
            return Err(lost(reason));
        }
        let session = match hold.inner.session.upgrade() {
            Some(session) if !session.is_over() => session,
            gone => {
                let reason = gone.and_then(|s| s.lost_reason()).unwrap_or(crate::error::LostReason::SessionExpired);
                return Err(lost(reason));
            }
        };
        let requests = Requests::new(&self.client, &session, None);
        // Before the delete is sent, so a waiter of this client that sees the node go knows.
        self.registry.released.remember(hold.node_path());
        let unanswered = UnansweredDelete { client: &self.client, session: &session, node: hold.node_path() };
        let outcome = requests.bounded(session.zk.delete(hold.node_path(), None)).await;
        let connection_lost = matches!(&outcome, Ok(Err(err)) if crate::retry::connection_lost(err));
        if connection_lost {
            // Not known to have happened: `unanswered`, dropped, deletes in the background.
            drop(unanswered);
        } else {
            unanswered.answered();
        }
        match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(zk::Error::NoNode)) => Err(lost(crate::error::LostReason::NodeDeleted)),
            // The session ended under the delete (its nodes go with it).
            Ok(Err(zk::Error::SessionExpired)) | Err(Stop::SessionOver) => {
                Err(lost(session.lost_reason().unwrap_or(crate::error::LostReason::SessionExpired)))
            }
            Ok(Err(zk::Error::AuthFailed)) => {
                Err(lost(session.lost_reason().unwrap_or(crate::error::LostReason::AuthFailed)))
            }
            Ok(Err(zk::Error::ClientClosed)) | Err(Stop::Closed) => Err(lost(crate::error::LostReason::Closed)),
            // Cut off, garbled, or not carried out (see `connection_lost`): no answer proves
            // the node gone.
            Ok(Err(err)) if connection_lost => Err(self.error(
                ErrorKind::ConnectionLoss,
                format!(
                    "the server did not confirm the release ({err}); the lock node is deleted in the background \
                     (once reconnected), or goes with the session"
                ),
            )),
            Err(stop) => Err(self.stopped(&session, stop, || {
                self.error(ErrorKind::ConnectionLoss, refused(&self.client.options.language))
            })),
            Ok(Err(err)) => Err(self.zk_error(err, "deleting the lock node")),
        }
    }
}

/// A release's delete awaiting its answer. Dropped before it (the release's future dropped: a
/// timeout around it, a cancelled task), the node is removed in the background, as after a
/// connection loss: the request may never reach the server, and the live session would keep the
/// node, and the lock, for good.
struct UnansweredDelete<'a> {
    client: &'a Arc<ClientInner>,
    session: &'a Arc<Session>,
    node: &'a str,
}

impl UnansweredDelete<'_> {
    /// Answered: nothing to do in the background (and nothing to free: it only borrows).
    fn answered(self) {
        std::mem::forget(self);
    }
}

impl Drop for UnansweredDelete<'_> {
    fn drop(&mut self) {
        let removal = remove_node(self.client.clone(), self.session.clone(), NodeName::known(self.node));
        self.client.runtime.spawn(removal);
    }
}
