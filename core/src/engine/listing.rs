//! Listing the queue: one listing shared by the attempts whose creates it covers, and the
//! children put in queue order (by name, then by creation zxid where names cannot tell).

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use zookeeper_client as zk;

use super::path::{path_version, PathVersion};
use super::Recipe;
use crate::order;
use crate::policy::{Mode, PathRecipe};
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
    /// Which locks the children admit: worked out once for every attempt the listing serves (a
    /// burst of N acquisitions on one client shares a few listings of up to N names each, and
    /// each attempt reading every name was quadratic: seconds of CPU at 10,000).
    pub(super) recipe: PathRecipe,
    /// How many of `names`, from the front, are sorted by [`order::name_key`]: where an attempt
    /// finds its own node by binary search.
    by_name: usize,
    /// [`Mode::writer_positions`] of `names`, worked out at the first reader's asking.
    writers: OnceLock<Vec<usize>>,
}

impl Listing {
    fn of(mut names: Vec<String>, path: Option<PathVersion>) -> Listing {
        let ordered = order::sort_by_name(&mut names);
        let by_name = names.iter().take_while(|name| order::name_key(name).is_some()).count();
        Listing::new(names, ordered, by_name, path)
    }

    fn new(names: Vec<String>, ordered: usize, by_name: usize, path: Option<PathVersion>) -> Listing {
        let recipe = PathRecipe::of_names(names.iter().map(String::as_str));
        Listing { names, ordered, path, recipe, by_name, writers: OnceLock::new() }
    }

    /// The position of the child `name`, if listed: found by its sequence where the names
    /// allow (a burst's attempts each look for their own node in a listing of the whole burst).
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        if let Some(key) = order::name_key(name) {
            let sorted = &self.names[..self.by_name];
            let start = sorted.partition_point(|other| order::name_key(other) < Some(key));
            let same_key = sorted[start..].iter().take_while(|other| order::name_key(other) == Some(key));
            if let Some(offset) = same_key.into_iter().position(|other| other == name) {
                return Some(start + offset);
            }
        }
        self.names.iter().position(|other| other == name)
    }

    /// For [`Mode::decide_with`]: the position of the last node below `end` that keeps readers
    /// out.
    pub(super) fn last_writer_before(&self, end: usize) -> Option<usize> {
        let writers = self.writers.get_or_init(|| Mode::writer_positions(&self.names, true));
        writers.partition_point(|&at| at < end).checked_sub(1).map(|i| writers[i])
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
    // The front keeps its order by name.
    let ordered = names.len();
    Ok(Ok(Arc::new(Listing::new(names, ordered, listing.ordered, listing.path))))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The listing's quick answers (its recipe, a child's position, the last writer before a
    /// position) are the plain scans' answers, for queues of every order `order` knows: good
    /// sequences, a downgrade's repeated one, names past the limit, names of no lock.
    #[test]
    fn a_listings_lookups_agree_with_scanning_it() {
        let node = |marker: &str, sequence: i32| format!("_c_{sequence}-{marker}{sequence:010}");
        let downgrade_read = format!("_c_4r-__READ__{:010}", 4);
        let queues: Vec<Vec<String>> = vec![
            vec![],
            (0..50).map(|s| node("lock-", s)).collect(),
            (0..60).map(|s| node(if s % 7 == 3 { "__WRIT__" } else { "__READ__" }, s)).collect(),
            vec![node("__WRIT__", 4), downgrade_read.clone(), node("__READ__", 5), node("__WRIT__", 6)],
            vec![node("__READ__", 1), node("__WRIT__", i32::MAX), node("__READ__", -5), "stray".to_owned()],
            vec![node("lock-", 2), node("lock-", 2), node("lock-", 1)],
        ];
        for names in queues {
            let listing = Listing::of(names.clone(), None);
            let scanned = PathRecipe::of_names(names.iter().map(String::as_str));
            assert_eq!(listing.recipe, scanned);
            for (at, name) in listing.names.iter().enumerate() {
                assert_eq!(listing.names[listing.position(name).expect("listed")], *name, "{name} at {at}");
            }
            assert_eq!(listing.position(&node("lock-", 999)), None);
            for end in 0..=listing.names.len() {
                let scan = listing.names[..end]
                    .iter()
                    .rposition(|name| matches!(Mode::of_node_in(name, true), Some(Mode::Write | Mode::Exclusive)));
                assert_eq!(listing.last_writer_before(end), scan, "before {end} in {:?}", listing.names);
            }
        }
    }
}
