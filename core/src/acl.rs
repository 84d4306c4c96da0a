//! Access control on lock nodes: who may join a lock's queue, delete in it, and read it.
//!
//! ZooKeeper checks the rights to create and to delete a node on its parent, so it is the lock
//! path's own ACL that keeps others from queueing (CREATE) or from deleting a holder's node
//! (DELETE); the lock nodes carry the same ACL, which decides who may read them.

use std::fmt;

use zookeeper_client as zk;

use crate::error::printable;
use crate::error::{Error, Result};
use crate::validate;

/// ZooKeeper permissions, combined with `|`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Perms(u32);

impl Perms {
    /// Get a node's data and list its children.
    pub const READ: Perms = Perms(1);
    /// Set a node's data.
    pub const WRITE: Perms = Perms(2);
    /// Create children: join a lock's queue.
    pub const CREATE: Perms = Perms(4);
    /// Delete children: release, or take away a holder's node.
    pub const DELETE: Perms = Perms(8);
    /// Set the node's ACL.
    pub const ADMIN: Perms = Perms(16);
    /// All of the above.
    pub const ALL: Perms = Perms(31);

    /// The permissions of ZooKeeper's bit mask (READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16);
    /// `None` if it has other bits.
    pub const fn from_bits(bits: u32) -> Option<Perms> {
        if bits & !Perms::ALL.0 == 0 {
            Some(Perms(bits))
        } else {
            None
        }
    }

    /// ZooKeeper's bit mask.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// Whether every permission of `other` is in `self`.
    pub const fn contains(self, other: Perms) -> bool {
        self.0 & other.0 == other.0
    }

    fn to_zk(self) -> zk::Permission {
        ZK_PERMISSIONS
            .into_iter()
            .filter(|(ours, _)| self.contains(*ours))
            .fold(zk::Permission::NONE, |all, (_, theirs)| all | theirs)
    }

    fn of_zk(permission: zk::Permission) -> Perms {
        ZK_PERMISSIONS
            .into_iter()
            .filter(|(_, theirs)| permission.has(*theirs))
            .fold(Perms(0), |all, (ours, _)| all | ours)
    }
}

/// Each of our permissions beside the client crate's.
const ZK_PERMISSIONS: [(Perms, zk::Permission); 5] = [
    (Perms::READ, zk::Permission::READ),
    (Perms::WRITE, zk::Permission::WRITE),
    (Perms::CREATE, zk::Permission::CREATE),
    (Perms::DELETE, zk::Permission::DELETE),
    (Perms::ADMIN, zk::Permission::ADMIN),
];

impl std::ops::BitOr for Perms {
    type Output = Perms;

    fn bitor(self, other: Perms) -> Perms {
        Perms(self.0 | other.0)
    }
}

impl fmt::Display for Perms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == Perms::ALL {
            return f.write_str("ALL");
        }
        let names = [(Perms::READ, "READ"), (Perms::WRITE, "WRITE"), (Perms::CREATE, "CREATE")]
            .into_iter()
            .chain([(Perms::DELETE, "DELETE"), (Perms::ADMIN, "ADMIN")])
            .filter(|(perm, _)| self.contains(*perm))
            .map(|(_, name)| name)
            .collect::<Vec<_>>();
        if names.is_empty() {
            f.write_str("NONE")
        } else {
            f.write_str(&names.join("|"))
        }
    }
}

/// One entry of an ACL: `perms` for the identity `id` of the auth `scheme`, as ZooKeeper has
/// them (`world:anyone`, `digest:user:base64(sha1("user:password"))`, `ip:10.0.0.0/8`, or
/// `auth:` for whoever created the node).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AclEntry {
    /// What the identity may do.
    pub perms: Perms,
    /// The auth scheme: `world`, `auth`, `digest`, `ip`, ...
    pub scheme: String,
    /// The identity within the scheme.
    pub id: String,
}

