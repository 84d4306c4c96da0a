//! Who holds and who waits: every child of the lock path with the identity in its node.

use tokio::time::Instant;
use zookeeper_client as zk;

use super::listing::{read_children, ChildRead};
use super::{unreachable, Recipe};
use crate::error::Result;
use crate::lock::Participant;
use crate::mode::Mode;
use crate::order;
use crate::policy::PathRecipe;
use crate::retry::Requests;

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
