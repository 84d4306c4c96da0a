//! Listing the queue: one listing shared by the attempts whose creates it covers, and the
//! children put in queue order (by name, then by creation zxid where names cannot tell).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use zookeeper_client as zk;

use super::path::{path_version, PathVersion};
use super::Recipe;
use crate::order;
use crate::retry::{Requests, Stop, ZkResult};
use crate::validate;

/// A lock path's children, in queue order as far as their names tell (see `order`).
pub(crate) struct Listing {
    pub(super) names: Vec<String>,
    /// How many of `names`, from the front, are in queue order: the rest are to be ordered by
    /// creation zxid (past the sequence limit, say).
    pub(super) ordered: usize,
    /// The lock path's version at the listing, for a protected lock (whose listings ask for it).
    pub(super) path: Option<PathVersion>,
}

impl Listing {
    fn of(mut names: Vec<String>, path: Option<PathVersion>) -> Listing {
        let ordered = order::sort_by_name(&mut names);
        Listing { names, ordered, path }
    }
}

/// Lists `path`'s children, and for a protected lock the path's version with them (one request
/// either way: getChildren2 instead of getChildren).
pub(super) fn list(
    zk: &zk::Client,
    path: &str,
    protected: bool,
) -> impl std::future::Future<Output = ZkResult<Listing>> + Send {
    let (zk, path) = (zk.clone(), path.to_owned());
    async move {
        if protected {
            zk.get_children(&path).await.map(|(names, stat)| Listing::of(names, Some(path_version(&stat))))
        } else {
            zk.list_children(&path).await.map(|names| Listing::of(names, None))
        }
    }
}

pub(super) type ListingReply = futures::future::Shared<futures::future::BoxFuture<'static, ZkResult<Arc<Listing>>>>;

/// A listing prepared, not sent yet.
pub(super) struct PreparedListing(ListingReply);

/// A listing in flight or done, and the creates it was sent behind.
pub(super) struct SharedListing {
    /// It was sent after the create with this ticket (and every earlier one): it shows their
    /// nodes, if they still exist.
    pub(super) covers: u64,
    pub(super) reply: ListingReply,
}

impl Recipe {
    /// Sends a listing now, behind every create sent so far, for every attempt whose create it
    /// covers.
    pub(super) fn send_listing(&self, zk: &zk::Client) -> ListingReply {
        self.send_prepared(self.prepare_listing(zk))
    }

    /// A listing ready to go, its request not sent yet (see [`Recipe::send_prepared`]): made
    /// before a create, so that the listing can follow the create at once, in the same write.
    pub(super) fn prepare_listing(&self, zk: &zk::Client) -> PreparedListing {
        let listing = list(zk, &self.path, self.protected());
        PreparedListing(futures::FutureExt::shared(futures::FutureExt::boxed(
            async move { listing.await.map(Arc::new) },
        )))
    }

    /// Sends a prepared listing now, behind every create sent so far, for every attempt whose
    /// create it covers.
    pub(super) fn send_prepared(&self, prepared: PreparedListing) -> ListingReply {
        let reply = prepared.0;
        // Read before the request goes: it follows at least these creates.
        let covers = self.creates_sent.load(Ordering::Acquire);
        // One poll sends the request now, in order behind the creates it covers. Through a clone
        // of its own: a handle that has seen the reply must not be polled again, and the reply
        // may come at once (an error, or a quick server).
        let _ = futures::FutureExt::poll_unpin(
            &mut reply.clone(),
            &mut std::task::Context::from_waker(futures::task::noop_waker_ref()),
        );
        let mut slot = self.shared_listing.lock();
        if slot.as_ref().map_or(true, |shared| shared.covers <= covers) {
            *slot = Some(SharedListing { covers, reply: reply.clone() });
        }
        reply
    }