impl AclEntry {
    /// An entry of any scheme.
    pub fn new(perms: Perms, scheme: impl Into<String>, id: impl Into<String>) -> AclEntry {
        AclEntry { perms, scheme: scheme.into(), id: id.into() }
    }

    /// `perms` for everyone (`world:anyone`).
    pub fn anyone(perms: Perms) -> AclEntry {
        AclEntry::new(perms, "world", "anyone")
    }

    /// `perms` for the node's creator, that is for every identity its client authenticated
    /// with (`auth:`, which the server stores as the creator's digest, SASL and x509 identities).
    pub fn creator(perms: Perms) -> AclEntry {
        AclEntry::new(perms, "auth", "")
    }

    /// `perms` for a SASL identity (`sasl:<identity>`): a DIGEST-MD5 user, or a Kerberos
    /// principal as the servers give it (see [`crate::SaslOptions::identity`]).
    pub fn sasl(perms: Perms, identity: &str) -> AclEntry {
        AclEntry::new(perms, "sasl", identity)
    }

    /// `perms` for the user of digest credentials `"user:password"`, as the server stores it:
    /// `digest:user:base64(sha1("user:password"))`.
    pub fn digest(perms: Perms, credentials: &str) -> Result<AclEntry> {
        if !credentials.contains(':') {
            return Err(Error::invalid("digest credentials must be \"user:password\""));
        }
        Ok(AclEntry::new(perms, "digest", digest_id(credentials)))
    }

    fn to_zk(&self) -> zk::Acl {
        zk::Acl::new(self.perms.to_zk(), zk::AuthId::new(&self.scheme, &self.id))
    }
}

/// `scheme:id PERMS`, for messages: a digest id as its user alone (its hash is an unsalted SHA-1
/// of `user:password`, open to an offline guess), and control characters escaped (the server
/// takes any in an id: a message must not colour or ring the terminal it is read on).
impl fmt::Display for AclEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let id = match self.scheme.as_str() {
            "digest" => digest_user(&self.id),
            _ => &self.id,
        };
        write!(f, "{}:{} {}", printable(&self.scheme), printable(id), self.perms)
    }
}

/// Who may do what with a lock's nodes: the ACL given to the lock path (when zklock creates
/// it) and to every lock node, set in [`crate::LockOptions::acl`].
///
/// A lock with any ACL but [`Acl::Open`] is protected: its lock path is created as a
/// persistent node (not a container the server would delete when empty, letting anyone make it
/// again, open), and before the lock queues under an existing lock path it checks that path's
/// ACL, refusing with [`crate::ErrorKind::PermissionDenied`] one that grants more than asked.
/// The parents zklock creates above the lock path stay open containers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Acl {
    /// Anyone may do anything (`world:anyone` ALL), as before ACLs existed: any client can
    /// delete a holder's node, and so take the lock.
    #[default]
    Open,
    /// Full rights for the authenticated creator, read for everyone: others can list the queue
    /// and read who holds, but neither queue nor delete. Needs digest auth, SASL or a TLS
    /// client certificate on the client (the creator is each of its identities: `digest:`,
    /// `sasl:`, `x509:`).
    CreatorAllWorldRead,
    /// Full rights for the authenticated creator and nothing for anyone else (others cannot
    /// even list the queue). Needs digest auth, SASL or a TLS client certificate on the client.
    CreatorAll,
    /// These entries, as given. The contenders need READ, CREATE and DELETE.
    Custom(Vec<AclEntry>),
}

impl Acl {
    /// Whether this is [`Acl::Open`], the unprotected default.
    pub fn is_open(&self) -> bool {
        *self == Acl::Open
    }

