//! Who holds and who waits: `zkl_participants` lists, allocated here and freed by the caller.

use std::ffi::{c_char, CString};

use super::error::{zkl_result, Failure};
use super::lock::zkl_lock;
use super::semaphore::zkl_semaphore;
use super::{handles, runtime};
use crate::{Mode, Participant};

/// One contender in a lock's queue. Every pointer belongs to the zkl_participants list it came
/// in, and stays valid until that list is freed.
#[repr(C)]
#[derive(Debug)]
pub struct zkl_participant {
    /// The child node's name, e.g. `"_c_<uuid>-lock-0000000007"`.
    pub node: *const c_char,
    /// Whether the name has a sequence suffix (then in `sequence`).
    pub has_sequence: bool,
    /// The sequence suffix (past ZooKeeper's 32-bit limit it repeats or goes negative).
    pub sequence: i64,
    /// The node's creation zxid: its holder's fencing token (but for a downgrade's read node, whose
    /// holder goes on with its write hold's token).
    pub fencing_token: i64,
    /// The session that owns the (ephemeral) node.
    pub session_id: i64,
    /// Host name of the contending process, when a zklock client wrote the node; else NULL.
    pub host: *const c_char,
    /// Process id of the contending process (0 when `host` is NULL).
    pub pid: u32,
    /// The owner's label, e.g. "thread:worker#3" or "owner:42" (NULL when `host` is NULL).
    pub owner: *const c_char,
    /// The contender's language: "c", "rust", "python" or "node" (NULL when `host` is NULL).
    pub lang: *const c_char,
    /// The lock's identifier, if one was given (else NULL).
    pub identifier: *const c_char,
    /// The raw node data (Curator writes the client's IP address), `data_len` bytes.
    pub data: *const u8,
    /// How many bytes `data` has.
    pub data_len: usize,
    /// How it takes the lock, by its node's name: "exclusive" (zkl_lock_new), "read" or "write"
    /// (zkl_rwlock_new); NULL for a node of no lock zklock knows. A static string.
    pub mode: *const c_char,
}

/// The static C name of a mode: the core's `Mode::as_str`, which the unit test below holds it to.
fn mode_name(mode: Option<Mode>) -> *const c_char {
    match mode {
        Some(Mode::Exclusive) => cstr!("exclusive").as_ptr(),
        Some(Mode::Read) => cstr!("read").as_ptr(),
        Some(Mode::Write) => cstr!("write").as_ptr(),
        None => std::ptr::null(),
    }
}

/// A list of contenders, holders first, in queue order, from zkl_lock_contenders,
/// zkl_lock_holder or zkl_lock_holders. Free it with zkl_participants_free.
#[repr(C)]
#[derive(Debug)]
pub struct zkl_participants {
    /// How many entries `items` has (0 for an empty list, and then `items` is NULL).
    pub count: usize,
    /// The entries, `count` of them.
    pub items: *const zkl_participant,
}

/// The allocation behind a `zkl_participants *`: the public part first, so the pointer C gets is
/// also a pointer to this, plus the memory the items point into.
#[repr(C)]
struct ParticipantsBox {
    list: zkl_participants,
    items: Vec<zkl_participant>,
    strings: Vec<CString>,
    data: Vec<Vec<u8>>,
}

impl ParticipantsBox {
    fn string(&mut self, text: &str) -> *const c_char {
        // Node data written by others may hold a NUL: cut there rather than lose the field.
        let text = text.split('\0').next().unwrap_or_default();
        let text = CString::new(text).expect("cut at the first NUL");
        // The CString's heap buffer does not move when the CString is moved into the vector.
        let ptr = text.as_ptr();
        self.strings.push(text);
        ptr
    }

