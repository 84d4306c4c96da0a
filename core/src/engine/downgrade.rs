//! The downgrade: the write holder's read, a read node in its write node's place.

use zookeeper_client as zk;

use super::attempt::{create_while_held, find_mine, Attempt, NodeName, Refused};
use super::{unreachable, Recipe, Wait};
use crate::error::{Error, Result};
use crate::hold::Hold;
use crate::mode::Mode;
use crate::owners::Owner;
use crate::retry::{Reply, Requests, Stop};
use crate::session::Session;

impl Recipe {
    /// A downgrade: `owner`, holding `write`, takes the read side with a plain ephemeral read
    /// node that carries the write node's sequence (Curator 5.5+'s form, CURATOR-621), in the
    /// write hold's session, and holds at once: made in one multi with a check of the write node,
    /// so never once someone else has deleted it (and a writer behind it may hold). The node takes the write node's place in the
    /// queue (see `order`), so the writers already waiting stay out until the read is released,
    /// and readers that come once the write side is released share with it. Its fencing token
    /// is the write hold's: the hold goes on from that place, and the writers queued behind it
    /// hold later, with higher tokens. As for any attempt, its node is removed on every way out
    /// but success. `Ok(None)`: not made by the deadline.
    pub(crate) async fn downgrade(&self, owner: &Owner, write: &Hold, wait: Wait) -> Result<Option<Hold>> {
        // An acquisition as any other, for the memory a drained queue gives back (see `memory`).
        let _in_progress = crate::memory::InProgress::new(&self.client.callbacks);
        let data = self.node_data(owner);
        self.check_fits(data.len(), || format!("owner label of {} bytes", owner.label().len()))?;
        let lost = || crate::owners::write_lost(owner, &self.path, write.lost_reason());
        let session = match write.inner.session.upgrade() {
            Some(session) if !write.inner.is_lost() => session,
            _ => return Err(lost()),
        };
        let requests = Requests::new(&self.client, &session, wait.deadline).with_abort(wait.abort.clone());
        let name = format!("_c_{}-{}{:010}", self.client.attempt_ids.next(), Mode::Read.marker(), write.sequence());
        let mut attempt = Attempt {
            client: self.client.clone(),
            session: session.clone(),
            node: NodeName::whole(&self.path, &name),
            armed: true,
        };
        let (options, _) = self.node_options(zk::CreateMode::Ephemeral);
        let made = loop {
            // With a check of the write node: the local flag lags the server by a notification.
            let create = create_while_held(&session.zk, write.node_path(), attempt.node.prefixed(), &data, &options);
            match requests.send(create).await {
                Ok(Reply::Answered(Ok(Ok(_)))) => break Ok(()),
                // The write node is gone (the path too, for NoNode): nothing was made.
                Ok(Reply::Answered(Ok(Err(Refused::HoldGone | Refused::Error(zk::Error::NoNode))))) => {
                    write.inner.node_gone();
                    break Err(Some(lost()));
                }
                Ok(Reply::Answered(Ok(Err(Refused::Error(err))) | Err(err))) => {
                    break Err(Some(self.zk_error(err, "creating the read node of a downgrade")))
                }
                // Made or not: find it rather than make a second one.
                Ok(Reply::Reconnected) => match find_mine(&requests, &self.path, attempt.node.prefix()).await {
                    Ok(Ok(Some(_))) => break Ok(()),
                    Ok(Ok(None)) => continue,
                    Ok(Err(err)) => break Err(Some(self.zk_error(err, "finding the read node of a downgrade"))),
                    Err(Stop::Deadline) => break Err(None),
                    Err(stop) => break Err(Some(self.downgrade_stopped(&session, stop, owner))),
                },
                Err(Stop::Deadline) => break Err(None),
                Err(stop) => break Err(Some(self.downgrade_stopped(&session, stop, owner))),
            }
        };
        match made {
            Ok(()) => {
                attempt.armed = false;
                let hold = Hold::new(
                    &session,
                    &self.client.closed,
                    attempt.node.prefixed().to_owned(),
                    write.sequence(),
                    write.fencing_token(),
                );
                // The node went with the session, or goes with the client.
                if let Some(stop) = self.born_lost(&hold) {
                    return Err(self.downgrade_stopped(&session, stop, owner));
                }
                self.registry.node_watcher.add(&hold, None);
                Ok(Some(hold))
            }
            // The deadline passed: not made in time (a try's: the server could not be reached).
            Err(None) => {
                attempt.remove(wait.give_back_by()).await;
                wait.out_of_time(&self.path)
            }
            Err(Some(err)) => {
                attempt.remove(wait.give_back_by()).await;
                Err(err)
            }
        }
    }

    /// The error for a downgrade's step stopped before its answer: the end of the session is the
    /// loss of the write hold it reads under.
    pub(super) fn downgrade_stopped(&self, session: &Session, stop: Stop, owner: &Owner) -> Error {
        match stop {
            Stop::SessionOver => crate::owners::write_lost(owner, &self.path, session.lost_reason()),
            stop => self.stopped(session, stop, || unreachable(&self.path, "making the read node of a downgrade")),
        }
    }
}