    /// The entries as they are sent (with `auth:` for the creator).
    pub fn entries(&self) -> Vec<AclEntry> {
        match self {
            Acl::Open => vec![AclEntry::anyone(Perms::ALL)],
            Acl::CreatorAllWorldRead => vec![AclEntry::creator(Perms::ALL), AclEntry::anyone(Perms::READ)],
            Acl::CreatorAll => vec![AclEntry::creator(Perms::ALL)],
            Acl::Custom(entries) => entries.clone(),
        }
    }

    /// Refuses, before any network traffic, an ACL the server would refuse or that would shut
    /// out this very client, known to the servers as `identities`.
    pub(crate) fn check(&self, identities: &Identities) -> Result<()> {
        let entries = self.entries();
        if entries.is_empty() {
            return Err(Error::invalid("the lock's ACL is empty: it needs at least one entry"));
        }
        validate::acl_size(entries.len(), entries.iter().map(|entry| entry.scheme.len().max(entry.id.len())))?;
        for entry in &entries {
            let refuse = |why: &str| Err(Error::invalid(format!("the lock's ACL entry {entry} {why}")));
            if entry.perms.bits() == 0 {
                return refuse("grants no permission");
            }
            match entry.scheme.as_str() {
                "" => return refuse("has no scheme"),
                "world" if entry.id != "anyone" => return refuse("is not valid: the world scheme's only id is anyone"),
                "digest" if !entry.id.contains(':') => {
                    return refuse("is not valid: a digest id is \"user:base64(sha1(\\\"user:password\\\"))\"")
                }
                "auth" if identities.is_empty() => {
                    let which = match self {
                        Acl::Custom(_) => "an auth entry".to_owned(),
                        preset => format!("{preset}"),
                    };
                    return Err(Error::invalid(format!(
                        "the lock's ACL ({which}) gives rights to the authenticated creator, but this client has no \
                         credentials: connect with digest auth (\"user:password\"), SASL or a TLS client \
                         certificate, or use an open or custom ACL"
                    )));
                }
                _ => {}
            }
            if entry.scheme.contains('\0') || entry.id.contains('\0') {
                return refuse("contains a NUL character");
            }
        }
        // Only entries of schemes this client's identities are known in can be matched here;
        // with others (ip; x509 before the server named it) the server decides.
        if entries.iter().all(|entry| identities.decides(&entry.scheme)) {
            // An `auth` entry is the creator's, this client's, whichever identities it has.
            let creator = entries.iter().filter(|entry| entry.scheme == "auth").fold(Perms(0), |p, e| p | e.perms);
            let mine = own_perms(&self.expected(identities), identities) | creator;
            let needed = Perms::READ | Perms::CREATE | Perms::DELETE;
            if !mine.contains(needed) {
                return Err(Error::invalid(format!(
                    "the lock's ACL ({self}) gives this client {mine}: a contender needs READ, CREATE and DELETE to \
                     queue, see the queue and release"
                )));
            }
        }
        Ok(())
    }

    /// The entries as the server stores them for a node this client creates: `auth:` becomes
    /// each of the client's identities.
    fn expected(&self, identities: &Identities) -> Vec<AclEntry> {
        self.entries()
            .into_iter()
            .flat_map(|entry| match entry.scheme.as_str() {
                "auth" => identities.entries(entry.perms),
                _ => vec![entry],
            })
            .collect()
    }

    /// The entries of an existing node's ACL (as the server reports them) that grant more than
    /// this ACL would, made by this client: the rights it would give that this one does not.
    pub(crate) fn excess(&self, actual: &[zk::Acl], identities: &Identities) -> Vec<AclEntry> {
        let expected = self.expected(identities);
        let anyone =
            expected.iter().filter(|e| e.scheme == "world" && e.id == "anyone").fold(Perms(0), |p, e| p | e.perms);
        let actual = reported(actual);
        actual
            .iter()
            .filter(|entry| {
                let granted = expected
                    .iter()
                    .filter(|e| e.scheme == entry.scheme && identities.same_id(&entry.scheme, &entry.id, &e.id))
                    .fold(anyone, |p, e| p | e.perms);
                !granted.contains(entry.perms)
            })
            .cloned()
            .collect()
    }