    fn allocate(participants: Vec<Participant>) -> *mut zkl_participants {
        let mut list = Box::new(ParticipantsBox {
            list: zkl_participants { count: 0, items: std::ptr::null() },
            items: Vec::with_capacity(participants.len()),
            strings: Vec::new(),
            data: Vec::new(),
        });
        for participant in participants {
            let node = list.string(&participant.node);
            let (host, pid, owner, lang, identifier) = match &participant.identity {
                Some(identity) => (
                    list.string(&identity.host),
                    identity.pid,
                    list.string(&identity.owner),
                    list.string(&identity.lang),
                    identity.identifier.as_deref().map_or(std::ptr::null(), |id| list.string(id)),
                ),
                None => (std::ptr::null(), 0, std::ptr::null(), std::ptr::null(), std::ptr::null()),
            };
            let data_len = participant.data.len();
            let data = participant.data.as_ptr();
            list.data.push(participant.data);
            list.items.push(zkl_participant {
                node,
                has_sequence: participant.sequence.is_some(),
                sequence: participant.sequence.unwrap_or(0),
                fencing_token: participant.fencing_token,
                session_id: participant.session_id,
                host,
                pid,
                owner,
                lang,
                identifier,
                data,
                data_len,
                mode: mode_name(participant.mode),
            });
        }
        // An empty Vec's pointer is dangling, not NULL: the header promises NULL.
        let items = if list.items.is_empty() { std::ptr::null() } else { list.items.as_ptr() };
        list.list = zkl_participants { count: list.items.len(), items };
        Box::into_raw(list).cast()
    }
}

/// Which participants a list names.
enum Listing {
    Contenders,
    Holder,
    Holders,
}

fn list(lock: *mut zkl_lock, out: *mut *mut zkl_participants, listing: Listing) -> Result<(), Failure> {
    non_null!(lock, "lock");
    non_null!(out, "out");
    let handle = handles::get(lock, "lock")?;
    let participants = match listing {
        Listing::Contenders => runtime::block_on(handle.lock.contenders())??,
        Listing::Holder => runtime::block_on(handle.lock.holder())??.into_iter().collect(),
        Listing::Holders => runtime::block_on(handle.lock.holders())??,
    };
    write_out!(out, ParticipantsBox::allocate(participants));
    Ok(())
}

/// Lists every contender of the lock, holders first, in queue order, with the identity each
/// zklock process recorded in its node and each one's mode: one listing and one read per node.
/// Either side of a read/write lock lists its readers and writers alike.
///
/// Ownership: on ZKL_OK, *out receives a new list that the caller owns and frees with
/// zkl_participants_free; on failure *out is left unchanged.
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT).
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed lock; ZKL_CLOSED,
/// ZKL_SESSION_EXPIRED, ZKL_CONNECTION_LOSS (no answer within 2 s: ZooKeeper could not be
/// reached), ZKL_ZOOKEEPER.
#[no_mangle]
pub extern "C" fn zkl_lock_contenders(lock: *mut zkl_lock, out: *mut *mut zkl_participants) -> zkl_result {
    ffi_result!("zkl_lock_contenders", { list(lock, out, Listing::Contenders) })
}

/// The current holder of the lock, as a list of one (or of none when nobody holds it); of a
/// read/write lock whose readers hold together, the first of them (zkl_lock_holders lists them
/// all). As zkl_lock_contenders otherwise.
#[no_mangle]
pub extern "C" fn zkl_lock_holder(lock: *mut zkl_lock, out: *mut *mut zkl_participants) -> zkl_result {
    ffi_result!("zkl_lock_holder", { list(lock, out, Listing::Holder) })
}

/// Every participant holding the lock now, in queue order: the readers of a read/write lock
/// that hold together (each with mode "read"), or the one holder of a mutex or of the write side
/// (none when nobody holds it). As zkl_lock_contenders otherwise.
#[no_mangle]
pub extern "C" fn zkl_lock_holders(lock: *mut zkl_lock, out: *mut *mut zkl_participants) -> zkl_result {
    ffi_result!("zkl_lock_holders", { list(lock, out, Listing::Holders) })
}

/// Frees a list from zkl_lock_contenders, zkl_lock_holder or zkl_lock_holders, with every
/// string in it.
///
/// Ownership: takes the list. Freeing NULL is a no-op. Must not be called twice with the same
/// list (it is memory, not a handle).
/// Concurrency: any thread, including inside callbacks.
#[no_mangle]
pub extern "C" fn zkl_participants_free(list: *mut zkl_participants) {
    ffi_value!((), {
        if !list.is_null() {
            // SAFETY: made by `ParticipantsBox::allocate` (its first field is the public list).
            drop(unsafe { Box::from_raw(list.cast::<ParticipantsBox>()) });
        }
    })
}

