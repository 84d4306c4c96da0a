//! The soak's census: a plain ZooKeeper client (not zklock) that lists the lock paths' children,
//! finds the holder of a path, deletes a node as an operator would, and looks for orphans. It
//! fails closed: a listing or a read it could not make is an error, never "no nodes", and a node
//! it cannot tell the client of is counted as zklock's (an orphan of unknown origin must fail the
//! soak, not pass as a peer's).

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{MUTEX_PATH, RW_PATH, SEMAPHORE_PATH};

/// An operator's listing or delete that takes longer (the ensemble is down or paused) is given up.
pub const OPERATOR_WAIT: Duration = Duration::from_secs(2);

/// The label of a node whose client cannot be told: not a peer, so its orphans count as zklock's.
pub const UNKNOWN_LANG: &str = "unknown";

/// A lock node seen by [`Census`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub czxid: i64,
    pub session: i64,
    /// `lang` from the JSON in the node's data (zklock's identity; the chaos contenders of
    /// Curator and kazoo write one too), else [`UNKNOWN_LANG`].
    pub lang: String,
}

/// The client that made a node, from its data: `lang` of its JSON, or [`UNKNOWN_LANG`].
pub fn node_lang(data: &[u8]) -> String {
    serde_json::from_slice::<Value>(data)
        .ok()
        .and_then(|v| v["lang"].as_str().map(String::from))
        .unwrap_or_else(|| UNKNOWN_LANG.to_string())
}

pub struct Census {
    runtime: tokio::runtime::Runtime,
    zk: zookeeper_client::Client,
}

impl Census {
    /// Connects, trying for up to 30 s.
    pub fn connect(connect: &str) -> Result<Census, String> {
        Census::connect_as(connect, None)
    }

    /// Connects, authenticated with SASL DIGEST-MD5 as `sasl` (user, password) if given (the
    /// soak's servers require it), trying for up to 30 s.
    pub fn connect_as(connect: &str, sasl: Option<(&str, &str)>) -> Result<Census, String> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| format!("runtime: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let zk = runtime.block_on(async {
            loop {
                let mut connector = zookeeper_client::Client::connector().with_session_timeout(Duration::from_secs(30));
                if let Some((user, password)) = sasl {
                    connector = connector
                        .with_sasl(zookeeper_client::SaslOptions::digest_md5(user.to_owned(), password.to_owned()));
                }
                match connector.connect(connect).await {
                    Ok(zk) => return Ok(zk),
                    Err(e) if Instant::now() < deadline => {
                        eprintln!("chaos: connecting to list the lock nodes: {e}; again");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => return Err(format!("cannot connect to list the lock nodes: {e}")),
                }
            }
        })?;
        Ok(Census { runtime, zk })
    }

    /// Every child of the lock paths; an error if a listing or a read failed (a node deleted
    /// between its listing and its read is gone, not an error).
    pub fn nodes(&self) -> Result<BTreeMap<String, Node>, String> {
        self.runtime.block_on(async {
            let mut nodes = BTreeMap::new();
            let (semaphore_mutex, leases) = (format!("{SEMAPHORE_PATH}/locks"), format!("{SEMAPHORE_PATH}/leases"));
            for path in [MUTEX_PATH, RW_PATH, &semaphore_mutex, &leases] {
                let children = match self.zk.list_children(path).await {
                    Ok(children) => children,
                    Err(zookeeper_client::Error::NoNode) => continue,
                    Err(e) => return Err(format!("listing {path}: {e}")),
                };
                for child in children {
                    let node = format!("{path}/{child}");
                    let (data, stat) = match self.zk.get_data(&node).await {
                        Ok(found) => found,
                        Err(zookeeper_client::Error::NoNode) => continue,
                        Err(e) => return Err(format!("reading {node}: {e}")),
                    };
                    nodes.insert(
                        node,
                        Node { czxid: stat.czxid, session: stat.ephemeral_owner, lang: node_lang(&data) },
                    );
                }
            }
            Ok(nodes)
        })
    }

    /// The node that holds `path` (its first child by sequence) and its creation zxid, which is
    /// its holder's fencing token. `None` if there is none, or the listing does not answer soon.
    pub fn holder_node(&self, path: &str) -> Option<(String, i64)> {
        self.runtime.block_on(async {
            let ask = async {
                let children = self
                    .zk
                    .list_children(path)
                    .await
                    .map_err(|e| eprintln!("chaos: operator: listing {path}: {e}"))
                    .ok()?;
                // Every recipe's node name ends with the server's 10-digit sequence.
                let first = children.iter().min_by_key(|c| c.get(c.len().saturating_sub(10)..).map(String::from))?;
                let node = format!("{path}/{first}");
                let (_, stat) = self
                    .zk
                    .get_data(&node)
                    .await
                    .map_err(|e| eprintln!("chaos: operator: reading {node}: {e}"))
                    .ok()?;
                Some((node, stat.czxid))
            };
            tokio::time::timeout(OPERATOR_WAIT, ask)
                .await
                .map_err(|_| eprintln!("chaos: operator: no answer from the ensemble in {OPERATOR_WAIT:?}"))
                .ok()
                .flatten()
        })
    }

    /// Deletes `node`, as an operator would: `Ok(false)` if it was gone already.
    pub fn delete(&self, node: &str) -> Result<bool, String> {
        self.runtime.block_on(async {
            match tokio::time::timeout(OPERATOR_WAIT, self.zk.delete(node, None)).await {
                Ok(Ok(())) => Ok(true),
                Ok(Err(zookeeper_client::Error::NoNode)) => Ok(false),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!("no answer in {OPERATOR_WAIT:?}")),
            }
        })
    }

    /// Nodes that exist now and still `window` later, while every contender runs on a healthy
    /// ensemble: no attempt lives that long (waits are at most 3 s, holds a fraction of a
    /// second, and a killed contender's session expires within the session timeout), so they
    /// are orphans: (lang, description) of each. An error if either look failed.
    pub fn orphans(&self, window: Duration) -> Result<Vec<(String, String)>, String> {
        let before = self.nodes()?;
        thread::sleep(window);
        let after = self.nodes()?;
        Ok(before
            .iter()
            .filter(|(name, node)| after.get(*name) == Some(node))
            .map(|(name, n)| (n.lang.clone(), format!("{name} ({}, session {:#x})", n.lang, n.session)))
            .collect())
    }

    /// Waits until no node is left under the lock paths (nodes of killed contenders go when their
    /// sessions expire), or until `deadline`; returns what is left, or an error if the last look
    /// could not be made.
    pub fn left(&self, deadline: Instant) -> Result<Vec<String>, String> {
        loop {
            let nodes = self.nodes();
            if nodes.as_ref().is_ok_and(BTreeMap::is_empty) || Instant::now() >= deadline {
                return nodes.map(|nodes| {
                    nodes.iter().map(|(name, n)| format!("{name} ({}, session {:#x})", n.lang, n.session)).collect()
                });
            }
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// The plain client, for tests that set the stage.
    pub fn zk(&self) -> &zookeeper_client::Client {
        &self.zk
    }

    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}
