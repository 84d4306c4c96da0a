//! Listing the queue: one listing shared by the attempts whose creates it covers, and the
//! children put in queue order (by name, then by creation zxid where names cannot tell).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::task::{ready, Context, Poll};

use futures::future::BoxFuture;

use zookeeper_client as zk;

use super::path::{path_version, PathVersion};
use super::Recipe;
use crate::mode::Mode;
use crate::order;
use crate::policy::PathRecipe;
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
    /// The [`order::name_key`]s of as many of `names`, from the front, sorted by them: where an
    /// attempt finds its own node by binary search.
    keys: Vec<order::NameKey>,
    /// [`Mode::writer_positions`] of `names`, worked out at the first reader's asking.
    writers: OnceLock<Vec<usize>>,
}

impl Listing {
    fn of(mut names: Vec<String>, path: Option<PathVersion>) -> Listing {
        let order::ByName { ordered, keys } = order::sort_by_name(&mut names);
        Listing::new(names, ordered, keys, path)
    }

    fn new(names: Vec<String>, ordered: usize, keys: Vec<order::NameKey>, path: Option<PathVersion>) -> Listing {
        let recipe = PathRecipe::of_names(names.iter().map(String::as_str));
        Listing { names, ordered, path, recipe, keys, writers: OnceLock::new() }
    }

    /// Whether the names alone give the queue order (no child to order by creation zxid).
    pub(super) fn in_name_order(&self) -> bool {
        self.ordered == self.names.len()
    }