/// Who holds a semaphore's leases and who waits, from zkl_semaphore_participants; freed with
/// zkl_semaphore_listing_free. Every pointer in it stays valid until then.
#[repr(C)]
#[derive(Debug)]
pub struct zkl_semaphore_listing {
    /// The lease nodes in creation order: those held first, then the last waiting_leases, made by
    /// the acquirer at the head of queue, which waits until they fit. (Their mode is NULL: a lease
    /// is no lock node.)
    pub leases: *const zkl_participants,
    /// How many of leases, at the end, are not held yet.
    pub waiting_leases: usize,
    /// The acquirers at the semaphore's internal mutex (`<path>/locks`), in order: the first is
    /// making its lease nodes or waiting for them to fit, the others wait for their turn.
    pub queue: *const zkl_participants,
    /// The max when listed.
    pub max_leases: i64,
}

/// The allocation behind a `zkl_semaphore_listing *`: the public part first.
#[repr(C)]
struct SemaphoreParticipantsBox {
    public: zkl_semaphore_listing,
    leases: *mut zkl_participants,
    queue: *mut zkl_participants,
}

impl Drop for SemaphoreParticipantsBox {
    fn drop(&mut self) {
        zkl_participants_free(self.leases);
        zkl_participants_free(self.queue);
    }
}

/// Lists a semaphore's lease nodes (held first, then those of the acquirer waiting for room),
/// and the queue at its internal mutex, each with the identity a zklock process recorded in its
/// node (Curator writes the client's address: see zkl_participant.data), and the max: a
/// listing of each part and a read per node (and of the shared count).
///
/// Ownership: on ZKL_OK, *out receives a new list that the caller owns and frees with
/// zkl_semaphore_listing_free; on failure *out is left unchanged.
/// Concurrency: any thread; not from inside a zklock callback (ZKL_INVALID_ARGUMENT).
/// Errors: ZKL_INVALID_ARGUMENT for NULL arguments or a freed semaphore; ZKL_CLOSED,
/// ZKL_SESSION_EXPIRED, ZKL_CONNECTION_LOSS (no answer within 2 s: ZooKeeper could not be
/// reached), ZKL_ZOOKEEPER.
#[no_mangle]
pub extern "C" fn zkl_semaphore_participants(
    semaphore: *mut zkl_semaphore,
    out: *mut *mut zkl_semaphore_listing,
) -> zkl_result {
    ffi_result!("zkl_semaphore_participants", {
        non_null!(semaphore, "semaphore");
        non_null!(out, "out");
        let handle = handles::get(semaphore, "semaphore")?;
        let listed = runtime::block_on(handle.semaphore.participants())??;
        let leases = ParticipantsBox::allocate(listed.leases);
        let queue = ParticipantsBox::allocate(listed.queue);
        let public = zkl_semaphore_listing {
            leases,
            waiting_leases: listed.waiting_leases,
            queue,
            max_leases: listed.max_leases,
        };
        write_out!(out, Box::into_raw(Box::new(SemaphoreParticipantsBox { public, leases, queue })).cast());
        Ok(())
    })
}

/// Frees a list from zkl_semaphore_participants, with everything in it.
///
/// Ownership: takes the list. Freeing NULL is a no-op. Must not be called twice with the same
/// list (it is memory, not a handle).
/// Concurrency: any thread, including inside callbacks.
#[no_mangle]
pub extern "C" fn zkl_semaphore_listing_free(list: *mut zkl_semaphore_listing) {
    ffi_value!((), {
        if !list.is_null() {
            // SAFETY: made by `zkl_semaphore_participants` (its first field is the public part).
            drop(unsafe { Box::from_raw(list.cast::<SemaphoreParticipantsBox>()) });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names_are_the_core_words() {
        for mode in [Mode::Exclusive, Mode::Read, Mode::Write] {
            // SAFETY: a static NUL-terminated string.
            let name = unsafe { std::ffi::CStr::from_ptr(mode_name(Some(mode))) };
            assert_eq!(name.to_str().unwrap(), mode.as_str());
        }
        assert!(mode_name(None).is_null());
    }
}
