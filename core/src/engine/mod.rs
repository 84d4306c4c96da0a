//! The recipe engine: the contend loop, written once for every kind of lock. An attempt creates
//! its uuid-marked EPHEMERAL_SEQUENTIAL node (finding it again after a connection loss instead
//! of making a second), lists the queue, asks its [`Mode`] whether it holds or which node to
//! wait for, watches that node and looks again when it goes; on a timeout, a cancel or an error
//! its node is removed.
//!
//! Around the loop, one module per concept: `recipe` (the lock path as this process uses it, its
//! errors and create options), `wait` (how long an acquisition may wait), `attempt` (an attempt's
//! node, found again and removed), `listing` (the shared listing and queue order), `path` (the
//! lock path: made, its ACL checked, the recipe it holds), `node_data` (the owner's identity a
//! node holds), `handoff` (nodes this client released after holding), `downgrade`, `release`,
//! `participants` (who holds and who waits), `leases` (the semaphore's lease step), `options`,
//! `registry` (a client's recipes) and `walk` (the locks under a prefix).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::FutureExt;
use zookeeper_client as zk;

use crate::error::{Error, ErrorKind, Result};
use crate::hold::{Hold, NodeEvent};
use crate::mode::Mode;
use crate::owners::Owner;
use crate::policy::{AfterWait, Decision};
use crate::retry::{Reply, Requests, Stop};

mod attempt;
mod downgrade;
mod handoff;
mod leases;
mod listing;
mod node_data;
mod options;
mod participants;
mod path;
mod recipe;
mod registry;
mod release;
mod wait;
mod walk;

use attempt::{find_mine, Attempt, Made, NodeName};
pub(crate) use handoff::ReleasedNodes;
pub use leases::MaxLeases;
pub(crate) use leases::SemaphoreMax;
use listing::{in_queue_order, list, Listing, ListingReply};
pub use node_data::Identity;
pub use options::LockOptions;
pub use participants::Participant;
pub(crate) use recipe::Recipe;
pub(crate) use registry::{Registry, UserHandles};
pub(crate) use wait::{again_on_new_session, unreachable, Wait};
pub use wait::{REMOVAL_GRACE, TRY_BOUND};

/// How long a listing may go unanswered before the server counts as unreachable: [`TRY_BOUND`],
/// or the connection's read timeout (2/5 of the session timeout, after which the client drops a
/// silent connection) when that is longer: a long queue's reads, in batches of up to a packet
/// each, can take seconds on a loaded server that answers them all.
pub(crate) fn listing_bound(session: &crate::session::Session) -> std::time::Duration {
    TRY_BOUND.max(session.timeout * 2 / 5)
}
pub use walk::LocksUnder;

impl Recipe {
    /// An acquisition in `mode`: attempts until one holds, fails, or the deadline passes.
    /// `Ok(None)`: not had by the deadline (or, only trying, held by others).
    ///
    /// A waiter whose session ends (expired, or disconnected past its timeout) lost its node
    /// with it, and its place in the queue: as kazoo's and Curator's waiters do, it queues again,
    /// at the back, on a new session, within its deadline. (A holder's loss is a loss: holds
    /// are never in here. Nor are sessions ended by closing the client or refused credentials.)
    pub(crate) async fn contend(&self, mode: Mode, owner: &Owner, wait: &Wait) -> Result<Option<Hold>> {
        let _in_progress = crate::memory::InProgress::new(&self.client.callbacks);
        again_on_new_session(wait, &self.path, |wait| self.attempt(mode, owner, wait)).await
    }