    /// The position of the child `name`, if listed: found by its sequence where the names
    /// allow (a burst's attempts each look for their own node in a listing of the whole burst).
    pub(super) fn position(&self, name: &str) -> Option<usize> {
        if let Some(key) = order::name_key(name) {
            let start = self.keys.partition_point(|other| *other < key);
            let same_key = self.keys[start..].iter().take_while(|other| **other == key).count();
            if let Some(offset) = self.names[start..start + same_key].iter().position(|other| other == name) {
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

/// A listing's outcome, for every attempt it serves: filled once, by the attempt that sent it
/// (or, if that one gave up first, by a task finishing it in the background).
pub(super) struct ListingOutcome {
    outcome: OnceLock<ZkResult<Arc<Listing>>>,
    filled: tokio::sync::Notify,
}

impl ListingOutcome {
    fn fill(&self, outcome: ZkResult<Arc<Listing>>) {
        let _ = self.outcome.set(outcome);
        self.filled.notify_waiters();
    }

    /// The outcome, once filled.
    async fn wait(self: Arc<Self>) -> ZkResult<Arc<Listing>> {
        loop {
            let filled = self.filled.notified();
            tokio::pin!(filled);
            filled.as_mut().enable();
            if let Some(outcome) = self.outcome.get() {
                return outcome.clone();
            }
            filled.await;
        }
    }
}

/// A listing prepared, not sent yet.
pub(super) struct PreparedListing(BoxFuture<'static, ZkResult<Listing>>);

/// A listing this attempt sent, awaited by it directly, its outcome then passed on to the
/// attempts that share it. Not through `futures::Shared`: the session's thread woke the sender
/// while holding Shared's waker lock, which the sender, woken, then waited for (a contended
/// lock in most uncontended cycles).
pub(super) struct SentListing {
    /// None once the outcome is in.
    request: Option<BoxFuture<'static, ZkResult<Listing>>>,
    outcome: Arc<ListingOutcome>,
    runtime: tokio::runtime::Handle,
}

impl Future for SentListing {
    type Output = ZkResult<Arc<Listing>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let Some(request) = this.request.as_mut() else {
            return Poll::Ready(this.outcome.outcome.get().expect("filled when its request finished").clone());
        };
        let outcome = ready!(request.as_mut().poll(cx)).map(Arc::new);
        this.request = None;
        this.outcome.fill(outcome.clone());
        Poll::Ready(outcome)
    }
}

impl Drop for SentListing {
    /// Given up before its answer: finished in the background, for the attempts that share it
    /// (and so that it lets go of the session, which [`crate::Client::close`] would wait for).
    fn drop(&mut self) {
        if let Some(request) = self.request.take() {
            let outcome = self.outcome.clone();
            self.runtime.spawn(async move { outcome.fill(request.await.map(Arc::new)) });
        }
    }
}

/// What an attempt awaits for its listing: one it sent, or one another attempt sent after its
/// create.
pub(super) enum ListingReply {
    Sent(SentListing),
    Shared(BoxFuture<'static, ZkResult<Arc<Listing>>>),
}

impl Future for ListingReply {
    type Output = ZkResult<Arc<Listing>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            ListingReply::Sent(sent) => Pin::new(sent).poll(cx),
            ListingReply::Shared(shared) => shared.as_mut().poll(cx),
        }
    }
}

/// A listing in flight or done, and the creates it was sent behind.
pub(super) struct SharedListing {
    /// It was sent after the create with this ticket (and every earlier one): it shows their
    /// nodes, if they still exist.
    pub(super) covers: u64,
    outcome: Arc<ListingOutcome>,
}

impl Recipe {
    /// Sends a listing now, behind every create sent so far, for every attempt whose create it
    /// covers.
    pub(super) fn send_listing(&self, zk: &zk::Client) -> SentListing {
        self.send_prepared(self.prepare_listing(zk))
    }

    /// A listing ready to go, its request not sent yet (see [`Recipe::send_prepared`]): made
    /// before a create, so that the listing can follow the create at once, in the same write.
    pub(super) fn prepare_listing(&self, zk: &zk::Client) -> PreparedListing {
        PreparedListing(Box::pin(list(zk, &self.path, self.protected())))
    }

    /// Sends a prepared listing now, behind every create sent so far, for every attempt whose
    /// create it covers.
    pub(super) fn send_prepared(&self, prepared: PreparedListing) -> SentListing {
        let outcome = Arc::new(ListingOutcome { outcome: OnceLock::new(), filled: tokio::sync::Notify::new() });
        let mut sent =
            SentListing { request: Some(prepared.0), outcome: outcome.clone(), runtime: self.client.runtime.clone() };
        // Read before the request goes: it follows at least these creates.
        let covers = self.creates_sent.load(Ordering::Acquire);
        // One poll sends the request now, in order behind the creates it covers (the reply may
        // come at once: an error, or a quick server).
        let _ = Pin::new(&mut sent).poll(&mut Context::from_waker(futures::task::noop_waker_ref()));
        let mut slot = self.shared_listing.lock();
        if slot.as_ref().map_or(true, |shared| shared.covers <= covers) {
            *slot = Some(SharedListing { covers, outcome });
        }
        sent
    }

    /// A listing that shows the node of the create with `ticket`: one already sent after it if
    /// there is one, or else a new one. (A burst of acquisitions on one client so shares a few
    /// listings, instead of each listing a queue that grows with the burst.)
    pub(super) fn listing_after(&self, ticket: u64, zk: &zk::Client) -> ListingReply {
        let covering = self
            .shared_listing
            .lock()
            .as_ref()
            .filter(|shared| shared.covers >= ticket)
            .map(|shared| shared.outcome.clone());
        match covering {
            Some(outcome) => ListingReply::Shared(Box::pin(outcome.wait())),
            None => ListingReply::Sent(self.send_listing(zk)),
        }
    }

    /// Whether a listing is on its way: a create sent meanwhile may wait for the next one rather
    /// than send its own right behind it.
    pub(super) fn listing_in_flight(&self) -> bool {
        self.shared_listing.lock().as_ref().is_some_and(|shared| shared.outcome.outcome.get().is_none())
    }
}

/// The children in queue order: the listing itself when their names gave that order, else with
/// the rest ordered by creation zxid, from their stats (children gone meanwhile left out).
pub(super) async fn in_queue_order(
    requests: &Requests<'_>,
    path: &str,
    listing: Arc<Listing>,
) -> std::result::Result<ZkResult<Arc<Listing>>, Stop> {
    if listing.in_name_order() {
        return Ok(Ok(listing));
    }
    let (ordered, rest) = listing.names.split_at(listing.ordered);
    let stats = match stat_children(requests, path, rest).await? {
        Ok(stats) => stats,
        Err(err) => return Ok(Err(err)),
    };
    let mut rest: Vec<(i64, &String)> =
        rest.iter().zip(stats).filter_map(|(name, stat)| stat.map(|stat| (stat.czxid, name))).collect();
    order::sort_by_zxid(&mut rest, |(czxid, _)| *czxid);
    let names: Vec<String> = ordered.iter().chain(rest.into_iter().map(|(_, name)| name)).cloned().collect();
    // The front keeps its order by name.
    let ordered = names.len();
    Ok(Ok(Arc::new(Listing::new(names, ordered, listing.keys[..listing.ordered].to_vec(), listing.path))))
}

/// The stat of each child, `None` for a child that is already gone: an exists request each, all
/// sent at once, in order on the session's connection. Not their data: any client that may make
/// children may put a megabyte in each (a multi-read has no read of a stat alone).
pub(super) async fn stat_children(
    requests: &Requests<'_>,
    path: &str,
    names: &[String],
) -> std::result::Result<ZkResult<Vec<Option<zk::Stat>>>, Stop> {
    let zk = requests.zk();
    // Retried together: a connection lost under them all is one loss, not one each.
    requests
        .retry(|| futures::future::try_join_all(names.iter().map(|name| zk.check_stat(&format!("{path}/{name}")))))
        .await
}

/// The most data of one child [`read_children`] reads: zklock's identity is a few hundred bytes
/// (a long label or identifier makes it more: 100,000 characters are shown whole), Curator's an
/// address, kazoo's an identifier. Another client may put up to the packet limit in each node.
const DATA_READ_MAX: usize = 128 * 1024;

/// The most data [`read_children`] reads in all, smallest first: [`DATA_READ_MAX`] bounds a
/// node's, not how many nodes another client makes.
const DATA_READ_TOTAL: usize = 16 * 1024 * 1024;

/// A child's stat, and its data if it was read.
pub(super) struct ChildRead {
    pub(super) stat: zk::Stat,
    /// `None`: not read (over the bounds, or not readable by this client).
    pub(super) data: Option<Vec<u8>>,
}

/// Each child's stat and its data where that is small (see [`data_to_read`]), `None` for a child
/// that is already gone. The stats first, then the data in multi-reads whose requests and
/// expected answers are each under the packet limit, one at a time. A node's data may grow
/// between its stat and its read: such an answer is bounded by the client's reply cap, and data
/// over the bounds is not kept.
pub(super) async fn read_children(
    requests: &Requests<'_>,
    path: &str,
    names: &[String],
) -> std::result::Result<ZkResult<Vec<Option<ChildRead>>>, Stop> {
    let stats = match stat_children(requests, path, names).await? {
        Ok(stats) => stats,
        Err(err) => return Ok(Err(err)),
    };
    let lens: Vec<Option<usize>> =
        stats.iter().map(|stat| stat.as_ref().map(|stat| usize::try_from(stat.data_length).unwrap_or(0))).collect();
    let wanted = data_to_read(&lens, DATA_READ_MAX, DATA_READ_TOTAL);
    let mut reads: Vec<Option<ChildRead>> = stats
        .into_iter()
        .map(|stat| stat.map(|stat| ChildRead { data: (stat.data_length == 0).then(Vec::new), stat }))
        .collect();
    let limit = requests.client.options.jute_maxbuffer as usize;
    let chroot = requests.client.chroot.len();
    let ops = wanted.iter().map(|&i| (chroot + path.len() + 1 + names[i].len(), lens[i].unwrap_or(0)));
    let mut kept = 0;
    for batch in validate::multi_read_batches(ops, limit) {
        let batch = &wanted[batch];
        let read = || {
            let mut reader = requests.zk().new_multi_reader();
            let added = batch.iter().try_for_each(|&i| reader.add_get_data(&format!("{path}/{}", names[i])));
            async move {
                added?;
                reader.commit().await
            }
        };
        let results = match requests.retry(read).await? {
            Ok(results) => results,
            Err(err) => return Ok(Err(err)),
        };
        for (&i, result) in batch.iter().zip(results) {
            match result {
                zk::MultiReadResult::Data { data, stat } => {
                    let fits = data.len() <= DATA_READ_MAX && kept + data.len() <= DATA_READ_TOTAL;
                    kept += if fits { data.len() } else { 0 };
                    reads[i] = Some(ChildRead { stat, data: fits.then_some(data) });
                }
                zk::MultiReadResult::Error { err: zk::Error::NoNode } => reads[i] = None,
                // Refused (its ACL): listed by its stat alone.
                _ => {}
            }
        }
    }
    Ok(Ok(reads))
}

/// Which children's data to read, given each one's data length (`None`: gone), in their order:
/// those with some data, at most `each`, the smallest first while their sum is within `total`.
fn data_to_read(lens: &[Option<usize>], each: usize, total: usize) -> Vec<usize> {
    let mut wanted: Vec<usize> =
        (0..lens.len()).filter(|&i| lens[i].is_some_and(|len| len > 0 && len <= each)).collect();
    wanted.sort_by_key(|&i| lens[i]);
    let mut sum = 0;
    let fit = wanted.iter().take_while(|&&i| {
        sum += lens[i].unwrap_or(0);
        sum <= total
    });
    let mut wanted: Vec<usize> = fit.copied().collect();
    wanted.sort_unstable();
    wanted
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

    /// The data read is bounded per child and in all, the smallest first, and none is read of
    /// children that are gone or have none.
    #[test]
    fn the_data_read_is_bounded_smallest_first() {
        let lens = [Some(300), None, Some(0), Some(1_000_000), Some(200), Some(100), Some(400)];
        assert_eq!(data_to_read(&lens, 1000, 10_000), vec![0, 4, 5, 6]);
        assert_eq!(data_to_read(&lens, 1000, 600), vec![0, 4, 5], "100 + 200 + 300 fit, then 400 does not");
        assert_eq!(data_to_read(&lens, 250, 10_000), vec![4, 5]);
        assert!(data_to_read(&lens, 1000, 50).is_empty());
        assert!(data_to_read(&[], 1000, 1000).is_empty());
    }
}
