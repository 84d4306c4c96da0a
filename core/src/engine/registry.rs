//! A client's recipes ([`Registry`]): the engine's part of a client, above its connection. The
//! recipes of its lock handles by path, the nodes its holders released (for the handoff without a
//! listing), and the watcher of its holders' own nodes. And the user's reach into a client
//! ([`UserHandles`]), whose end closes it.

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
    /// with the same options) share one recipe, and so their holds. Indexed by path, so that
    /// making a handle and checking an acquisition look at that path's few recipes, not at every
    /// path's (issue 52: 10,000 locks on one client); a recipe removes its path's entry as it is
    /// dropped ([`Registry::forget_recipe`]), so nothing is kept for a path once its handles and
    /// holds are gone. No recipe is ever dropped under this mutex (see `forget_recipe`).
    recipes: parking_lot::Mutex<RecipesByPath>,
}

/// [`Registry::recipes`]: the live recipes of each path (and dead ones until their drop).
type RecipesByPath = std::collections::HashMap<String, Vec<Weak<Recipe>>>;

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
        // Declared before the guards, so dropped after them: a recipe upgraded here and not
        // shared may be the last of its handles, and its drop takes the mutex.
        let mut looked_at = Vec::new();
        let shared = |recipes: &RecipesByPath, looked_at: &mut Vec<_>| {
            for recipe in recipes.get(&path).into_iter().flatten().filter_map(Weak::upgrade) {
                if recipe.serves(&path, read_write, &options) {
                    return Some(recipe);
                }
                looked_at.push(recipe);
            }
            None
        };
        if let Some(shared) = shared(&self.recipes.lock(), &mut looked_at) {
            return Ok(shared);
        }
        // Made outside the mutex: one refused (too long to fit in a request) is dropped at once.
        let recipe = Arc::new(Recipe::new(self.clone(), path.clone(), read_write, options.clone())?);
        let mut recipes = self.recipes.lock();
        // Another handle's, made for the path meanwhile.
        if let Some(shared) = shared(&recipes, &mut looked_at) {
            drop(recipes);
            return Ok(shared); // ours is dropped after the guard
        }
        let of_path = recipes.entry(path.clone()).or_default();
        of_path.retain(|recipe| recipe.strong_count() > 0);
        of_path.push(Arc::downgrade(&recipe));
        Ok(recipe)
    }

    /// Forgets the dropped recipes of `path` (called as a recipe is dropped), and the path once it
    /// has none. Never called under [`Registry::recipes`]' mutex: nothing drops a recipe there.
    pub(crate) fn forget_recipe(&self, path: &str) {
        let mut recipes = self.recipes.lock();
        if let Some(of_path) = recipes.get_mut(path) {
            of_path.retain(|recipe| recipe.strong_count() > 0);
            if of_path.is_empty() {
                recipes.remove(path);
            }
        }
    }

    /// How many paths this client keeps a recipe for (see [`Registry::recipes`]).
    pub(crate) fn paths_kept(&self) -> usize {
        self.recipes.lock().len()
    }

    /// Whether `owner` holds `recipe`'s path through another of this client's recipes of its kind
    /// (another identifier or ACL, or a separate handle: handles that agree share one recipe), in
    /// a way an acquisition in `mode` through `recipe` would queue behind. (A recipe of the other
    /// kind on the path is refused when its nodes are found.)
    pub(crate) fn holds_path_elsewhere(&self, recipe: &Recipe, owner: &Owner, mode: Mode) -> bool {
        // Upgraded under the mutex, looked at and dropped after it (a drop takes the mutex).
        let same_path: Vec<_> = self
            .recipes
            .lock()
            .get(&recipe.path)
            .map(|of_path| of_path.iter().filter_map(Weak::upgrade).collect())
            .unwrap_or_default();
        same_path.iter().any(|other| {
            other.serial != recipe.serial
                && other.read_write == recipe.read_write
                && other.owners.holds_against(owner, mode)
        })
    }

    /// Closes the client at once, as `Client::close` begins to: everything waiting on it stops,
    /// every hold is lost, and the recipes let go of their pins. The session is ended by
    /// `ClientInner::end_session`, which the caller awaits or spawns.
    pub(crate) fn close(&self) {
        self.client.closed.close();
        // Every hold is lost now: the recipes need not outlive their handles any more.
        self.unpin_all();
    }

    /// The client is closing: every hold is lost now, so the recipes need not outlive their
    /// handles any more.
    pub(crate) fn unpin_all(&self) {
        // Taken out first: unpinning may drop a recipe, whose drop takes the mutex.
        let recipes = std::mem::take(&mut *self.recipes.lock());
        for recipe in recipes.into_values().flatten().filter_map(|recipe| recipe.upgrade()) {
            recipe.unpin();
        }
    }
}

/// The user's reach into a client: one per client, shared (as an `Arc`) by every public handle
/// made from it, and by nothing internal. The public `Client` and its clones hold it, and so does
/// every recipe face (each `Lock`, and through them each `ReadWriteLock`, `Semaphore`,
/// `MultiLock`, `LockGuard` and `MultiGuard`) and each semaphore `Lease`; the recipes, their
/// pins, the background releases and the lost callbacks do not (they hold the registry or the
/// connection).
///
/// A held recipe pins itself (see `Recipe::pin`), and with it the registry and the connection, so
/// that a hold outlives its handles: a handle made later from the client finds it. Once the last
/// `UserHandles` goes, no handle can be made, no hold can be reached or released, and no client
/// is left to close: its drop closes the client, as `Client::close` does, in the background, so
/// that the session ends and the server deletes its lock nodes at once (rather than when the
/// process exits), and the pins go with it.
pub(crate) struct UserHandles {
    pub(crate) registry: Arc<Registry>,
}

impl UserHandles {
    /// The reach into a client just connected.
    pub(crate) fn new(registry: Arc<Registry>) -> Arc<UserHandles> {
        Arc::new(UserHandles { registry })
    }
}

impl Drop for UserHandles {
    fn drop(&mut self) {
        self.registry.close();
        let client = self.registry.client.clone();
        // Not run if the runtime is shutting down or gone: the session is then left to expire on
        // the server (the connection's own drop only wakes what waits on it).
        drop(self.registry.client.runtime.spawn(async move { client.end_session().await }));
    }
}
