//! An acquisition attempt's node: found again by its uuid after a connection loss, and removed on
//! every way out but success, in the background if need be.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::connection::ClientInner;
use crate::order;
use crate::retry::{Requests, Stop, ZkResult};
use crate::session::Session;

use super::listing::stat_children;

/// An attempt's node, once made: its sequence and creation zxid (its name is the attempt's).
#[derive(Clone, Copy)]
pub(super) struct Made {
    pub(super) sequence: i64,
    pub(super) czxid: i64,
}

/// A node of ours found by its uuid: its name, and what a create would have told.
pub(super) struct Found {
    pub(super) name: String,
    pub(super) made: Made,
}

/// An attempt's node name before the server's sequence: `_c_<uuid>-<marker>`.
pub(super) fn name_prefix(id: uuid::Uuid, marker: &str) -> NamePrefix<'_> {
    NamePrefix { id, marker }
}

/// [`name_prefix`]'s parts, written once into the node's path (see [`NodeName`]).
pub(super) struct NamePrefix<'a> {
    id: uuid::Uuid,
    marker: &'a str,
}

impl NamePrefix<'_> {
    fn len(&self) -> usize {
        "_c_".len() + uuid::fmt::Hyphenated::LENGTH + "-".len() + self.marker.len()
    }
}

impl std::fmt::Display for NamePrefix<'_> {
    fn fmt(&self, out: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(out, "_c_{}-{}", self.id.hyphenated(), self.marker)
    }
}

/// An attempt's node in one string, as every waiter keeps it through its wait: `<lock path>/`,
/// the name's prefix (`_c_<uuid>-<marker>`), and once the node is known, the server's sequence
/// after it. The lock path, the prefix, the name and the node's path are all slices of it.
pub(super) struct NodeName {
    path: String,
    name_at: usize,
    prefix_end: usize,
    known: bool,
}

impl NodeName {
    /// The sequential node `prefix` names under `lock_path`, not made yet. Sized once, with room
    /// for the sequence (ten digits, or a sign and ten).
    pub(super) fn new(lock_path: &str, prefix: NamePrefix<'_>) -> NodeName {
        use std::fmt::Write;
        let mut path = String::with_capacity(lock_path.len() + 1 + prefix.len() + 11);
        path.push_str(lock_path);
        path.push('/');
        let name_at = path.len();
        write!(path, "{prefix}").expect("a String takes any write");
        NodeName { prefix_end: path.len(), path, name_at, known: false }
    }

    /// A node whose name is whole before its create (no sequence), not made yet: found by its
    /// name as by a prefix.
    pub(super) fn whole(lock_path: &str, name: &str) -> NodeName {
        let path = format!("{lock_path}/{name}");
        NodeName { name_at: lock_path.len() + 1, prefix_end: path.len(), path, known: false }
    }

    /// A node known by its full path (a hold's).
    pub(super) fn known(node_path: &str) -> NodeName {
        let name_at = node_path.rfind('/').map_or(0, |slash| slash + 1);
        NodeName { path: node_path.to_owned(), name_at, prefix_end: node_path.len(), known: true }
    }

    /// `<lock path>/<prefix>`: what a sequential create is sent.
    pub(super) fn prefixed(&self) -> &str {
        &self.path[..self.prefix_end]
    }

    pub(super) fn lock_path(&self) -> &str {
        &self.path[..self.name_at.saturating_sub(1)]
    }

    pub(super) fn prefix(&self) -> &str {
        &self.path[self.name_at..self.prefix_end]
    }

    /// The node's full path, once known.
    pub(super) fn node(&self) -> Option<&str> {
        self.known.then_some(self.path.as_str())
    }

    /// The node's name, once known.
    pub(super) fn name(&self) -> Option<&str> {
        self.known.then(|| &self.path[self.name_at..])
    }

    /// The create made the node with `sequence` (as the client's `CreateSequence` shows it).
    pub(super) fn made(&mut self, sequence: impl std::fmt::Display) {
        use std::fmt::Write;
        self.path.truncate(self.prefix_end);
        write!(self.path, "{sequence}").expect("a String takes any write");
        self.known = true;
    }

    /// The node was found under `name` (which begins with the prefix).
    pub(super) fn found(&mut self, name: &str) {
        self.path.truncate(self.prefix_end);
        self.path.push_str(name.strip_prefix(self.prefix()).unwrap_or_default());
        self.known = true;
    }

