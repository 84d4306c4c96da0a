//! An acquisition attempt's node: found again by its uuid after a connection loss, and removed on
//! every way out but success, in the background if need be.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client as zk;

use crate::client::ClientInner;
use crate::order;
use crate::retry::{Requests, Stop, ZkResult};
use crate::session::Session;

use super::listing::read_children;

/// An attempt's node, once made.
#[derive(Clone)]
pub(super) struct OurNode {
    pub(super) name: String,
    pub(super) sequence: i64,
    pub(super) czxid: i64,
}

/// An attempt's node name before the server's sequence: `_c_<uuid>-<marker>`. Sized once: every
/// acquisition makes its names, and `format!` would grow each string two or three times.
pub(super) fn name_prefix(id: uuid::Uuid, marker: &str) -> String {
    let mut prefix = String::with_capacity("_c_".len() + uuid::fmt::Hyphenated::LENGTH + "-".len() + marker.len());
    prefix.push_str("_c_");
    prefix.push_str(id.hyphenated().encode_lower(&mut uuid::Uuid::encode_buffer()));
    prefix.push('-');
    prefix.push_str(marker);
    prefix
}

/// The node's name the create gave: `prefix` and the sequence (ten digits, or a sign and ten).
pub(super) fn sequenced_name(prefix: &str, sequence: impl std::fmt::Display) -> String {
    use std::fmt::Write;
    let mut name = String::with_capacity(prefix.len() + 11);
    write!(name, "{prefix}{sequence}").expect("a String takes any write");
    name
}

/// After a connection loss during a create: the node it made, if it went through, found by the
/// attempt's uuid and owned by this very session (Curator #1121: a mistake here would mean two
/// holders).
pub(super) async fn find_mine(
    requests: &Requests<'_>,
    path: &str,
    name_prefix: &str,
) -> std::result::Result<ZkResult<Option<OurNode>>, Stop> {
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
    let read = read_children(requests, path, std::slice::from_ref(&name)).await?;
    Ok(read.map(|mut reads| match reads.pop().flatten() {
        Some((_, stat)) if stat.ephemeral_owner == requests.session.id => {
            let sequence = order::suffix(&name).map(i64::from).unwrap_or(-1);
            Some(OurNode { name, sequence, czxid: stat.czxid })
        }
        _ => None,
    }))
}

/// An acquisition attempt's node. While armed, it is removed when the attempt gives up, or in
/// the background if the attempt's future is dropped.
pub(super) struct Attempt {
    pub(super) client: Arc<ClientInner>,
    pub(super) session: Arc<Session>,
    pub(super) path: String,
    pub(super) name_prefix: String,
    /// Full path once known; `None` while a create is in flight or its outcome unknown.
    pub(super) node: Option<String>,
    pub(super) armed: bool,
}

/// How long an attempt that gave up waits for its node's removal before going on and leaving the
/// removal to the background: long enough for a round trip, and for a brief reconnection.
pub(super) const FOREGROUND_REMOVAL: Duration = Duration::from_secs(2);

impl Attempt {
    /// Starts removing the node, if armed: a task that retries until it is gone or the session is.
    fn start_removal(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        if !std::mem::take(&mut self.armed) {
            return None;
        }
        let removal = remove_node(
            self.client.clone(),
            self.session.clone(),
            std::mem::take(&mut self.path),
            std::mem::take(&mut self.name_prefix),
            self.node.take(),
        );
        Some(self.client.runtime.spawn(removal))
    }

    /// Removes the node, waiting a bounded time, so a give-up returns in time even while
    /// disconnected; the removal itself is never abandoned.
    pub(super) async fn remove(&mut self) {
        if let Some(removal) = self.start_removal() {
            let _ = tokio::time::timeout(FOREGROUND_REMOVAL.min(self.session.timeout), removal).await;
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
/// the node is gone, the session is over (the node goes with it) or the client is closed.
pub(super) async fn remove_node(
    client: Arc<ClientInner>,
    session: Arc<Session>,
    path: String,
    name_prefix: String,
    node: Option<String>,
) {
    let requests = Requests::new(&client, &session, None);
    let node = match node {
        Some(node) => node,
        None => match find_mine(&requests, &path, &name_prefix).await {
            Ok(Ok(Some(ours))) => format!("{path}/{}", ours.name),
            _ => return,
        },
    };
    let _ = requests.retry(|| session.zk.delete(&node, None)).await;
}

#[cfg(test)]
mod tests {
    use super::{name_prefix, sequenced_name};

    #[test]
    fn node_names_are_written_as_format_writes_them() {
        let id = uuid::Uuid::from_u128(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        for marker in ["lock-", "__READ__", "__WRIT__", "lease-"] {
            let prefix = name_prefix(id, marker);
            assert_eq!(prefix, format!("_c_{id}-{marker}"));
            assert_eq!(prefix.len(), prefix.capacity(), "sized once");
            // As the client's `CreateSequence` shows them.
            for sequence in ["0000000007", "2147483647", "-2147483648"] {
                let name = sequenced_name(&prefix, sequence);
                assert_eq!(name, format!("{prefix}{sequence}"));
                assert_eq!(name.capacity(), prefix.len() + 11, "sized once");
            }
        }
    }
}
