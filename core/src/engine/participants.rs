//! Who holds and who waits: every child of the lock path with the identity in its node.

use tokio::time::Instant;
use zookeeper_client as zk;

use super::listing::{read_children, ChildRead};
use super::node_data::Identity;
use super::{unreachable, Recipe};
use crate::error::Result;
use crate::mode::Mode;
use crate::order;
use crate::policy::PathRecipe;
use crate::retry::Requests;

/// One contender in a lock's queue, from [`crate::Lock::contenders`] and [`crate::Lock::holder`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participant {
    /// The child node's name.
    pub node: String,
    /// The sequence suffix, if the name has one.
    pub sequence: Option<i64>,
    /// How it takes the lock, by its node's name; `None` for a node of no lock zklock knows.
    pub mode: Option<Mode>,
    /// The node's creation zxid, which is also its holder's fencing token (but for a downgrade's
    /// read node, whose holder goes on with its write hold's token).
    pub fencing_token: i64,
    /// The session that owns the (ephemeral) node.
    pub session_id: i64,
    /// When the node was made (the server's clock, milliseconds since the Unix epoch): when this
    /// participant queued.
    pub created_ms: i64,
    /// The identity in the node data, when it was written by zklock (and read: see `data`).
    pub identity: Option<Identity>,
    /// The raw node data (Curator writes the client's IP address), if it was read: only a node's
    /// data of at most 128 KiB is (any client that may queue may put a megabyte in each of its
    /// nodes), the smallest first while 16 MiB last for the whole listing, and only where the
    /// node's ACL lets this client read it. Empty otherwise: see [`Participant::data_was_read`].
    pub data: Vec<u8>,
    /// The size of the node's data, read or not.
    pub data_length: usize,
}

impl PathRecipe {
    /// What the participants listed at a path admit (as [`crate::Lock::contenders`] lists them,
    /// of either recipe): for a tool that has the listing already.
    pub fn of(participants: &[Participant]) -> PathRecipe {
        PathRecipe::of_names(participants.iter().map(|p| p.node.as_str()))
    }
}

impl Participant {
    /// Whether `data` is the node's data: not when it was too large to read, or not readable.
    pub fn data_was_read(&self) -> bool {
        self.data.len() == self.data_length
    }

    /// Whether a lock of `mode` may share the path with this participant's node: the mutex and
    /// the read/write lock never share a path (kazoo's `__lock__` node fits either; a node of no
    /// known lock fits both).
    pub fn fits_with(&self, mode: Mode) -> bool {
        mode.shares_path_with(&self.node)
    }

    /// Whether the node is kazoo's (its `Lock`, `WriteLock` or `ReadLock`), whose data is the
    /// contender's identifier.
    pub fn is_kazoos(&self) -> bool {
        Mode::is_kazoos(&self.node)
    }

    /// Whether the node says its parent is a semaphore's path (the node is its lease parent) or
    /// a semaphore's lease parent (the node is a lease): for tools that show what a path is.
    pub fn marks_a_semaphore(&self) -> bool {
        crate::policy::marks_a_semaphore(&self.node)
    }

    /// The positions of the participants in `queue` (in queue order, as [`crate::Lock::contenders`]
    /// gives it) that hold the lock, by each one's own mode's rule: to show the holders and the
    /// queue from one listing.
    pub fn holders_in(queue: &[Participant]) -> Vec<usize> {
        crate::policy::holders(queue, |p| p.mode, |p| p.sequence)
    }
}

impl Recipe {
    /// Every child of the path in queue order, with the identity in its node where that is small
    /// (see [`read_children`]). `read_write`: the lock is a read/write lock, so kazoo's `__lock__`
    /// nodes are writers (they are too when the path holds read/write nodes).
    ///
    /// Answered by `deadline` (a listing's is [`super::TRY_BOUND`] from its start), or
    /// [`crate::ErrorKind::ConnectionLoss`]: the server could not be reached.
    pub(crate) async fn participants(&self, read_write: bool, deadline: Instant) -> Result<Vec<Participant>> {
        let session = &self.session_by(deadline, "listing the contenders").await?;
        let requests =
            Requests::new(&self.client, session, Some(deadline)).answering_within(super::listing_bound(session));
        let stopped = |stop| self.stopped(session, stop, || unreachable(&self.path, "reading the contenders"));
        let mut names = self.children(&requests, "listing the contenders").await?;
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let ordered = order::sort_by_name(&mut names).ordered;
        let read_write =
            read_write || names.iter().any(|name| matches!(Mode::of_node(name), Some(Mode::Read | Mode::Write)));
        let reads = read_children(&requests, &self.path, &names)
            .await
            .map_err(stopped)?
            .map_err(|err| self.zk_error(err, "reading the contenders"))?;
        // Children gone since the listing are left out: count those in order that are kept.
        let mut kept_in_order = 0;
        let mut participants: Vec<Participant> = names
            .into_iter()
            .zip(reads)
            .enumerate()
            .filter_map(|(i, (node, read))| {
                let ChildRead { stat, data } = read?;
                kept_in_order += usize::from(i < ordered);
                let data = data.unwrap_or_default();
                Some(Participant {
                    sequence: order::suffix(&node).map(i64::from),
                    identity: serde_json::from_slice(&data).ok(),
                    mode: Mode::of_node_in(&node, read_write),
                    node,
                    fencing_token: stat.czxid,
                    session_id: stat.ephemeral_owner,
                    created_ms: stat.ctime,
                    data_length: usize::try_from(stat.data_length).unwrap_or(0),
                    data,
                })
            })
            .collect();
        order::sort_by_zxid(&mut participants[kept_in_order..], |p| p.fencing_token);
        Ok(participants)
    }

    /// The children of the path (none if it does not exist), `doing` what the errors say.
    async fn children(&self, requests: &Requests<'_>, doing: &str) -> Result<Vec<String>> {
        let listed = requests
            .retry(|| requests.zk().list_children(&self.path))
            .await
            .map_err(|stop| self.stopped(requests.session, stop, || unreachable(&self.path, doing)))?;
        match listed {
            Ok(names) => Ok(names),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(err) => Err(self.zk_error(err, doing)),
        }
    }

    /// Which recipe the children of the path belong to now (see [`PathRecipe`]): one listing.
    pub(crate) async fn path_recipe(&self) -> Result<PathRecipe> {
        let deadline = Instant::now() + super::TRY_BOUND;
        let session = &self.session_by(deadline, "listing the path's nodes").await?;
        let requests =
            Requests::new(&self.client, session, Some(deadline)).answering_within(super::listing_bound(session));
        let names = self.children(&requests, "listing the path's nodes").await?;
        Ok(PathRecipe::of_names(names.iter().map(String::as_str)))
    }

    /// The locks at and under this path: every node there whose children include lock nodes
    /// (zklock's, Curator's or kazoo's), in path order. One listing per node visited; lock nodes
    /// are not descended into (they have no children), nor is `/zookeeper`.
    pub(crate) async fn locks_under(&self) -> Result<Vec<String>> {
        // The survey's walk; here a node this client may not list is an error, the first in path
        // order.
        let found = self.readable_locks_under().await?;
        match found.unreadable.into_iter().next() {
            Some(err) => Err(err),
            None => Ok(found.locks),
        }
    }
}

/// A lock node's name: a marker, then the server's sequence (ten digits or more, past the
/// sequence limit a sign). A node such as `zklock-tests` only contains a marker.
pub(super) fn is_lock_node(name: &str) -> bool {
    Mode::find_marker(name).is_some_and(|(at, marker, _)| order::is_sequence_shaped(&name[at + marker.len()..]))
}