    /// `excess` (from [`Acl::excess`]) for a message: a digest entry of a user this ACL names,
    /// with another hash, is said to be another password's (the hashes are not shown).
    pub(crate) fn describe_excess(&self, excess: &[AclEntry], identities: &Identities) -> String {
        let expected = self.expected(identities);
        let entries: Vec<String> = excess
            .iter()
            .map(|entry| {
                let posing = entry.scheme == "digest"
                    && expected.iter().any(|e| {
                        e.scheme == "digest" && digest_user(&e.id) == digest_user(&entry.id) && e.id != entry.id
                    });
                match posing {
                    true => format!("{entry} (another password's)"),
                    false => entry.to_string(),
                }
            })
            .collect();
        entries.join(", ")
    }

    /// The entries of an existing node's ACL (as the server reports them) whose digest hash the
    /// server hid, for a user this ACL names (this client's own among them), and that grant more
    /// than this ACL gives anyone: whether they are the entries this ACL means cannot be known
    /// here, and if not, the path is not protected (someone who authenticated with that user name
    /// and another password made it, say). Hidden entries for other users are someone else's:
    /// [`Acl::excess`] counts them.
    pub(crate) fn unverifiable(&self, actual: &[zk::Acl], identities: &Identities) -> Vec<AclEntry> {
        let expected = self.expected(identities);
        let anyone =
            expected.iter().filter(|e| e.scheme == "world" && e.id == "anyone").fold(Perms(0), |p, e| p | e.perms);
        reported(actual)
            .into_iter()
            .filter(|entry| {
                is_hidden_digest(entry)
                    && !anyone.contains(entry.perms)
                    && expected.iter().any(|e| e.scheme == "digest" && digest_user(&e.id) == digest_user(&entry.id))
            })
            .collect()
    }

    /// The ACL as the ZooKeeper client sends it.
    pub(crate) fn to_zk(&self) -> Vec<zk::Acl> {
        self.entries().iter().map(AclEntry::to_zk).collect()
    }
}

impl fmt::Display for Acl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Acl::Open => f.write_str("Open"),
            Acl::CreatorAllWorldRead => f.write_str("CreatorAllWorldRead"),
            Acl::CreatorAll => f.write_str("CreatorAll"),
            Acl::Custom(entries) => {
                let entries: Vec<String> = entries.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", entries.join(", "))
            }
        }
    }
}

/// The rights a contender needs that an existing node's ACL (as the server reports it) does
/// not grant this client (known as `identities`); `None` when all are granted, or when the ACL
/// has entries of schemes this client cannot be matched against here (ip; x509 unless known).
pub(crate) fn missing_rights(actual: &[zk::Acl], identities: &Identities) -> Option<Perms> {
    let entries = reported(actual);
    if !entries.iter().all(|entry| identities.decides(&entry.scheme)) {
        return None;
    }
    // An entry of this client's digest user with its hash hidden may be its own, or not.
    let mine_hidden = |entry: &AclEntry| {
        is_hidden_digest(entry)
            && identities.ids.iter().any(|(scheme, id)| scheme == "digest" && digest_user(id) == digest_user(&entry.id))
    };
    if entries.iter().any(mine_hidden) {
        return None;
    }
    let needed = Perms::READ | Perms::CREATE | Perms::DELETE;
    let mine = own_perms(&entries, identities);
    (!mine.contains(needed)).then_some(Perms(needed.0 & !mine.0))
}

/// An ACL as the server reports it, for messages.
pub(crate) fn describe(actual: &[zk::Acl]) -> String {
    let entries: Vec<String> = actual
        .iter()
        .map(|acl| AclEntry::new(Perms::of_zk(acl.permission()), acl.scheme(), acl.id()).to_string())
        .collect();
    entries.join(", ")
}

