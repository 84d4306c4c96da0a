//! The locks at and under a prefix, as a tool surveys them (`zklock ls`): every node listed once,
//! past the nodes this client may not list.

use tokio::time::Instant;
use zookeeper_client as zk;

use super::participants::is_lock_node;
use super::Recipe;
use crate::error::{Error, Result};
use crate::retry::Requests;

/// What [`crate::Client::readable_locks_under`] found.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LocksUnder {
    /// The locks found, in path order, as [`crate::Client::locks_under`] lists them.
    pub locks: Vec<String>,
    /// The nodes whose children ZooKeeper refused to list to this client (their ACL grants it
    /// no READ), in path order, each as its [`ErrorKind::PermissionDenied`](crate::ErrorKind::PermissionDenied) error naming the
    /// path: whatever is under them is not known.
    pub unreadable: Vec<Error>,
}

impl Recipe {
    /// The locks at and under this path (every node whose children include lock nodes of zklock,
    /// Curator or kazoo, one listing per node visited, `/zookeeper` and lock nodes not descended
    /// into), and the nodes that could not be listed for want of rights: anyone may set the ACL of
    /// the open containers zklock makes, so one such node must not hide the rest.
    pub(crate) async fn readable_locks_under(&self) -> Result<LocksUnder> {
        let session = &self.session_by(Instant::now() + super::TRY_BOUND, "listing the locks").await?;
        let (mut locks, mut unreadable) = (Vec::new(), Vec::new());
        let mut pending = vec![self.path.clone()];
        while let Some(path) = pending.pop() {
            // Each listing bounded as a try is (a walk of a large tree takes one per node).
            let requests = Requests::new(&self.client, session, Some(Instant::now() + super::TRY_BOUND))
                .answering_within(super::listing_bound(session));
            let listed = requests
                .retry(|| requests.zk().list_children(&path))
                .await
                .map_err(|stop| self.stopped(session, stop, || super::unreachable(&path, "listing the locks")))?;
            let names = match listed {
                Ok(names) => names,
                // Gone since its parent was listed.
                Err(zk::Error::NoNode) => continue,
                Err(zk::Error::NoAuth) => {
                    unreadable.push(Error::from_zk(zk::Error::NoAuth, &path, "listing the locks"));
                    continue;
                }
                Err(err) => return Err(Error::from_zk(err, &path, "listing the locks")),
            };
            // A semaphore's path is listed as one; its internal mutex and lease parent are its own.
            if names.iter().any(|name| name == crate::policy::SEMAPHORE_LEASES) {
                locks.push(path);
                continue;
            }
            let (lock_nodes, others): (Vec<String>, Vec<String>) =
                names.into_iter().partition(|name| is_lock_node(name));
            let parent = if path == "/" { "" } else { path.as_str() };
            pending.extend(
                others.into_iter().map(|name| format!("{parent}/{name}")).filter(|child| child != "/zookeeper"),
            );
            if !lock_nodes.is_empty() {
                locks.push(path);
            }
        }
        locks.sort();
        unreadable.sort_by(|a, b| a.path().cmp(&b.path()));
        Ok(LocksUnder { locks, unreadable })
    }
}