    /// One acquisition attempt, with its node removed on every way out but success.
    async fn attempt(&self, mode: Mode, owner: &Owner, wait: &Wait) -> Result<Option<Hold>> {
        self.check_owner(owner)?;
        // In a block: what took the turns is gone before the wait (a waiter's future keeps no room
        // for it).
        let (send_turn, create_slot, session) = {
            // Uncontended, neither step below waits: taken at once, with no future boxed for it.
            let at_once = !wait.is_over();
            // A session to queue on (a new one, after a waiter's ended), within the deadline too;
            // before the turns, so that an acquisition waiting out an outage for one (a forever
            // wait does, round after round) keeps no turn from a try or a timed acquisition.
            let live = if at_once { self.client.live_session(&self.path)? } else { None };
            let session = match live {
                Some(session) => session,
                None => match Box::pin(wait.within(self.client.session_waiting(&self.path, wait.forever()))).await {
                    Some(session) => session.map_err(|err| wait.session_error(err, &self.path))?,
                    None => return wait.out_of_time(&self.path),
                },
            };
            // Acquisitions begun earlier may still be creating the path.
            // (A free turn has no one queued for it: tokio's mutex hands a released turn straight to
            // the next in line.)
            let free_turn = if at_once { self.client.send_order.try_lock().ok() } else { None };
            let send_turn = match free_turn {
                Some(turn) => turn,
                None => match Box::pin(wait.within(self.client.send_order.lock())).await {
                    Some(turn) => turn,
                    None => return wait.out_of_time(&self.path),
                },
            };
            // A place in the window of creates in flight, taken under the send turn (see
            // `ClientInner::create_window`) and given back once the create and its listing are answered.
            let free_slot = if at_once { self.client.try_create_slot() } else { None };
            let create_slot = match free_slot {
                Some(slot) => slot,
                None => match Box::pin(wait.within(self.client.create_slot())).await {
                    Some(slot) => slot,
                    None => return wait.out_of_time(&self.path),
                },
            };
            (send_turn, create_slot, session)
        };
        // A try's deadline is its bound (`TRY_BOUND`).
        let requests = Requests::new(&self.client, &session, wait.deadline).with_abort(wait.abort.clone());
        let mut attempt = Attempt {
            client: self.client.clone(),
            session: session.clone(),
            node: NodeName::new(&self.path, attempt::name_prefix(self.client.attempt_ids.next(), mode.marker())),
            armed: false,
        };
        let mut queueing = Queueing {
            send_turn: Some(send_turn),
            create_slot: Some(create_slot),
            mine: None,
            awaited: None,
            own_watch: None,
            own_watch_sent: None,
            then: AfterWait::LooksAgain,
        };
        // Its steps, and between them its waits, here: through a wait a waiter keeps `queueing`,
        // its node and its requests, and the wait's own future.
        let mut woke = None;
        let checked = match self.kinds_checked.load(Ordering::Acquire) {
            true => Ok(()),
            // Boxed: its listing would otherwise take room in every waiter's future.
            false => Box::pin(self.check_kinds(mode, &requests)).await,
        };
        let result = match checked {
            Err(failed) => Err(failed),
            Ok(()) => loop {
                let step = Box::pin(self.step(
                    mode,
                    &requests,
                    owner,
                    wait.only_try,
                    &mut attempt,
                    &mut queueing,
                    woke.take(),
                ));
                let informant = match step.await {
                    Ok(Step::Done(held)) => break Ok(held),
                    Ok(Step::Wait(informant)) => informant,
                    Err(failed) => break Err(failed),
                };
                // The wait, inline (but the rarer one with an informant): every waiter of a long
                // queue waits here.
                let waiting = queueing.awaited.as_mut().expect("watched, or kept");
                let ended = match informant {
                    None => requests.bounded(&mut waiting.event).await.map(|event| (event, false)),
                    Some(mut informant) => {
                        let either = futures::future::select(&mut waiting.event, &mut informant);
                        Box::pin(requests.bounded(either)).await.map(|ended| match ended {
                            futures::future::Either::Left((event, _)) => (event, false),
                            futures::future::Either::Right((event, _)) => (event, true),
                        })
                    }
                };
                match ended {
                    Ok((event, informed)) => {
                        woke = Some(Woke { event_type: event.event_type, session_state: event.session_state, informed })
                    }
                    Err(stop) => break Err(Failed::Stopped(stop)),
                }
            },
        };
        let result = match result {
            // With a deadline, a stop at it is no error: the lock was not had in time (a try's,
            // that the server could not be reached).
            Err(Failed::Stopped(Stop::Deadline)) => match wait.out_of_time(&self.path) {
                Ok(none) => Ok(none),
                Err(err) => Err(Failed::Error(err)),
            },
            Ok(Some(hold)) => match self.born_lost(&hold) {
                Some(stop) => Err(Failed::Stopped(stop)),
                None => Ok(Some(hold)),
            },
            result => result,
        };
        match &result {
            Ok(Some(_)) => attempt.armed = false,
            // The session is gone, and its ephemeral nodes with it.
            Err(Failed::Stopped(Stop::Closed | Stop::SessionOver)) => attempt.armed = false,
            _ => Box::pin(attempt.remove(wait.give_back_by())).await,
        }
        result.map_err(|failed| match failed {
            Failed::Error(err) => err,
            Failed::Stopped(stop) => self.stopped(&session, stop, || unreachable(&self.path, "trying")),
        })
    }