/// What this client may do under `acl`: what anyone may, and what its identities may.
fn own_perms(acl: &[AclEntry], identities: &Identities) -> Perms {
    acl.iter()
        .filter(|e| match e.scheme.as_str() {
            "world" => e.id == "anyone",
            _ => identities
                .entries(Perms(0))
                .iter()
                .any(|me| me.scheme == e.scheme && identities.same_id(&e.scheme, &e.id, &me.id)),
        })
        .fold(Perms(0), |p, e| p | e.perms)
}

/// Who the servers know a client as: the identities its credentials give it, which an `auth:`
/// entry (the creator) stands for. Before any traffic, from the options; once a session exists,
/// as the server reports them (ZooKeeper 3.7+'s whoAmI), which also names the x509 identity of
/// a TLS client certificate and a Kerberos principal as the server shortened it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Identities {
    /// `(scheme, id)` of each identity: digest's `user:base64(sha1("user:password"))` (the
    /// password itself is not kept), sasl's user or principal, x509's certificate subject.
    ids: Vec<(String, String)>,
    /// A TLS client certificate gives an x509 identity that `ids` lacks (its subject, as the
    /// server formats it, is only known from the server): x509 entries cannot be matched here.
    x509_unknown: bool,
    /// The SASL and x509 identities are as the server reported them (whoAmI), not as
    /// configured: matched exactly then.
    server_named: bool,
}

impl Identities {
    /// The identities that digest credentials `"user:password"`, a SASL identity and a TLS
    /// client certificate (`client_cert`) give, as far as the options tell.
    pub(crate) fn configured(digest_auth: Option<&str>, sasl: Option<&str>, client_cert: bool) -> Identities {
        let digest = digest_auth.map(|auth| ("digest".to_owned(), digest_id(auth)));
        let sasl = sasl.map(|identity| ("sasl".to_owned(), identity.to_owned()));
        Identities { ids: digest.into_iter().chain(sasl).collect(), x509_unknown: client_cert, server_named: false }
    }

    /// These identities with those the server reports for a session, `(scheme, user)`: the
    /// ones an `auth:` entry stands for (not `ip`, which the server does not count as
    /// authenticated). The server reports a digest identity by its user alone, so the digest
    /// identity stays the configured one (with its hash).
    pub(crate) fn with_reported(&self, reported: impl IntoIterator<Item = (String, String)>) -> Identities {
        let digest = self.ids.iter().filter(|(scheme, _)| scheme == "digest").cloned();
        let others = reported.into_iter().filter(|(scheme, _)| !matches!(scheme.as_str(), "ip" | "world" | "digest"));
        Identities { ids: digest.chain(others).collect(), x509_unknown: false, server_named: true }
    }

    /// Whether `reported`, an id of `scheme` in an ACL as the server reported it, is `id`, one
    /// of this client's identities or an id of an expected entry. A hidden digest hash is
    /// nobody's (see `is_hidden_digest`). A SASL identity as configured may reach the server
    /// shortened (`kerberos.removeRealmFromPrincipal`...): its forms match then; as the server
    /// named it, only itself (`alice` is another principal than `alice@REALM` on a server that
    /// keeps realms).
    fn same_id(&self, scheme: &str, reported: &str, id: &str) -> bool {
        if scheme == "digest" && reported.ends_with(":x") {
            return false;
        }
        if reported == id {
            return true;
        }
        scheme == "sasl" && !self.server_named && crate::sasl::identity_forms(id).iter().any(|form| form == reported)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty() && !self.x509_unknown
    }

    /// Whether entries of `scheme` can be matched to this client here (the server decides the
    /// others: ip, and x509 while its identity is unknown).
    fn decides(&self, scheme: &str) -> bool {
        match scheme {
            "world" | "auth" | "digest" | "sasl" => true,
            "x509" => !self.x509_unknown,
            _ => false,
        }
    }

