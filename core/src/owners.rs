//! Who holds what, for reentrancy: one table per lock path handle (shared by the read and write
//! sides of a read/write lock), owner and mode to hold and count. Every binding counts re-entries
//! and nested releases here, synchronously, with no ZooKeeper traffic.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::error::{Error, ErrorKind, Result};
use crate::hold::Hold;
use crate::mode::Mode;

/// Who holds a lock, for reentrancy: an opaque id (a thread, an asyncio task, a Node async flow).
/// Acquisitions by the same owner nest; different owners on the same [`crate::Lock`] are separate
/// contenders in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    id: u64,
    label: Option<Arc<str>>,
}

/// The ids [`Owner::unique`] hands out: from 2^63 up, so they never meet ids a caller chose
/// below it.
const UNIQUE_BASE: u64 = 1 << 63;
static NEXT_UNIQUE: AtomicU64 = AtomicU64::new(UNIQUE_BASE + 1);

impl Owner {
    /// An owner with the given id; its label in the node data is the id.
    pub const fn new(id: u64) -> Owner {
        Owner { id, label: None }
    }

    /// An owner with the given id, labelled in the node data (e.g. `"thread:worker-3"`). A label
    /// over [`crate::MAX_LABEL_BYTES`] bytes is refused at acquire, before any traffic.
    pub fn with_label(id: u64, label: impl Into<Arc<str>>) -> Owner {
        Owner { id, label: Some(label.into()) }
    }

    /// A fresh owner, distinct from every other `Owner::unique()` in this process: its id is
    /// above 2^63, so ids chosen by callers below 2^63 never collide with it. Every binding makes
    /// its owners (threads, tasks) here.
    pub fn unique() -> Owner {
        Owner::new(NEXT_UNIQUE.fetch_add(1, Ordering::Relaxed))
    }

    /// A fresh owner as [`Owner::unique`], labelled; the label may name the id.
    pub fn unique_labelled(label: impl FnOnce(u64) -> String) -> Owner {
        let id = NEXT_UNIQUE.fetch_add(1, Ordering::Relaxed);
        Owner::with_label(id, label(id))
    }

    /// Whether `id` was handed out by [`Owner::unique`] in this process.
    pub fn is_unique_id(id: u64) -> bool {
        id > UNIQUE_BASE && id < NEXT_UNIQUE.load(Ordering::Relaxed)
    }

    /// The owner's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The label given, if any.
    pub(crate) fn given_label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    /// How messages and lock nodes name this owner: its label, or else its id.
    pub fn label(&self) -> String {
        self.label_display().to_string()
    }

    /// [`Owner::label`], to write without making a string.
    pub(crate) fn label_display(&self) -> impl std::fmt::Display + '_ {
        struct Label<'a>(&'a Owner);
        impl std::fmt::Display for Label<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match &self.0.label {
                    Some(label) => f.write_str(label),
                    None => write!(f, "{}", self.0.id),
                }
            }
        }
        Label(self)
    }
}

/// What the bindings need of an [`Owner`] beyond its public API. Hidden from the docs; in scope
/// with `use zklock::binding::*`.
#[doc(hidden)]
pub trait OwnerBinding {
    /// A fresh owner as [`Owner::unique`], given by its serial number: its id without the 2^63
    /// bit, so a binding can hold it as a plain number (Node holds it as a JavaScript number).
    fn unique_serial() -> i64;

    /// The id of the owner whose serial [`OwnerBinding::unique_serial`] gave.
    fn unique_id(serial: i64) -> u64;

    /// The owner whose serial [`OwnerBinding::unique_serial`] gave, labelled `label`.
    fn from_serial(serial: i64, label: impl Into<Arc<str>>) -> Owner;
}

impl OwnerBinding for Owner {
    fn unique_serial() -> i64 {
        (Owner::unique().id & !UNIQUE_BASE) as i64
    }

    fn unique_id(serial: i64) -> u64 {
        UNIQUE_BASE | serial as u64
    }

    fn from_serial(serial: i64, label: impl Into<Arc<str>>) -> Owner {
        Owner::with_label(Owner::unique_id(serial), label)
    }
}

/// An owner's hold in one mode.
struct Slot {
    owner: u64,
    mode: Mode,
    /// `None` while this owner's acquisition in this mode is in progress.
    held: Option<Held>,
}

struct Held {
    hold: Hold,
    levels: Levels,
}