    /// Queues the attempt: sends its create and, pipelined right behind it, the listing (or
    /// takes one sent behind it). `Ok(None)`: look again (the create's fate was unknown, or the
    /// path was made first). Boxed by the caller, so that a waiter does not carry this step's
    /// futures through its wait.
    async fn enqueue(
        &self,
        requests: &Requests<'_>,
        owner: &Owner,
        attempt: &mut Attempt,
        send_turn: &mut Option<tokio::sync::MutexGuard<'_, ()>>,
        mine: &mut Option<Made>,
    ) -> std::result::Result<Option<Arc<Listing>>, Failed> {
        let zk = requests.zk();
        // Pipelined: ZooKeeper answers a session's requests in order, so the listing
        // sent right behind the create already contains the new node. One round trip.
        attempt.armed = true;
        // Made here, not kept: a waiter's memory is what lives across its wait.
        let data = self.node_data(owner);
        // Uncontended, the listing goes right behind the create (made ready first, so that the
        // client writes both at once); while another is on its way, this attempt takes the next
        // one, sent behind more creates.
        let listing = (!self.listing_in_flight()).then(|| self.prepare_listing(zk));
        let create =
            zk.create(attempt.node.prefixed(), &data, &self.node_options(zk::CreateMode::EphemeralSequential).0);
        let ticket = self.creates_sent.fetch_add(1, Ordering::AcqRel) + 1;
        let listing = listing.map(|listing| self.send_prepared(listing));
        if self.path_known.load(Ordering::Acquire) {
            // Sent: later acquisitions of this client may send theirs.
            drop(send_turn.take());
        }
        match Box::pin(requests.send(create)).await? {
            Reply::Answered(Ok((stat, sequence))) => {
                requests.progressed();
                self.path_known.store(true, Ordering::Release);
                drop(send_turn.take());
                attempt.node.made(sequence);
                *mine = Some(Made { sequence: sequence.into_i64(), czxid: stat.czxid });
            }
            Reply::Answered(Err(zk::Error::NoNode)) => {
                self.path_known.store(false, Ordering::Release);
                Box::pin(self.make_parents(requests)).await?;
                return Ok(None);
            }
            Reply::Answered(Err(err)) => return Err(Failed::Error(self.zk_error(err, "creating the lock node"))),
            Reply::Reconnected => {
                // The create may or may not have happened: find it by our uuid rather
                // than make a second node.
                *mine = match Box::pin(find_mine(requests, &self.path, attempt.node.prefix())).await? {
                    Ok(Some(found)) => {
                        attempt.node.found(&found.name);
                        Some(found.made)
                    }
                    Ok(None) => {
                        attempt.node.forget();
                        None
                    }
                    Err(err) => return Err(Failed::Error(self.zk_error(err, "finding our lock node"))),
                };
                return Ok(None);
            }
        }
        let listing = match listing {
            Some(sent) => ListingReply::Sent(sent),
            None => self.listing_after(ticket, zk),
        };
        match Box::pin(requests.send(listing)).await? {
            Reply::Answered(Ok(children)) => {
                requests.progressed();
                Ok(Some(children))
            }
            Reply::Reconnected | Reply::Answered(Err(zk::Error::NoNode)) => Ok(None),
            Reply::Answered(Err(err)) => Err(Failed::Error(self.zk_error(err, "listing the contenders"))),
        }
    }