    /// The node is gone, or its fate unknown.
    pub(super) fn forget(&mut self) {
        self.path.truncate(self.prefix_end);
        self.known = false;
    }

    /// The node's full path, taken (for its hold): the node is no longer the attempt's.
    pub(super) fn take_node(&mut self) -> Option<String> {
        let known = std::mem::take(&mut self.known);
        known.then(|| std::mem::take(&mut self.path))
    }
}

/// After a connection loss during a create: the node it made, if it went through, found by the
/// attempt's uuid and owned by this very session (Curator #1121: a mistake here would mean two
/// holders).
pub(super) async fn find_mine(
    requests: &Requests<'_>,
    path: &str,
    name_prefix: &str,
) -> std::result::Result<ZkResult<Option<Found>>, Stop> {
    let zk = requests.zk();
    let names = requests
        .retry(|| {
            // sync first, so a lagging server we reconnected to has seen our create; the listing
            // behind it in the session's order then shows the node if it exists.
            let sync = zk.sync(path);
            let listing = zk.list_children(path);
            async move {
                let _ = sync.await;
                listing.await
            }
        })
        .await?;
    let names = match names {
        Ok(names) => names,
        Err(zk::Error::NoNode) => return Ok(Ok(None)),
        Err(err) => return Ok(Err(err)),
    };
    let Some(name) = names.into_iter().find(|name| name.starts_with(name_prefix)) else { return Ok(Ok(None)) };
    let stat = stat_children(requests, path, std::slice::from_ref(&name)).await?;
    Ok(stat.map(|mut stats| match stats.pop().flatten() {
        Some(stat) if stat.ephemeral_owner == requests.session.id => {
            let sequence = order::suffix(&name).map(i64::from).unwrap_or(-1);
            Some(Found { name, made: Made { sequence, czxid: stat.czxid } })
        }
        _ => None,
    }))
}

/// Why a create made on the strength of a hold was refused; nothing was made either way.
pub(super) enum Refused {
    /// The node held by is gone: someone deleted it (its session is this one, still on).
    HoldGone,
    /// The create itself failed.
    Error(zk::Error),
}

/// Creates `node` on the strength of the hold on `held`, a node of this session whose name is
/// unique to its attempt: one multi, a check that `held` still exists and the create, together or
/// not at all. Sent alone, the create could land after someone deleted `held` and the next in
/// line got in on its going, before this client heard of it: a second holder (issue 42).
pub(super) fn create_while_held<'a>(
    zk: &'a zk::Client,
    held: &str,
    node: &str,
    data: &[u8],
    options: &zk::CreateOptions<'_>,
) -> impl std::future::Future<Output = ZkResult<Result<(String, zk::Stat), Refused>>> + Send + 'a {
    let mut multi = zk.new_multi_writer();
    let commit =
        multi.add_check_version(held, -1).and_then(|()| multi.add_create(node, data, options)).map(|()| multi.commit());
    async move {
        match commit?.await {
            Ok(mut results) => match results.pop() {
                Some(zk::MultiWriteResult::Create { path, stat }) => Ok(Ok((path, stat))),
                other => Err(zk::Error::UnexpectedError(format!("a checked create was answered with {other:?}"))),
            },
            Err(zk::MultiWriteError::RequestFailed { source }) => Err(source),
            Err(zk::MultiWriteError::OperationFailed {
                index: 0,
                source: zk::Error::NoNode | zk::Error::BadVersion,
            }) => Ok(Err(Refused::HoldGone)),
            Err(zk::MultiWriteError::OperationFailed { source, .. }) => Ok(Err(Refused::Error(source))),
        }
    }
}

/// An acquisition attempt's node. While armed, it is removed when the attempt gives up, or in
/// the background if the attempt's future is dropped.
pub(super) struct Attempt {
    pub(super) client: Arc<ClientInner>,
    pub(super) session: Arc<Session>,
    /// Its full path known once made; not while a create is in flight or its outcome unknown.
    pub(super) node: NodeName,
    pub(super) armed: bool,
}

impl Attempt {
    /// Starts removing the node, if armed: a task that retries until it is gone or the session is.
    fn start_removal(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        if !std::mem::take(&mut self.armed) {
            return None;
        }
        let node = std::mem::replace(&mut self.node, NodeName::known(""));
        let removal = remove_node(self.client.clone(), self.session.clone(), node);
        Some(self.client.runtime.spawn(removal))
    }

