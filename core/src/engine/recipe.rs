//! The lock path as this process uses it ([`Recipe`]): made once per path, kind, identifier and
//! ACL, shared by the handles that agree on them, and kept while its owner table holds anything.
//! Its errors, its nodes' create options, and the check that a create fits in a request.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use zookeeper_client as zk;

use super::listing::SharedListing;
use super::options::{BeforeWatch, LockOptions};
use super::path::PathVersion;
use super::registry::Registry;
use crate::acl::Acl;
use crate::connection::ClientInner;
use crate::error::LostReason;
use crate::error::{Error, ErrorKind, Result};
use crate::hold::Hold;
use crate::lost_callbacks::LostCallbacks;
use crate::mode::Mode;
use crate::owners::{Owner, OwnerTable};
use crate::retry::{refused, Stop};
use crate::session::Session;
use crate::validate;

static ANYONE_ALL: [zk::Acl; 1] = [zk::Acl::new_const(zk::Permission::ALL, "world", "anyone")];

/// A lock path as this process uses it: the mutex, or both sides of a read/write lock, sharing
/// one owner table.
pub(crate) struct Recipe {
    pub(crate) client: Arc<ClientInner>,
    /// The client's recipes, this one among them unless it is a lookup's.
    pub(crate) registry: Arc<Registry>,
    pub(crate) path: String,
    pub(super) identifier: Option<String>,
    pub(super) before_watch: Option<BeforeWatch>,
    /// The lock's ACL and, unless open, its entries as sent.
    pub(super) acl: Acl,
    pub(super) zk_acl: Vec<zk::Acl>,
    /// The lock path (incarnation and ACL version) whose ACL was found to be the lock's: a
    /// protected lock decides only by listings of that path (see `check_path_acl`).
    pub(super) acl_checked: parking_lot::Mutex<Option<PathVersion>>,
    pub(crate) owners: OwnerTable,
    /// This recipe's number, distinct among the recipes of the process (see
    /// [`crate::Lock::owner_table_id`]).
    pub(crate) serial: u64,
    /// The lost callbacks of the holds in `owners` ([`crate::Lock::on_lost`]).
    pub(crate) lost: Arc<LostCallbacks>,
    /// Whether a create under the path has succeeded (and no NoNode said otherwise since). Until
    /// then an attempt keeps the client's send turn until its create is answered, so that
    /// attempts whose creates failed for want of the path send them again in their order.
    pub(super) path_known: AtomicBool,
    /// Whether a listing showed no node of another recipe under the path. Until then an attempt
    /// lists before it creates, so a conflict is told before any node is made.
    pub(super) kinds_checked: AtomicBool,
    /// Creates sent under the path, counted right after each is sent (in the client's send turn):
    /// an attempt's ticket is the count after its own.
    pub(super) creates_sent: AtomicU64,
    /// The last listing sent to decide by, shared by every attempt whose create it covers (see
    /// `listing_after`). Kept until the next replaces it: one listing per lock object.
    pub(super) shared_listing: parking_lot::Mutex<Option<SharedListing>>,
    /// A read/write lock (else a mutex): the kind the client's handles for the path share.
    pub(crate) read_write: bool,
    /// A handle of its own (`LockOptions::separate`): never shared.
    pub(super) separate: bool,
    /// For a protected semaphore's internal mutex and lease parent: the semaphore's path, made
    /// with the same ACL when it is missing (other lock paths' parents are open containers).
    pub(super) parent: std::sync::OnceLock<Arc<Recipe>>,
    /// This recipe itself while its owner table holds anything, so that the holds outlive the
    /// handles: a handle made later for the path finds them (see `Registry::recipe`). Taken
    /// at the last release, and when the client closes (by `Client::close`, or once the user's
    /// last handle of it is gone: see `UserHandles`); never set on a closed client. Set and taken
    /// only under its mutex, with the owner table read under it (see [`Recipe::settle`] and
    /// [`Recipe::count_down`]).
    pub(super) pin: parking_lot::Mutex<Option<Arc<Recipe>>>,
}

impl Drop for Recipe {
    /// Its path's entry in the client's index of recipes goes with the last recipe of the path.
    fn drop(&mut self) {
        self.registry.forget_recipe(&self.path);
    }
}