    /// An entry of `perms` for each identity, as the server stores the creator's.
    fn entries(&self, perms: Perms) -> Vec<AclEntry> {
        self.ids.iter().map(|(scheme, id)| AclEntry::new(perms, scheme, id)).collect()
    }
}

impl fmt::Display for Identities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut named: Vec<String> = self
            .ids
            .iter()
            .map(|(scheme, id)| match scheme.as_str() {
                "digest" => format!("digest user {}", printable(digest_user(id))),
                "sasl" => format!("SASL identity {}", printable(id)),
                "x509" => format!("certificate {}", printable(id)),
                _ => format!("{}:{}", printable(scheme), printable(id)),
            })
            .collect();
        if self.x509_unknown {
            named.push("a client certificate".to_owned());
        }
        match named.is_empty() {
            true => f.write_str("an unauthenticated client"),
            false => f.write_str(&named.join(", ")),
        }
    }
}

/// Entries of an ACL as the server reports them.
fn reported(actual: &[zk::Acl]) -> Vec<AclEntry> {
    actual.iter().map(|acl| AclEntry::new(Perms::of_zk(acl.permission()), acl.scheme(), acl.id())).collect()
}

/// The digest entries of an ACL as the server reported it whose hashes it hid (`user:x`): it
/// does so to a client without ADMIN on the node. ZooKeeper reserves no digest user name (anyone
/// can authenticate as `alice` with any password), so such an entry cannot be told from this
/// client's own: it is nobody's here, and a protected lock refuses a path that has one granting
/// more than anyone gets (see `Acl::unverifiable`).
/// The user of a digest id, `user:hash`.
fn digest_user(id: &str) -> &str {
    id.split(':').next().unwrap_or_default()
}

fn is_hidden_digest(entry: &AclEntry) -> bool {
    // A real hash is the base64 of 20 bytes, never "x".
    entry.scheme == "digest" && entry.id.ends_with(":x")
}

/// The identity ZooKeeper's digest scheme gives credentials `"user:password"`:
/// `user:base64(sha1("user:password"))`.
pub(crate) fn digest_id(credentials: &str) -> String {
    let user = credentials.split(':').next().unwrap_or_default();
    let hash = sha1_smol::Sha1::from(credentials.as_bytes()).digest().bytes();
    format!("{user}:{}", base64(&hash))
}