    /// One step of an attempt: from its create, or its look at the queue, or (`woke`) the event
    /// its last wait ended with, to its hold or its end ([`Step::Done`]), or to its next wait
    /// ([`Step::Wait`]). Boxed by the caller, so that a waiter keeps through its wait only its
    /// `Queueing` (a step's requests, listing and decisions take room only while it runs).
    #[allow(clippy::too_many_arguments)]
    async fn step<'a>(
        &self,
        mode: Mode,
        requests: &Requests<'a>,
        owner: &Owner,
        only_try: bool,
        attempt: &mut Attempt,
        q: &mut Queueing<'a>,
        mut woke: Option<Woke>,
    ) -> std::result::Result<Step, Failed> {
        let zk = requests.zk();
        let session = requests.session;
        loop {
            let (ahead, then) = match woke.take() {
                Some(Woke { event_type, session_state, informed }) => {
                    let mut ahead = String::new();
                    if !informed {
                        // Its watcher has fired: it cannot be waited on again.
                        ahead = q.awaited.take().expect("waited on").node;
                    } else if q.own_watch.is_none() && event_type != zk::EventType::Session {
                        // The informant went: most likely next in line now, so the watch on our own
                        // node goes out with the listing that follows (one round trip for both).
                        let own_path = attempt.node.node().expect("set with our node");
                        q.own_watch_sent = Some((zk.state_watcher(), Box::pin(zk.check_and_watch_stat(own_path))));
                    }
                    match (event_type, session_state) {
                        (zk::EventType::Session, zk::SessionState::Expired) => return Err(Stop::SessionOver.into()),
                        (zk::EventType::Session, zk::SessionState::Closed) => return Err(Stop::Closed.into()),
                        (zk::EventType::Session, zk::SessionState::AuthFailed) => {
                            return Err(self.error(ErrorKind::AuthFailed, "authentication failed while waiting").into())
                        }
                        (zk::EventType::NodeDeleted, _) if !informed => {}
                        // The informant went (look again while the node ahead most likely still
                        // holds), or anything else (a change of its data, a disconnection): look again.
                        _ => continue,
                    }
                    (ahead, q.then)
                }
                None => {
                    if q.mine.is_none() {
                        // Queueing (again): watches set for an earlier node say nothing of the next.
                        q.awaited = None;
                        q.own_watch = None;
                        q.own_watch_sent = None;
                    }
                    // In a block: nothing of the listing outlives the decision (a waiter keeps O(1)
                    // memory, and a step's box takes no room for it while it sends its watches).
                    let (mut ahead, then, informant) = {
                        let children = match &q.mine {
                            None => {
                                let enqueued =
                                    Box::pin(self.enqueue(requests, owner, attempt, &mut q.send_turn, &mut q.mine))
                                        .await;
                                // The first create is answered (a queueing again is no part of a burst).
                                drop(q.create_slot.take());
                                match enqueued? {
                                    Some(children) => children,
                                    None => continue,
                                }
                            }
                            Some(_) => match Box::pin(requests.retry(|| list(zk, &self.path, self.protected()))).await?
                            {
                                Ok(children) => {
                                    requests.progressed();
                                    Arc::new(children)
                                }
                                // The lock path vanished, and our node with it: queue again (kazoo #563).
                                Err(zk::Error::NoNode) => {
                                    self.path_known.store(false, Ordering::Release);
                                    q.mine = None;
                                    attempt.node.forget();
                                    continue;
                                }
                                Err(err) => return Err(Failed::Error(self.zk_error(err, "listing the contenders"))),
                            },
                        };
                        if let Some(err) = self.conflict(mode, &children) {
                            return Err(Failed::Error(err));
                        }
                        // Our node is in this listing, so the path cannot go (or be made anew) while we wait
                        // or hold: its ACL, checked here, stays the one our place in the queue is under.
                        // (Each step boxed only when it has work: the uncontended path allocates neither.)
                        if self.path_acl_to_check(children.path) {
                            Box::pin(self.check_path_acl(requests, children.path)).await?;
                        }
                        let Made { sequence, czxid } = q.mine.expect("created above");
                        let queue = if children.in_name_order() {
                            children
                        } else {
                            match Box::pin(in_queue_order(requests, &self.path, children)).await? {
                                Ok(queue) => queue,
                                Err(err) => return Err(Failed::Error(self.zk_error(err, "reading the contenders"))),
                            }
                        };
                        let Some(position) = attempt.node.name().and_then(|ours| queue.position(ours)) else {
                            // Our node is gone (the path was removed, or someone deleted it): queue again.
                            q.mine = None;
                            attempt.node.forget();
                            continue;
                        };
                        let names = &queue.names;
                        let decided = match mode.decide_with(names, position, |end| queue.last_writer_before(end)) {
                            Decision::Holds => {
                                // The watch on our own node goes on as the hold's (one sent with this listing
                                // is answered already: dropped, it would cost a request to remove it).
                                let own_event = match (q.own_watch.take(), q.own_watch_sent.take()) {
                                    (Some(own), _) => Some(own.event),
                                    (None, Some((_, request))) => match Box::pin(requests.send(request)).await? {
                                        Reply::Answered(Ok((Some(_), watcher))) => Some(watcher),
                                        _ => None,
                                    },
                                    (None, None) => None,
                                };
                                // Taken, not copied, with no await left before the hold is returned (the
                                // attempt is disarmed then, so nothing needs the path to remove the node).
                                let node_path = attempt.node.take_node().expect("set with our node");
                                let hold = Hold::new(session, &self.client.closed, node_path, sequence, czxid);
                                self.registry.node_watcher.add(&hold, own_event);
                                return Ok(Step::Done(Some(hold)));
                            }
                            Decision::WaitFor { node, then } => {
                                // A node of this client's own tells its going to the waiter behind it, if
                                // it held (see `ReleasedNodes`): no informant is needed then.
                                let informant = match then {
                                    AfterWait::HoldsIfReleasedHere { informant }
                                        if !self.client.attempt_ids.made(&names[node]) =>
                                    {
                                        Some(self.child_path(&names[informant]))
                                    }
                                    _ => None,
                                };
                                (self.child_path(&names[node]), then, informant)
                            }
                        };
                        decided
                    };
                    if only_try {
                        return Ok(Step::Done(None));
                    }
                    // The watch on the node ahead is kept across a look again that still names it. (Its
                    // name is kept once, in `awaited`, while it is watched.)
                    match &q.awaited {
                        Some(kept) if kept.node == ahead => ahead = String::new(),
                        _ => q.awaited = None,
                    }
                    // In a block: the requests end with it.
                    let (informant_event, ahead_gone) = {
                        let watch_ahead = if q.awaited.is_none() {
                            if let Some(hook) = &self.before_watch {
                                hook(ahead.clone()).await;
                            }
                            // getData sets no watch on a missing node, so NoNode leaves nothing behind.
                            // (Boxed: its room would otherwise stay in the waiter's future through the wait.)
                            Some(Box::pin(zk.get_and_watch_data(&ahead)))
                        } else {
                            None
                        };
                        // Next in line: watch our own node too (sent right behind), so that the node ahead
                        // going needs no request to know ours was still there (see `OwnWatch`).
                        // (Boxed, as the informant's: many waiters send neither, and their futures would
                        // otherwise take room in every waiter's.)
                        let own_path = attempt.node.node().expect("set with our node");
                        let watch_own = q.own_watch_sent.take().or_else(|| {
                            (then == AfterWait::Holds && q.own_watch.is_none()).then(|| -> OwnWatchRequest<'_> {
                                (zk.state_watcher(), Box::pin(zk.check_and_watch_stat(own_path)))
                            })
                        });
                        let watch_informant = informant.map(|informant| Box::pin(zk.get_and_watch_data(&informant)));
                        let mut ahead_gone = false;
                        if let Some(request) = watch_ahead {
                            match Box::pin(requests.send(request)).await? {
                                Reply::Answered(Ok((_, _, watcher))) => {
                                    requests.progressed();
                                    let node = std::mem::take(&mut ahead);
                                    q.awaited = Some(Awaited { node, event: watcher });
                                }
                                Reply::Answered(Err(zk::Error::NoNode)) => ahead_gone = true,
                                Reply::Reconnected => continue,
                                // A node ahead that this client may not read (anyone may make one with
                                // such an ACL on an open path): exists needs no READ. It leaves a watch
                                // behind on a node already gone, which is why it is not the first try.
                                Reply::Answered(Err(zk::Error::NoAuth)) => {
                                    match Box::pin(requests.send(zk.check_and_watch_stat(&ahead))).await? {
                                        Reply::Answered(Ok((Some(_), watcher))) => {
                                            requests.progressed();
                                            let node = std::mem::take(&mut ahead);
                                            q.awaited = Some(Awaited { node, event: watcher });
                                        }
                                        Reply::Answered(Ok((None, _))) => ahead_gone = true,
                                        Reply::Reconnected => continue,
                                        Reply::Answered(Err(err)) => {
                                            return Err(Failed::Error(self.zk_error(err, "watching the node ahead")))
                                        }
                                    }
                                }
                                Reply::Answered(Err(err)) => {
                                    return Err(Failed::Error(self.zk_error(err, "watching the node ahead")))
                                }
                            }
                        }
                        if let Some((states, request)) = watch_own {
                            match Box::pin(requests.send(request)).await? {
                                Reply::Answered(Ok((Some(stat), watcher))) if stat.ephemeral_owner == session.id => {
                                    q.own_watch = Some(Box::new(OwnWatch { event: watcher, states }));
                                }
                                // Our node is gone: queue again.
                                Reply::Answered(Ok(_)) => {
                                    q.mine = None;
                                    attempt.node.forget();
                                    q.awaited = None;
                                    continue;
                                }
                                // No watch: the handoff asks the server instead.
                                Reply::Answered(Err(_)) | Reply::Reconnected => {}
                            }
                        }
                        // Only a hint: without it, the handoff lists again.
                        let informant_event: Option<NodeEvent> = match watch_informant {
                            None => None,
                            Some(request) => match Box::pin(requests.send(request)).await? {
                                Reply::Answered(Ok((_, _, watcher))) => Some(watcher),
                                // Already gone: look again now, keeping the watch on the node ahead.
                                Reply::Answered(Err(zk::Error::NoNode)) if !ahead_gone => continue,
                                Reply::Answered(_) | Reply::Reconnected => None,
                            },
                        };
                        (informant_event, ahead_gone)
                    };
                    if !ahead_gone {
                        q.then = then;
                        return Ok(Step::Wait(informant_event));
                    }
                    (ahead, then)
                }
            };
            let holds = match then {
                AfterWait::Holds => true,
                AfterWait::HoldsIfReleasedHere { .. } => self.registry.released.contains(&ahead),
                AfterWait::LooksAgain => false,
            };
            if !holds {
                // Someone ahead may have given up with others still ahead of it, or a downgrade's
                // read node may have taken its place: look again.
                continue;
            }
            // The handoff without a listing. While our node exists the lock path cannot have been
            // deleted and made again (it has a child), and every node made after ours sorts
            // after ours (a higher sequence, or past the sequence limit a higher creation zxid),
            // but a downgrade's read node, which takes the place of its write node (see `order`):
            // a writer that watched a write node looks again (`AfterWait::LooksAgain`), and such
            // a read node keeps no reader out. So the set of nodes ahead of us that keep us out
            // only shrinks. The node we watched was the only one
            // in it that kept us out, or it was an exclusive or write node that held (released
            // by this client: see `ReleasedNodes`), so nothing was ahead of it, and nothing is
            // between it and us that keeps us out (it was our predecessor, or for a reader the
            // nearest writer ahead). It is gone, so we hold, once we know our node was still
            // there and this session's when it went (someone may have deleted it meanwhile).
            let own_path = attempt.node.node().expect("set with our node").to_owned();
            let Made { sequence, czxid } = q.mine.expect("set with our node");
            if let Some(own) = q.own_watch.take() {
                if let Some(event) = (*own).silent() {
                    let hold = Hold::new(session, &self.client.closed, own_path, sequence, czxid);
                    self.registry.node_watcher.add(&hold, Some(event));
                    return Ok(Step::Done(Some(hold)));
                }
            }
            match Box::pin(requests.send(zk.check_stat(&own_path))).await? {
                Reply::Answered(Ok(Some(stat))) if stat.ephemeral_owner == session.id => {
                    requests.progressed();
                    let hold = Hold::new(session, &self.client.closed, own_path, sequence, czxid);
                    self.registry.node_watcher.add(&hold, None);
                    return Ok(Step::Done(Some(hold)));
                }
                // Our node is gone: queue again.
                Reply::Answered(Ok(_)) => {
                    q.mine = None;
                    attempt.node.forget();
                }
                Reply::Reconnected => {}
                Reply::Answered(Err(err)) => return Err(Failed::Error(self.zk_error(err, "checking our lock node"))),
            }
        }
    }
}