/// Where a held slot counts its levels.
enum Levels {
    /// In `fast[i]`, where re-entries count without the mutex.
    Fast(usize),
    /// Here: every fast slot was taken.
    Here(u64),
}

/// What [`OwnerTable::enter`] decided.
pub(crate) enum Entered {
    /// The owner held already: counted up. The hold's id ([`Hold::id`]); a re-entry gives no
    /// new hold.
    Counted(u64),
    /// The write holder's read past the sequence limit: a new hold at its first level, on the
    /// write node (no sequence says the write node's place, so no read node can keep it).
    ReadOnWriteNode(Hold),
    /// The owner is marked as acquiring; it must contend, then [`OwnerTable::settle`] or
    /// [`OwnerTable::unclaim`].
    Claimed,
    /// The owner holds this write hold and asks for the read side: it is marked as acquiring,
    /// and makes its downgrade's read node (see `Recipe::downgrade`), then settles or unclaims.
    Downgrade(Hold),
}

/// Holds whose levels re-entries count without the mutex: most locks have one holder per
/// process, a read lock a few.
const FAST_SLOTS: usize = 4;

/// One held slot's levels, for re-entry without the mutex: the fast path reads atomics only,
/// never the hold, so it needs no reclamation scheme. It trusts the hold not lost while the
/// process's loss count ([`crate::session::losses`]) is what it was when the table last checked the
/// hold (`verified`); otherwise it goes the checked way, under the mutex.
///
/// It also trusts the session no longer than the deadline it had when last checked
/// (`trusted_until`, on the boot clock): a paused or starved holder's re-entry past it goes the
/// checked way, which reads it lost, even before anyone counted the loss.
///
/// `word` packs a generation (bumped when the slot is let go, so a re-entry that read an earlier
/// hold's slot fails its compare-and-swap), the mode and the levels; levels 0 means free. Only
/// the mutex's holder makes a slot live or free; the fast path moves levels between 1 and more.
/// Fields are written before `word` makes the slot live (Release) and read after it (Acquire).
#[derive(Default)]
struct Fast {
    word: AtomicU64,
    owner: AtomicU64,
    hold_id: AtomicU64,
    verified: AtomicU64,
    trusted_until: AtomicU64,
}

const LEVEL_BITS: u32 = 40;
const LEVEL_MASK: u64 = (1 << LEVEL_BITS) - 1;
const MODE_SHIFT: u32 = LEVEL_BITS;
const GEN_SHIFT: u32 = LEVEL_BITS + 2;
/// `verified` for a hold found lost: never the loss count.
const UNVERIFIED: u64 = u64::MAX;

fn mode_bits(mode: Mode) -> u64 {
    match mode {
        Mode::Exclusive => 0,
        Mode::Read => 1,
        Mode::Write => 2,
    }
}

fn levels_of(word: u64) -> u64 {
    word & LEVEL_MASK
}

impl Fast {
    /// The live word of `owner`'s slot in `mode`, if this is it and its hold was checked since
    /// the last loss.
    #[inline]
    fn live_word(&self, owner: u64, mode: Mode) -> Option<u64> {
        let word = self.word.load(Ordering::Acquire);
        if levels_of(word) == 0 || (word >> MODE_SHIFT) & 3 != mode_bits(mode) {
            return None;
        }
        // A slot let go and taken again after `word` was read fails the swap below: its
        // generation moved first (see `Fast`).
        let ours = self.owner.load(Ordering::Acquire) == owner
            && self.verified.load(Ordering::Acquire) == crate::session::losses()
            && zookeeper_client::boot_nanos() < self.trusted_until.load(Ordering::Acquire);
        ours.then_some(word)
    }

