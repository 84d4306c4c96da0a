//! The exclusive and write nodes this client's holders released: a waiter that watched one of
//! them needs no listing to know nothing is ahead of it.

use std::sync::Arc;

use crate::mode::Mode;

/// The last nodes of exclusive and write holds that a client's holders released (full paths,
/// relative to the chroot). Such a node held, so when it held nothing was ahead of it, and
/// nothing can come ahead of it later: a waiter that watched it, and finds it gone, has nothing
/// ahead of it either. Bounded: an entry pushed out only costs its waiter a listing.
#[derive(Default)]
pub(crate) struct ReleasedNodes(parking_lot::Mutex<ReleasedRing>);

#[derive(Default)]
struct ReleasedRing {
    order: std::collections::VecDeque<Arc<str>>,
    set: std::collections::HashSet<Arc<str>>,
}

impl ReleasedNodes {
    const CAPACITY: usize = 1024;

    pub(super) fn remember(&self, node_path: &str) {
        let name = node_path.rsplit('/').next().unwrap_or_default();
        if !matches!(Mode::of_node(name), Some(Mode::Exclusive | Mode::Write)) {
            // A reader that held may have had other readers ahead of it: no proof of anything.
            return;
        }
        let mut ring = self.0.lock();
        let node: Arc<str> = node_path.into();
        if ring.set.insert(node.clone()) {
            ring.order.push_back(node);
        }
        while ring.order.len() > Self::CAPACITY {
            if let Some(old) = ring.order.pop_front() {
                ring.set.remove(&old);
            }
        }
    }

    pub(super) fn contains(&self, node_path: &str) -> bool {
        self.0.lock().set.contains(node_path)
    }
}
