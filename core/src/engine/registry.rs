//! A client's recipes ([`Registry`]): the engine's part of a client, above its connection. The
//! recipes of its lock handles by path, the nodes its holders released (for the handoff without a
//! listing), and the watcher of its holders' own nodes.

use std::sync::{Arc, Weak};

use super::{LockOptions, Recipe, ReleasedNodes};
use crate::connection::ClientInner;
use crate::error::Result;
use crate::hold::NodeWatcher;
use crate::mode::Mode;
use crate::owners::Owner;

/// The engine's part of a client: everything its recipes share beyond the connection.
pub(crate) struct Registry {
    pub(crate) client: Arc<ClientInner>,
    pub(crate) node_watcher: Arc<NodeWatcher>,
    /// The exclusive and write nodes this client's holders released, for the handoff without a
    /// listing (see `engine`).
    pub(crate) released: ReleasedNodes,
    /// The recipes of this client's lock handles, by path: handles for one path (of one kind,
    /// with the same options) share one recipe, and so their holds.
    recipes: parking_lot::Mutex<Vec<Weak<Recipe>>>,
}

impl Registry {
    /// The registry of a client just connected; starts its node watcher.
    pub(crate) fn new(client: Arc<ClientInner>) -> Arc<Registry> {
        let node_watcher = NodeWatcher::start(&client.runtime, client.closed.token.clone());
        Arc::new(Registry {
            client,
            node_watcher,
            released: ReleasedNodes::default(),
            recipes: parking_lot::Mutex::default(),
        })
    }

    /// The recipe for a handle on `path`: the one this client's other handles for it use, if
    /// any is alive (held locks keep theirs alive), else a new one.
    pub(crate) fn recipe(
        self: &Arc<Self>,
        path: String,
        read_write: bool,
        options: LockOptions,
    ) -> Result<Arc<Recipe>> {
        let mut recipes = self.recipes.lock();
        recipes.retain(|recipe| recipe.strong_count() > 0);
        if let Some(shared) = recipes
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .find(|recipe| recipe.serves(&path, read_write, &options))
        {
            return Ok(shared);
        }
        let recipe = Arc::new(Recipe::new(self.clone(), path, read_write, options)?);
        recipes.push(Arc::downgrade(&recipe));
        Ok(recipe)
    }

    /// Whether `owner` holds `recipe`'s path through another of this client's recipes of its kind
    /// (another identifier or ACL, or a separate handle: handles that agree share one recipe), in
    /// a way an acquisition in `mode` through `recipe` would queue behind. (A recipe of the other
    /// kind on the path is refused when its nodes are found.)
    pub(crate) fn holds_path_elsewhere(&self, recipe: &Recipe, owner: &Owner, mode: Mode) -> bool {
        let others: Vec<_> = self
            .recipes
            .lock()
            .iter()
            .filter_map(std::sync::Weak::upgrade)
            .filter(|other| {
                other.serial != recipe.serial && other.path == recipe.path && other.read_write == recipe.read_write
            })
            .collect();
        others.iter().any(|other| other.owners.holds_against(owner, mode))
    }

    /// The client is closing: every hold is lost now, so the recipes need not outlive their
    /// handles any more.
    pub(crate) fn unpin_all(&self) {
        for recipe in self.recipes.lock().drain(..).filter_map(|recipe| recipe.upgrade()) {
            recipe.unpin();
        }
    }
}