/// The watch on the node an attempt waits for.
struct Awaited {
    node: String,
    event: NodeEvent,
}

/// A waiter's watch on its own node, set once it is next in line. ZooKeeper delivers a session's
/// events in the order of the changes behind them, so while this watch is silent when the event
/// of the node ahead arrives, our node was still there when that node went: the handoff needs no
/// request. Not after a reconnection, though: the server then reports what changed meanwhile in
/// no particular order, so any change of the session's state since the watch was sent means
/// asking the server instead.
struct OwnWatch {
    event: NodeEvent,
    states: zk::StateWatcher,
}

impl OwnWatch {
    /// The watch, to go on watching the node with, if it has reported nothing, and the session
    /// has stayed connected, since it was sent.
    fn silent(mut self) -> Option<NodeEvent> {
        let reconnected = self.states.changed().now_or_never().is_some();
        let reported = (&mut self.event).now_or_never().is_some();
        (!reconnected && !reported).then_some(self.event)
    }
}

/// What an attempt keeps between its steps, through its waits (see `Recipe::step`): with its node
/// and requests, all that a waiter of a long queue keeps, so kept small.
struct Queueing<'a> {
    /// Its first create's turns: in the client's send order (given back once sent) and in its
    /// window of creates in flight (given back once answered).
    send_turn: Option<tokio::sync::MutexGuard<'a, ()>>,
    create_slot: Option<crate::connection::CreateSlot<'a>>,
    mine: Option<Made>,
    /// The watch on the node ahead, kept across a look again that still names it.
    awaited: Option<Awaited>,
    /// Boxed: only the waiter next in line has one.
    own_watch: Option<Box<OwnWatch>>,
    /// The request for it, sent with the listing an informant's going calls for (its waiter is
    /// most likely next in line then), and answered after that listing.
    own_watch_sent: Option<OwnWatchRequest<'a>>,
    /// What the going of the node waited for means.
    then: AfterWait,
}

/// A request watching our own node, with the session's states as it was sent (see `OwnWatch`).
type OwnWatchRequest<'a> =
    (zk::StateWatcher, futures::future::BoxFuture<'a, crate::retry::ZkResult<(Option<zk::Stat>, zk::OneshotWatcher)>>);

/// Where a step of an attempt ended.
enum Step {
    /// Held, or (`None`) not had: by the deadline, or only trying.
    Done(Option<Hold>),
    /// Waiting for the node ahead to go, and for the informant (this watch) too if there is one.
    Wait(Option<NodeEvent>),
}

/// How a wait ended: the event, and whether it was the informant's.
struct Woke {
    event_type: zk::EventType,
    session_state: zk::SessionState,
    informed: bool,
}

/// Why an attempt ended without the lock: an error to report as it is, or a stopped step.
pub(super) enum Failed {
    Error(Error),
    Stopped(Stop),
}

impl From<Stop> for Failed {
    fn from(stop: Stop) -> Failed {
        Failed::Stopped(stop)
    }
}

impl From<Error> for Failed {
    fn from(err: Error) -> Failed {
        Failed::Error(err)
    }
}