    /// A listing that shows the node of the create with `ticket`: one already sent after it if
    /// there is one, or else a new one. (A burst of acquisitions on one client so shares a few
    /// listings, instead of each listing a queue that grows with the burst.)
    pub(super) fn listing_after(&self, ticket: u64, zk: &zk::Client) -> ListingReply {
        let covering =
            self.shared_listing.lock().as_ref().filter(|shared| shared.covers >= ticket).map(|s| s.reply.clone());
        covering.unwrap_or_else(|| self.send_listing(zk))
    }

    /// Drives to its end, in the background, a listing in flight that this attempt gave up
    /// waiting for (its create failed, say): until answered it holds a handle on the session,
    /// which would keep [`crate::Client::close`] waiting for the session timeout.
    pub(super) fn finish_abandoned_listing(&self) {
        let pending = self.shared_listing.lock().as_ref().filter(|s| s.reply.peek().is_none()).map(|s| s.reply.clone());
        if let Some(reply) = pending {
            self.client.runtime.spawn(async move {
                let _ = reply.await;
            });
        }
    }

    /// Whether a listing is on its way: a create sent meanwhile may wait for the next one rather
    /// than send its own right behind it.
    pub(super) fn listing_in_flight(&self) -> bool {
        self.shared_listing.lock().as_ref().is_some_and(|shared| shared.reply.peek().is_none())
    }
}

/// The children in queue order: the listing itself when their names gave that order, else with
/// the rest ordered by creation zxid, from multi-reads of their stats (children gone meanwhile
/// left out).
pub(super) async fn in_queue_order(
    requests: &Requests<'_>,
    path: &str,
    listing: Arc<Listing>,
) -> std::result::Result<ZkResult<Arc<Listing>>, Stop> {
    if listing.ordered == listing.names.len() {
        return Ok(Ok(listing));
    }
    let (ordered, rest) = listing.names.split_at(listing.ordered);
    let stats = match read_children(requests, path, rest).await? {
        Ok(stats) => stats,
        Err(err) => return Ok(Err(err)),
    };
    let mut rest: Vec<(i64, &String)> =
        rest.iter().zip(stats).filter_map(|(name, read)| read.map(|(_, stat)| (stat.czxid, name))).collect();
    order::sort_by_zxid(&mut rest, |(czxid, _)| *czxid);
    let names: Vec<String> = ordered.iter().chain(rest.into_iter().map(|(_, name)| name)).cloned().collect();
    Ok(Ok(Arc::new(Listing { ordered: names.len(), names, path: listing.path })))
}

/// Data and stat of each child, `None` for a child that is already gone: multi-reads, each
/// under the server's packet limit (one multi of a long queue's reads would be over it, and the
/// server would drop the connection at every attempt), sent together.
pub(super) async fn read_children(
    requests: &Requests<'_>,
    path: &str,
    names: &[String],
) -> std::result::Result<ZkResult<Vec<Option<(Vec<u8>, zk::Stat)>>>, Stop> {
    let limit = requests.client.options.jute_maxbuffer as usize;
    let chroot = requests.client.chroot.len();
    let batches = validate::multi_read_batches(names.iter().map(|name| chroot + path.len() + 1 + name.len()), limit);
    let read = |batch: &[String]| {
        let mut reader = requests.zk().new_multi_reader();
        let added = batch.iter().try_for_each(|name| reader.add_get_data(&format!("{path}/{name}")));
        async move {
            added?;
            reader.commit().await
        }
    };
    let replies =
        futures::future::join_all(batches.into_iter().map(|batch| requests.retry(move || read(&names[batch.clone()]))));
    let mut reads = Vec::with_capacity(names.len());
    for reply in replies.await {
        match reply? {
            Ok(results) => reads.extend(results.into_iter().map(|result| match result {
                zk::MultiReadResult::Data { data, stat } => Some((data, stat)),
                _ => None,
            })),
            Err(err) => return Ok(Err(err)),
        }
    }
    Ok(Ok(reads))
}