/// The next [`Recipe::serial`].
static NEXT_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Recipe {
    /// Refuses a path and identifier that could not fit in a request, whoever the owner.
    pub(crate) fn new(registry: Arc<Registry>, path: String, read_write: bool, options: LockOptions) -> Result<Recipe> {
        validate::identifier(options.identifier.as_deref()).map_err(|err| err.with_path(&path))?;
        let client = registry.client.clone();
        options.acl.check(&client.identities).map_err(|err| err.with_path(&path))?;
        let zk_acl = if options.acl.is_open() { Vec::new() } else { options.acl.to_zk() };
        let recipe = Recipe {
            client,
            registry,
            path,
            identifier: options.identifier,
            before_watch: options.before_watch,
            acl: options.acl,
            zk_acl,
            acl_checked: parking_lot::Mutex::new(None),
            owners: OwnerTable::default(),
            serial: NEXT_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            lost: Arc::default(),
            path_known: AtomicBool::new(false),
            kinds_checked: AtomicBool::new(false),
            creates_sent: AtomicU64::new(0),
            shared_listing: parking_lot::Mutex::new(None),
            read_write,
            separate: options.separate,
            parent: std::sync::OnceLock::new(),
            pin: parking_lot::Mutex::new(None),
        };
        recipe.check_fits(recipe.node_data_len(&Owner::with_label(0, "")), || "the identity".to_owned())?;
        Ok(recipe)
    }

    /// Whether a handle asked for with these options may share this recipe (and so its holds):
    /// the same path and kind, identifier and ACL (and neither separate nor a test seam).
    pub(crate) fn serves(&self, path: &str, read_write: bool, options: &LockOptions) -> bool {
        !self.separate
            && !options.separate
            && self.path == path
            && self.read_write == read_write
            && self.identifier == options.identifier
            && self.acl == options.acl
            && self.before_watch.is_none()
            && options.before_watch.is_none()
    }

    /// Makes `parent`, a protected semaphore's path, when this part of it (its mutex or lease
    /// parent) finds it missing. A recipe shared by two handles of the semaphore keeps the first:
    /// the two are the same path with the same ACL.
    pub(crate) fn protect_parent(&self, parent: &Arc<Recipe>) {
        let _ = self.parent.set(parent.clone());
    }

    /// The claimed acquisition succeeded: the owner holds `hold`, and this recipe is kept while
    /// it holds anything, so that the holds outlive the handles (unless the client is closed:
    /// its holds are lost, and nothing would take the pin again).
    pub(crate) fn settle(self: &Arc<Self>, owner: u64, mode: Mode, hold: &Hold) {
        {
            // The owner table is changed under the pin's mutex, so that a last release's check
            // (`count_down`) sees this hold, or else finds the pin taken before it is set here.
            let mut pin = self.pin.lock();
            self.owners.settle(owner, mode, hold);
            if pin.is_none() && !self.client.is_closed() {
                *pin = Some(self.clone());
            }
        }
        self.hold_taken(owner, mode, hold);
    }

    /// A new hold entered the owner table: the lost callbacks cover it.
    pub(crate) fn hold_taken(&self, owner: u64, mode: Mode, hold: &Hold) {
        self.lost.hold_taken(&self.client, owner, mode, hold);
    }

    /// Counts down a level of `owner`'s hold (see `OwnerTable::count_down`); once nothing is held
    /// any more, lets go of the pin (the caller holds another handle: that frees nothing here).
    /// Whether anything is held is read under the pin's mutex, under which a hold is settled: a
    /// hold settled meanwhile keeps the pin, or sets it again after.
    #[inline]
    pub(crate) fn count_down(&self, owner: &Owner, mode: Mode) -> Result<Option<Hold>> {
        let last = self.owners.count_down(owner, mode, &self.path)?;
        if last.is_some() {
            let unpinned = {
                let mut pin = self.pin.lock();
                if self.owners.holds_anything() {
                    None
                } else {
                    pin.take()
                }
            };
            drop(unpinned);
        }
        Ok(last)
    }

    /// Lets go of the pin whatever is held: the client is closed, so every hold is lost.
    pub(crate) fn unpin(&self) {
        let unpinned = self.pin.lock().take();
        drop(unpinned);
    }

    pub(crate) fn error(&self, kind: ErrorKind, message: impl Into<std::borrow::Cow<'static, str>>) -> Error {
        Error::new(kind, message).with_path(&self.path)
    }

    pub(super) fn zk_error(&self, err: zk::Error, doing: &str) -> Error {
        Error::from_zk(err, &self.path, doing)
    }

    pub(crate) fn closed_error(&self) -> Error {
        self.error(ErrorKind::Closed, "the client was closed")
    }

    pub(super) fn session_over_error(&self, session: &Session) -> Error {
        let reason = session.lost_reason().unwrap_or(LostReason::SessionExpired);
        self.error(ErrorKind::SessionExpired, format!("{}; a new attempt starts a new session", reason.describe()))
            .with_lost_reason(Some(reason))
    }

    /// Why a hold just made is none: its session ended, or the client closed, as the step's last
    /// answer came (a step checks the session only as it awaits, and a handoff may await nothing
    /// after its wait). `None`: it holds. A step never returns a hold that is lost already.
    pub(super) fn born_lost(&self, hold: &Hold) -> Option<Stop> {
        hold.inner.is_lost().then(|| if self.client.is_closed() { Stop::Closed } else { Stop::SessionOver })
    }

    /// The session for a call that does not wait (a listing), by `deadline` (see
    /// [`super::TRY_BOUND`]): the live one, or one established in time; else the server could not
    /// be reached, `doing` what the error says.
    pub(crate) async fn session_by(&self, deadline: tokio::time::Instant, doing: &str) -> Result<Arc<Session>> {
        match crate::retry::within(Some(deadline), None, self.client.session(&self.path)).await {
            Some(Ok(session)) => Ok(session),
            Some(Err(err)) if err.kind() == ErrorKind::Timeout => {
                Err(super::wait::unreachable_because(&self.path, doing, err.message()))
            }
            Some(Err(err)) => Err(err),
            None => Err(super::unreachable(&self.path, doing)),
        }
    }

    /// The error for a step stopped before its answer; `deadline` says what a passed deadline
    /// means to the caller.
    pub(super) fn stopped(&self, session: &Session, stop: Stop, deadline: impl FnOnce() -> Error) -> Error {
        match stop {
            Stop::Closed => self.closed_error(),
            Stop::SessionOver => self.session_over_error(session),
            Stop::Deadline => deadline(),
            Stop::Refused => self.error(ErrorKind::ConnectionLoss, refused(&self.client.options.language)),
        }
    }

    pub(super) fn protected(&self) -> bool {
        !self.acl.is_open()
    }

    /// How lock nodes are created (EPHEMERAL_SEQUENTIAL, or EPHEMERAL for a downgrade's read
    /// node), and their ACL.
    pub(super) fn node_options(&self, mode: zk::CreateMode) -> (zk::CreateOptions<'_>, &[zk::Acl]) {
        if self.protected() {
            (mode.with_acls(zk::Acls::new(&self.zk_acl)), &self.zk_acl)
        } else {
            (mode.with_acls(zk::Acls::anyone_all()), &ANYONE_ALL)
        }
    }

    pub(super) fn child_path(&self, name: &str) -> String {
        // Sized once (see `attempt::name_prefix`).
        let mut path = String::with_capacity(self.path.len() + 1 + name.len());
        path.push_str(&self.path);
        path.push('/');
        path.push_str(name);
        path
    }

    /// Refuses, before sending, an owner whose label is over [`validate::MAX_LABEL_BYTES`], or
    /// whose node would not fit the packet limit.
    pub(crate) fn check_owner(&self, owner: &Owner) -> Result<()> {
        validate::label(owner.given_label()).map_err(|err| err.with_path(&self.path))?;
        self.check_fits(self.node_data_len(owner), || format!("owner label of {} bytes", owner.label().len()))
    }

    /// Refuses, before sending, a create the server would refuse by dropping the connection.
    pub(crate) fn check_fits(&self, data_len: usize, what_else: impl FnOnce() -> String) -> Result<()> {
        // The node's full path on the server: chroot, lock path, `/_c_<uuid>-<marker><10 digits>`
        // with the longest marker.
        let marker_len = [Mode::Exclusive, Mode::Read, Mode::Write].map(|mode| mode.marker().len()).into_iter().max();
        let name_len = "/_c_".len() + 36 + "-".len() + marker_len.unwrap_or_default() + 10;
        let server_path_len = self.client.chroot.len() + self.path.len() + name_len;
        let len = validate::create_request_len(
            server_path_len,
            data_len,
            validate::acl_len(self.node_options(zk::CreateMode::EphemeralSequential).1),
        );
        validate::request_fits(len, self.client.options.jute_maxbuffer, &self.client.options.language, || {
            format!(
                "the lock path of {} bytes, identifier of {} bytes and {}",
                self.path.len(),
                self.identifier.as_ref().map_or(0, String::len),
                what_else()
            )
        })
        .map_err(|err| err.with_path(&self.path))
    }
}