    /// Removes the node, waiting for the server's answer until `by` at most (see
    /// `Wait::give_back_by`), so a give-up returns in time even while disconnected; the removal
    /// itself is never abandoned.
    pub(super) async fn remove(&mut self, by: tokio::time::Instant) {
        if let Some(removal) = self.start_removal() {
            let _ = tokio::time::timeout_at(by, removal).await;
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.start_removal();
    }
}

/// Deletes a node of ours: a known one, or an attempt's node found by its uuid prefix (and owned
/// by this session) when the create's outcome is unknown. Retries across connection loss until
/// the node is gone, the session is over (the node goes with it) or the client is closed. A
/// server that keeps refusing (a request cut off eight times in a row) is asked again
/// after a pause, for as long as the session lives: giving up there would leave the node behind
/// a live session, holding the lock for no one.
pub(super) async fn remove_node(client: Arc<ClientInner>, session: Arc<Session>, mut node: NodeName) {
    let mut pause = REFUSED_PAUSE_MIN;
    loop {
        // A fresh count of losses each round.
        let requests = Requests::new(&client, &session, None);
        let outcome = match node.node() {
            Some(known) => requests.retry(|| session.zk.delete(known, None)).await.map(|_| ()),
            None => match find_mine(&requests, node.lock_path(), node.prefix()).await {
                Ok(Ok(Some(ours))) => {
                    node.found(&ours.name);
                    continue;
                }
                // None of ours, or an answer that settles it (the lock path gone, no rights).
                Ok(_) => Ok(()),
                Err(stop) => Err(stop),
            },
        };
        match outcome {
            Err(Stop::Refused) => {
                tokio::time::sleep(pause.min(session.timeout / 4)).await;
                pause = (pause * 2).min(REFUSED_PAUSE_MAX);
            }
            // Answered (deleted, already gone, or refused by an answer), or the session or the
            // client is over: the node is gone or goes with the session.
            _ => return,
        }
    }
}

/// The pauses between rounds of a background delete the server keeps refusing.
const REFUSED_PAUSE_MIN: Duration = Duration::from_millis(100);
const REFUSED_PAUSE_MAX: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::{name_prefix, NodeName};

    #[test]
    fn a_node_name_is_its_lock_path_prefix_and_sequence_in_one_string_sized_once() {
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        for marker in ["lock-", "__READ__", "__WRIT__", "lease-"] {
            let prefix = format!("_c_{id}-{marker}");
            // As the client's `CreateSequence` shows them.
            for sequence in ["0000000007", "2147483647", "-2147483648"] {
                let mut node = NodeName::new("/locks/a", name_prefix(id, marker));
                let capacity = node.path.capacity();
                assert_eq!(node.prefixed(), format!("/locks/a/{prefix}"));
                assert_eq!((node.lock_path(), node.prefix()), ("/locks/a", prefix.as_str()));
                assert_eq!((node.node(), node.name()), (None, None), "not made yet");
                node.made(sequence);
                let name = format!("{prefix}{sequence}");
                assert_eq!(node.name(), Some(name.as_str()));
                assert_eq!(node.node(), Some(format!("/locks/a/{name}").as_str()));
                assert_eq!(node.path.capacity(), capacity, "sized once");
                node.forget();
                assert_eq!((node.node(), node.prefixed()), (None, format!("/locks/a/{prefix}").as_str()));
                node.found(&name);
                assert_eq!(node.node(), Some(format!("/locks/a/{name}").as_str()));
                assert_eq!(node.take_node(), Some(format!("/locks/a/{name}")));
                assert_eq!(node.node(), None, "taken");
            }
        }
        let whole = NodeName::whole("/locks/a", "_c_x-__READ__0000000001");
        assert_eq!((whole.prefixed(), whole.prefix()), ("/locks/a/_c_x-__READ__0000000001", "_c_x-__READ__0000000001"));
        assert_eq!((whole.lock_path(), whole.node()), ("/locks/a", None));
        let held = NodeName::known("/locks/a/_c_x-lock-0000000001");
        assert_eq!((held.lock_path(), held.name()), ("/locks/a", Some("_c_x-lock-0000000001")));
    }
}