    #[inline]
    fn add(&self, word: u64, delta: i64) -> bool {
        let next = word.wrapping_add_signed(delta);
        self.word.compare_exchange(word, next, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

/// Few owners per lock, so a vector beats a map; the levels of the first holds live in `fast`.
#[derive(Default)]
pub(crate) struct OwnerTable {
    slots: Mutex<Vec<Slot>>,
    fast: [Fast; FAST_SLOTS],
}

impl OwnerTable {
    /// Counts up `owner`'s hold in `mode` without the mutex, if it has one in a fast slot,
    /// checked since the last loss: the reentrant fast path, one compare-and-swap. Returns the
    /// hold's id; `None` to go the checked way ([`OwnerTable::enter`]).
    #[inline]
    pub(crate) fn reenter_fast(&self, owner: &Owner, mode: Mode) -> Option<u64> {
        self.fast.iter().find_map(|fast| {
            let word = fast.live_word(owner.id, mode)?;
            (levels_of(word) < LEVEL_MASK - 1 && fast.add(word, 1)).then(|| fast.hold_id.load(Ordering::Acquire))
        })
    }

    /// Counts down one nested level (not the last) of `owner`'s hold in `mode` without the
    /// mutex, if it is in a fast slot, checked since the last loss: `false` to go the checked
    /// way.
    #[inline]
    pub(crate) fn release_nested_fast(&self, owner: &Owner, mode: Mode) -> bool {
        self.fast
            .iter()
            .any(|fast| fast.live_word(owner.id, mode).is_some_and(|word| levels_of(word) > 1 && fast.add(word, -1)))
    }

    /// Counts up `owner`'s hold in `mode` if it has one, or else claims the slot for an
    /// acquisition. Errors: a hold that was lost (LockLost), an acquisition already in progress
    /// for this owner (InvalidArgument), a reader asking for the write lock (Deadlock).
    pub(crate) fn enter(&self, owner: &Owner, mode: Mode, path: &str) -> Result<Entered> {
        let mut slots = self.slots.lock();
        match self.known(&mut slots, owner, mode, path) {
            Some(Known::Counted(id)) => return id.map(Entered::Counted),
            Some(Known::ReadOnWriteNode(hold)) => return Ok(Entered::ReadOnWriteNode(hold)),
            Some(Known::Downgrade(write)) => {
                slots.push(Slot { owner: owner.id, mode, held: None });
                return Ok(Entered::Downgrade(write));
            }
            None => {}
        }
        if slots.iter().any(|slot| slot.owner == owner.id && slot.held.is_none()) {
            drop(slots);
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("owner {} is already acquiring this lock; an owner acquires one at a time", owner.label()),
            )
            .with_path(path));
        }
        slots.push(Slot { owner: owner.id, mode, held: None });
        Ok(Entered::Claimed)
    }

    /// Counts up `owner`'s hold in `mode`, if it has one (or, for a read past the sequence
    /// limit, if it holds the write lock: a new hold on its write node); `None` if it holds
    /// nothing that lets it in without a request (a downgrade makes a node).
    pub(crate) fn reenter(&self, owner: &Owner, mode: Mode, path: &str) -> Option<Result<Entered>> {
        match self.known(&mut self.slots.lock(), owner, mode, path)? {
            Known::Counted(id) => Some(id.map(Entered::Counted)),
            Known::ReadOnWriteNode(hold) => Some(Ok(Entered::ReadOnWriteNode(hold))),
            Known::Downgrade(_) => None,
        }
    }

    fn known(&self, slots: &mut Vec<Slot>, owner: &Owner, mode: Mode, path: &str) -> Option<Known> {
        match slots.iter_mut().find(|s| s.owner == owner.id && s.mode == mode) {
            Some(slot) => self.count_up(slot.held.as_mut()?, owner, path).map(Known::Counted),
            None => self.cross_mode(slots, owner, mode, path),
        }
    }

    fn count_up(&self, held: &mut Held, owner: &Owner, path: &str) -> Option<Result<u64>> {
        let losses = crate::session::losses();
        if held.hold.inner.is_lost() {
            let reason = held.hold.lost_reason();
            let why = reason.map_or("it was lost", |r| r.describe());
            return Some(Err(Error::lost(
                reason,
                format!("owner {} cannot re-enter: {why}; release it", owner.label()),
            )
            .with_path(path)));
        }
        match held.levels {
            Levels::Here(ref mut levels) => *levels += 1,
            Levels::Fast(i) => {
                let fast = &self.fast[i];
                // Checked now: the fast path may trust it until the next loss, or its deadline.
                fast.trusted_until.store(held.hold.inner.trusted_until(), Ordering::Release);
                fast.verified.store(losses, Ordering::Release);
                // Under the mutex no slot is let go, and the fast path never takes levels to 0.
                if levels_of(fast.word.fetch_add(1, Ordering::AcqRel)) >= LEVEL_MASK - 1 {
                    fast.word.fetch_sub(1, Ordering::AcqRel);
                    return Some(Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("owner {} re-entered this lock 2^40 times without releasing", owner.label()),
                    )
                    .with_path(path)));
                }
            }
        }
        Some(Ok(held.hold.id()))
    }

    /// With no slot in `mode`: what the owner's holds in the other mode of a read/write lock mean.
    /// The write holder downgrades: a read node with its write node's sequence, which keeps its
    /// place in the queue (CURATOR-621); past the sequence limit no sequence says that place,
    /// so there it reads on its write node. A reader asking for the write lock would wait for
    /// itself forever.
    fn cross_mode(&self, slots: &mut Vec<Slot>, owner: &Owner, mode: Mode, path: &str) -> Option<Known> {
        let other = match mode {
            Mode::Read => Mode::Write,
            Mode::Write => Mode::Read,
            Mode::Exclusive => return None,
        };
        let held = slots.iter().find(|s| s.owner == owner.id && s.mode == other)?.held.as_ref()?;
        if mode == Mode::Write {
            return Some(Known::Counted(Err(Error::new(
                ErrorKind::Deadlock,
                format!(
                    "owner {} holds the read lock and asked for the write lock: it would wait for itself forever; \
                     release the read lock first (a write holder may take the read lock, not the reverse)",
                    owner.label()
                ),
            )
            .with_path(path))));
        }
        if held.hold.inner.is_lost() {
            return Some(Known::Counted(Err(write_lost(owner, path, held.hold.lost_reason()))));
        }
        let hold = held.hold.clone();
        if crate::order::good_sequence(hold.sequence()) {
            return Some(Known::Downgrade(hold));
        }
        let levels = self.first_level(owner.id, mode, &hold);
        slots.push(Slot { owner: owner.id, mode, held: Some(Held { hold: hold.clone(), levels }) });
        Some(Known::ReadOnWriteNode(hold))
    }

    /// A new hold's first level: in a free fast slot if there is one. Called with the mutex held.
    fn first_level(&self, owner: u64, mode: Mode, hold: &Hold) -> Levels {
        let Some(i) = self.fast.iter().position(|fast| levels_of(fast.word.load(Ordering::Acquire)) == 0) else {
            return Levels::Here(1);
        };
        let fast = &self.fast[i];
        let losses = crate::session::losses();
        let verified = if hold.inner.is_lost() { UNVERIFIED } else { losses };
        fast.owner.store(owner, Ordering::Release);
        fast.hold_id.store(hold.id(), Ordering::Release);
        fast.verified.store(verified, Ordering::Release);
        fast.trusted_until.store(hold.inner.trusted_until(), Ordering::Release);
        let generation = fast.word.load(Ordering::Acquire) >> GEN_SHIFT;
        fast.word.store((generation << GEN_SHIFT) | (mode_bits(mode) << MODE_SHIFT) | 1, Ordering::Release);
        Levels::Fast(i)
    }

    /// Counts down one level of `held`, under the mutex: the levels left.
    fn count_down_level(&self, held: &mut Held) -> u64 {
        match held.levels {
            Levels::Here(ref mut levels) => {
                *levels -= 1;
                *levels
            }
            Levels::Fast(i) => {
                let fast = &self.fast[i];
                loop {
                    let word = fast.word.load(Ordering::Acquire);
                    // The last level lets the slot go: a new generation, levels 0.
                    let next = match levels_of(word) {
                        1 => ((word >> GEN_SHIFT).wrapping_add(1)) << GEN_SHIFT,
                        _ => word - 1,
                    };
                    if fast.word.compare_exchange(word, next, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                        return levels_of(next);
                    }
                }
            }
        }
    }

    fn levels(&self, held: &Held) -> u64 {
        match held.levels {
            Levels::Here(levels) => levels,
            Levels::Fast(i) => levels_of(self.fast[i].word.load(Ordering::Acquire)),
        }
    }

    /// The claimed acquisition succeeded.
    pub(crate) fn settle(&self, owner: u64, mode: Mode, hold: &Hold) {
        let mut slots = self.slots.lock();
        if let Some(slot) = slots.iter_mut().find(|s| s.owner == owner && s.mode == mode) {
            slot.held = Some(Held { hold: hold.clone(), levels: self.first_level(owner, mode, hold) });
        }
    }

    /// The claimed acquisition ended without the lock.
    pub(crate) fn unclaim(&self, owner: u64, mode: Mode) {
        self.slots.lock().retain(|s| !(s.owner == owner && s.mode == mode && s.held.is_none()));
    }

    /// Counts down `owner`'s hold in `mode`. Returns the hold whose node to delete when the last
    /// level went and no other hold of the owner shares the node (past the sequence limit, a
    /// downgrade's read). A lost hold is counted down level by level like any other, each level
    /// but the last reporting the loss (the last is reported by the release of its node).
    #[inline]
    pub(crate) fn count_down(&self, owner: &Owner, mode: Mode, path: &str) -> Result<Option<Hold>> {
        if self.release_nested_fast(owner, mode) {
            return Ok(None);
        }
        self.count_down_checked(owner, mode, path)
    }

    /// [`OwnerTable::count_down`] under the mutex.
    fn count_down_checked(&self, owner: &Owner, mode: Mode, path: &str) -> Result<Option<Hold>> {
        let mut slots = self.slots.lock();
        let Some(i) = slots.iter().position(|s| s.owner == owner.id && s.mode == mode && s.held.is_some()) else {
            drop(slots);
            return Err(Error::new(
                ErrorKind::NotOwner,
                format!("owner {} does not hold this lock{}", owner.label(), mode_words(mode)),
            )
            .with_path(path));
        };
        let held = slots[i].held.as_mut().expect("position() checked it is held");
        if self.count_down_level(held) > 0 {
            return Self::nested_lost(held, owner, path).map(|()| None);
        }
        // `remove`, not `swap_remove`: the table keeps the order holds were asked for (see
        // `state_preferring`).
        let hold = slots.remove(i).held.expect("checked above").hold;
        let shared = slots.iter().any(|s| s.held.as_ref().is_some_and(|h| Arc::ptr_eq(&h.hold.inner, &hold.inner)));
        Ok(if shared && !hold.inner.is_lost() { None } else { Some(hold) })
    }

    /// Folds `owner`'s levels in `mode` into one, for a release of every level at once; returns
    /// how many there were.
    pub(crate) fn fold_levels(&self, owner: &Owner, mode: Mode, path: &str) -> Result<u64> {
        let mut slots = self.slots.lock();
        let held = slots.iter_mut().find(|s| s.owner == owner.id && s.mode == mode).and_then(|s| s.held.as_mut());
        let Some(held) = held else {
            drop(slots);
            return Err(Error::new(
                ErrorKind::NotOwner,
                format!("owner {} does not hold this lock{}", owner.label(), mode_words(mode)),
            )
            .with_path(path));
        };
        let levels = self.levels(held);
        for _ in 1..levels {
            self.count_down_level(held);
        }
        Ok(levels)
    }

    /// Adds `levels` to `owner`'s hold in `mode`, as that many re-entries would: `false` if it
    /// holds nothing there.
    pub(crate) fn add_levels(&self, owner: &Owner, mode: Mode, levels: u64) -> bool {
        let mut slots = self.slots.lock();
        match slots.iter_mut().find(|s| s.owner == owner.id && s.mode == mode).and_then(|s| s.held.as_mut()) {
            Some(Held { levels: Levels::Fast(i), .. }) => {
                self.fast[*i].word.fetch_add(levels, Ordering::AcqRel);
                true
            }
            Some(Held { levels: Levels::Here(count), .. }) => {
                *count += levels;
                true
            }
            None => false,
        }
    }

    /// Releases one nested level at once if `owner` holds more than one in `mode`, by the rule
    /// of [`OwnerTable::count_down`] (see [`crate::Lock::release_nested`]).
    #[inline]
    pub(crate) fn release_nested(&self, owner: &Owner, mode: Mode, path: &str) -> Option<Result<()>> {
        if self.release_nested_fast(owner, mode) {
            return Some(Ok(()));
        }
        self.release_nested_checked(owner, mode, path)
    }

    /// [`OwnerTable::release_nested`] under the mutex: a hold not in a fast slot, or not checked
    /// since the last loss.
    fn release_nested_checked(&self, owner: &Owner, mode: Mode, path: &str) -> Option<Result<()>> {
        let mut slots = self.slots.lock();
        let held = slots.iter_mut().find(|s| s.owner == owner.id && s.mode == mode)?.held.as_mut()?;
        if self.levels(held) < 2 {
            return None;
        }
        self.count_down_level(held);
        Some(Self::nested_lost(held, owner, path))
    }

    /// After a nested level of `held` was counted down: an error if the hold is lost.
    fn nested_lost(held: &Held, owner: &Owner, path: &str) -> Result<()> {
        // `is_lost` first: three atomic loads, where the reason reads the session's lease.
        if !held.hold.inner.is_lost() {
            return Ok(());
        }
        match held.hold.lost_reason() {
            None => Ok(()),
            Some(reason) => Err(Error::lost(
                Some(reason),
                format!("owner {}'s hold is lost: {}; release it", owner.label(), reason.describe()),
            )
            .with_path(path)),
        }
    }

    /// `owner`'s hold in `mode` and its count, if it holds one.
    pub(crate) fn hold_of(&self, owner: &Owner, mode: Mode) -> Option<(Hold, u64)> {
        let slots = self.slots.lock();
        let held = slots.iter().find(|s| s.owner == owner.id && s.mode == mode)?.held.as_ref()?;
        Some((held.hold.clone(), self.levels(held)))
    }

    /// Whether `owner` holds anything in this table (either side of a read/write lock).
    pub(crate) fn holds_any(&self, owner: &Owner) -> bool {
        self.slots.lock().iter().any(|s| s.owner == owner.id && s.held.is_some())
    }

    /// Whether `owner` holds here what an acquisition in `mode` of another table on the same
    /// path would queue behind: anything but a read, when that acquisition is a read too.
    pub(crate) fn holds_against(&self, owner: &Owner, mode: Mode) -> bool {
        self.slots
            .lock()
            .iter()
            .any(|s| s.owner == owner.id && s.held.is_some() && !(mode == Mode::Read && s.mode == Mode::Read))
    }

    /// The holds in `mode`, with their owners (lost holds included: they wait for a release).
    pub(crate) fn holds(&self, mode: Mode) -> Vec<(u64, Hold)> {
        let slots = self.slots.lock();
        slots.iter().filter(|s| s.mode == mode).filter_map(|s| Some((s.owner, s.held.as_ref()?.hold.clone()))).collect()
    }

    /// The owners holding in `mode`.
    pub(crate) fn holders(&self, mode: Mode) -> Vec<u64> {
        self.slots.lock().iter().filter(|s| s.mode == mode && s.held.is_some()).map(|s| s.owner).collect()
    }

    /// Whether any owner holds anything here (lost holds included: they wait for a release).
    pub(crate) fn holds_anything(&self) -> bool {
        self.slots.lock().iter().any(|s| s.held.is_some())
    }

    /// Whether some owner holds in `mode`, its hold `Held` (neither suspended nor lost).
    pub(crate) fn any_live(&self, mode: Mode) -> bool {
        self.slots
            .lock()
            .iter()
            .any(|s| s.mode == mode && s.held.as_ref().is_some_and(|h| h.hold.state() == crate::hold::HoldState::Held))
    }

    /// The state of `owner`'s hold in `mode` if it has one, or else that of the hold in `mode`
    /// asked for last.
    pub(crate) fn state_preferring(&self, owner: Option<&Owner>, mode: Mode) -> Option<crate::hold::HoldState> {
        let slots = self.slots.lock();
        let mut held = slots.iter().filter(|s| s.mode == mode).filter_map(|s| Some((s.owner, s.held.as_ref()?)));
        let preferred = owner.and_then(|owner| held.clone().find(|(id, _)| *id == owner.id));
        preferred.or_else(|| held.next_back()).map(|(_, h)| h.hold.state())
    }
}

/// What the owner table knows of an owner that asks for a mode.
enum Known {
    /// Counted up (or refused): the hold's id.
    Counted(Result<u64>),
    /// The write holder's first read past the sequence limit, on its write node.
    ReadOnWriteNode(Hold),
    /// The write holder asks for the read side.
    Downgrade(Hold),
}

/// The error for a downgrade under a lost write hold (lost because of `reason`, if known).
pub(crate) fn write_lost(owner: &Owner, path: &str, reason: Option<crate::error::LostReason>) -> Error {
    let why = reason.map_or(String::new(), |reason| format!(" ({})", reason.describe()));
    Error::lost(
        reason,
        format!("owner {}'s write hold is lost{why}, so it cannot read under it; release it", owner.label()),
    )
    .with_path(path)
}

/// " in read mode" and the like, for messages about one side of a read/write lock.
fn mode_words(mode: Mode) -> &'static str {
    match mode {
        Mode::Exclusive => "",
        Mode::Read => " for reading",
        Mode::Write => " for writing",
    }
}