/// Standard base64, with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let triple = chunk.iter().enumerate().fold(0u32, |all, (i, byte)| all | u32::from(*byte) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(triple >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_ids_are_zookeepers() {
        // As ZooKeeper's DigestAuthenticationProvider.generateDigest makes them; the real
        // server's agreement is shown by tests/acl.rs.
        assert_eq!(digest_id("super:superpw"), "super:g9oN2HttPfn8MMWJZ2r45Np/LIA=");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b""), "");
    }

    #[test]
    fn excess_is_what_an_existing_acl_grants_beyond_the_asked() {
        let me = &Identities::configured(Some("alice:secret"), None, false);
        let alice = digest_id("alice:secret");
        let acl = |perms: zk::Permission, scheme: &str, id: &str| zk::Acl::new(perms, zk::AuthId::new(scheme, id));
        let ours = [acl(zk::Permission::ALL, "digest", &alice), acl(zk::Permission::READ, "world", "anyone")];
        assert!(Acl::CreatorAllWorldRead.excess(&ours, me).is_empty());
        // Stricter than asked is no excess.
        assert!(Acl::CreatorAllWorldRead.excess(&ours[..1], me).is_empty());
        // Read for someone else is no more than anyone's read.
        assert!(Acl::CreatorAllWorldRead.excess(&[acl(zk::Permission::READ, "digest", "bob:x")], me).is_empty());
        let open = [acl(zk::Permission::ALL, "world", "anyone")];
        assert_eq!(Acl::CreatorAllWorldRead.excess(&open, me), vec![AclEntry::anyone(Perms::ALL)]);
        assert_eq!(Acl::CreatorAll.excess(&ours, me), vec![AclEntry::anyone(Perms::READ)]);
        let bob = [acl(zk::Permission::ALL, "digest", &digest_id("bob:pw"))];
        assert_eq!(Acl::CreatorAll.excess(&bob, me).len(), 1);
        // Hidden hashes (a reader without ADMIN) are nobody's: ZooKeeper reserves no digest user
        // name, so "alice:x" may be anyone who authenticated as alice with any password.
        let rcd = zk::Permission::READ | zk::Permission::CREATE | zk::Permission::DELETE;
        let custom = Acl::Custom(vec![
            AclEntry::digest(Perms::ALL, "alice:secret").unwrap(),
            AclEntry::digest(Perms::READ | Perms::CREATE | Perms::DELETE, "bob:pw").unwrap(),
        ]);
        let hidden = [acl(zk::Permission::ALL, "digest", "alice:x"), acl(rcd, "digest", "bob:x")];
        let bob_pw = Identities::configured(Some("bob:pw"), None, false);
        assert_eq!(custom.unverifiable(&hidden, &bob_pw).len(), 2);
        assert_eq!(custom.excess(&hidden, &bob_pw).len(), 2);
        assert_eq!(missing_rights(&hidden, &bob_pw), None, "bob:x may be bob's: the server decides");
        let carol_pw = Identities::configured(Some("carol:pw"), None, false);
        assert_eq!(missing_rights(&hidden, &carol_pw), Some(Perms::READ | Perms::CREATE | Perms::DELETE));
        assert!(Acl::CreatorAll.unverifiable(&hidden, &carol_pw).is_empty(), "other users' entries: excess");
        assert_eq!(Acl::CreatorAll.excess(&hidden, &carol_pw).len(), 2);
        // A hidden entry granting no more than anyone gets hides nothing that matters.
        let world_read =
            Acl::Custom(vec![AclEntry::anyone(Perms::READ), AclEntry::digest(Perms::ALL, "bob:pw").unwrap()]);
        assert!(world_read.unverifiable(&[acl(zk::Permission::READ, "digest", "carol:x")], &bob_pw).is_empty());
    }

    #[test]
    fn a_sasl_identity_the_server_named_matches_only_itself() {
        let configured = Identities::configured(None, Some("alice@R"), false);
        assert!(configured.same_id("sasl", "alice", "alice@R"), "perhaps shortened by the server");
        let named = Identities::default().with_reported([("sasl".to_owned(), "alice@R".to_owned())]);
        assert!(!named.same_id("sasl", "alice", "alice@R"), "another principal on a server that keeps realms");
        assert!(named.same_id("sasl", "alice@R", "alice@R"));
    }

    #[test]
    fn checks_refuse_before_any_traffic() {
        assert!(Acl::Open.check(&Identities::default()).is_ok());
        assert!(Acl::CreatorAllWorldRead.check(&Identities::configured(Some("a:b"), None, false)).is_ok());
        for acl in [Acl::CreatorAllWorldRead, Acl::CreatorAll, Acl::Custom(vec![AclEntry::creator(Perms::ALL)])] {
            let err = acl.check(&Identities::default()).unwrap_err();
            assert!(err.message().contains("no credentials"), "{err}");
        }
        let refused = |entries: Vec<AclEntry>| {
            Acl::Custom(entries).check(&Identities::configured(Some("a:b"), None, false)).unwrap_err().to_string()
        };
        assert!(refused(vec![]).contains("empty"));
        assert!(refused(vec![AclEntry::anyone(Perms::from_bits(0).unwrap())]).contains("no permission"));
        assert!(refused(vec![AclEntry::new(Perms::ALL, "world", "everyone")]).contains("anyone"));
        assert!(refused(vec![AclEntry::new(Perms::ALL, "digest", "nohash")]).contains("digest id"));
        assert!(refused(vec![AclEntry::anyone(Perms::READ)]).contains("READ, CREATE and DELETE"));
        assert!(Perms::from_bits(32).is_none());
        assert_eq!((Perms::READ | Perms::CREATE).to_string(), "READ|CREATE");
        assert_eq!(Perms::ALL.to_string(), "ALL");
    }

    #[test]
    fn sasl_identities_are_the_creator_and_match_shortened_principals() {
        let me = &Identities::configured(None, Some("alice@ZKLOCK.TEST"), false);
        assert!(Acl::CreatorAll.check(me).is_ok());
        assert_eq!(Acl::CreatorAll.expected(me), vec![AclEntry::sasl(Perms::ALL, "alice@ZKLOCK.TEST")]);
        let acl = |perms: zk::Permission, scheme: &str, id: &str| zk::Acl::new(perms, zk::AuthId::new(scheme, id));
        // As the server stores `auth:` for a SASL client, whole or with the realm removed.
        for id in ["alice@ZKLOCK.TEST", "alice"] {
            let stored = [acl(zk::Permission::ALL, "sasl", id)];
            assert!(Acl::CreatorAll.excess(&stored, me).is_empty(), "{id}");
            assert_eq!(missing_rights(&stored, me), None, "{id}");
        }
        let bobs = [acl(zk::Permission::ALL, "sasl", "bob@ZKLOCK.TEST")];
        assert_eq!(Acl::CreatorAll.excess(&bobs, me).len(), 1);
        assert_eq!(missing_rights(&bobs, me), Some(Perms::READ | Perms::CREATE | Perms::DELETE));
        // Digest and SASL together: the creator is both.
        let both = Identities::configured(Some("alice:secret"), Some("alice"), false);
        assert_eq!(Acl::CreatorAll.expected(&both).len(), 2);
        assert_eq!(both.to_string(), "digest user alice, SASL identity alice");
        let custom = Acl::Custom(vec![AclEntry::sasl(Perms::ALL, "bob")]);
        assert!(custom.check(me).unwrap_err().message().contains("READ, CREATE and DELETE"));
    }

    #[test]
    fn a_client_certificate_is_an_identity_that_the_server_names() {
        // Before any traffic: the creator presets are allowed, x509 entries left to the server.
        let before = Identities::configured(None, None, true);
        assert!(Acl::CreatorAll.check(&before).is_ok());
        assert!(Acl::Custom(vec![AclEntry::new(Perms::ALL, "x509", "CN=bob,O=zklock")]).check(&before).is_ok());
        let acl = |perms: zk::Permission, scheme: &str, id: &str| zk::Acl::new(perms, zk::AuthId::new(scheme, id));
        let stored = [acl(zk::Permission::ALL, "x509", "CN=alice,O=zklock"), acl(zk::Permission::ALL, "sasl", "alice")];
        assert_eq!(missing_rights(&stored, &before), None, "the server decides");
        // As the server reports them (ip is no authenticated identity): the creator is both.
        let reported = before.with_reported(
            [("ip", "127.0.0.1"), ("x509", "CN=alice,O=zklock"), ("sasl", "alice")]
                .map(|(scheme, id)| (scheme.to_owned(), id.to_owned())),
        );
        assert!(Acl::CreatorAll.excess(&stored, &reported).is_empty());
        assert_eq!(missing_rights(&stored, &reported), None);
        let bobs = [acl(zk::Permission::ALL, "x509", "CN=bob,O=zklock")];
        assert_eq!(Acl::CreatorAll.excess(&bobs, &reported).len(), 1);
        assert_eq!(missing_rights(&bobs, &reported), Some(Perms::READ | Perms::CREATE | Perms::DELETE));
        assert_eq!(reported.to_string(), "certificate CN=alice,O=zklock, SASL identity alice");
    }
}
