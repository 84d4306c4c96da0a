//! Input checks that run before any network traffic, so that bad input fails fast with an error
//! naming exactly what was wrong.

use std::time::Duration;

use crate::error::{Error, Result};

/// Checks a ZooKeeper path as the server would, naming `what` it is in the error.
fn check_znode_path(path: &str, what: &str) -> Result<()> {
    let fail = |why: &str| Err(Error::invalid(format!("{what} {path:?} {why}")));
    if path.is_empty() {
        return Err(Error::invalid(format!("{what} is empty")));
    }
    if !path.starts_with('/') {
        return fail("is relative: it must start with '/'");
    }
    if path == "/" {
        return fail("is the root: a lock needs a node of its own");
    }
    if path.ends_with('/') {
        return fail("ends with '/'");
    }
    if path.contains("//") {
        return fail("contains an empty segment ('//')");
    }
    if path[1..].split('/').any(|segment| segment == "." || segment == "..") {
        return fail("contains a relative segment ('.' or '..')");
    }
    // The characters ZooKeeper's PathUtils.validatePath rejects. It checks Java's UTF-16 units,
    // refusing U+D800..U+F8FF, so every character past U+FFFF (a surrogate pair there) too.
    if let Some(c) = path
        .chars()
        .find(|&c| matches!(c, '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{e000}'..='\u{f8ff}' | '\u{fff0}'..))
    {
        let why = if u32::from(c) > 0xFFFF { " (outside the Basic Multilingual Plane)" } else { "" };
        return fail(&format!("contains the invalid character U+{:04X}{why}", c as u32));
    }
    Ok(())
}

fn is_reserved(path: &str) -> bool {
    path == "/zookeeper" || path.starts_with("/zookeeper/")
}

// What one client's input may cost a shared server. Each input below multiplies into requests
// the server must take and nodes it must keep: a lock path's depth into the parents an
// acquisition creates (whose paths, each a prefix of the next, grow with the square of the
// depth: a 300,000-deep path once made the server run out of memory), an identifier and a label
// into the data of every node, an ACL into every create, `n` into lease nodes, and a multi-lock's
// members into all of these. Each is refused, as an invalid argument naming the limit, before any
// network traffic, in every language and the command alike.

/// The deepest lock path (and shared count path) zklock takes, in segments: `/a/b/c` is 3 deep.
pub const MAX_PATH_DEPTH: usize = 64;

/// The most parents one acquisition may create: the missing ancestors of its lock path (of
/// every member of a multi-lock, and of a semaphore's parts and shared count), each counted once.
/// A lock path is at most [`MAX_PATH_DEPTH`] deep, so a single lock stays well within it.
pub const MAX_NEW_PARENTS: usize = 1024;

/// The most bytes of path, in all, of the parents one acquisition may create (see
/// [`MAX_NEW_PARENTS`]): each parent's path is a prefix of the lock path, so a deep path of long
/// segments would otherwise have the server store the square of its length.
pub const MAX_NEW_PARENT_BYTES: usize = 64 * 1024;

/// The longest identifier ([`crate::LockOptions::identifier`], [`crate::SemaphoreOptions::identifier`]),
/// in bytes of UTF-8: it is written into every node the lock makes.
pub const MAX_IDENTIFIER_BYTES: usize = 1024;

/// The longest owner label ([`crate::Owner::with_label`], [`crate::SemaphoreOptions::label`]), in
/// bytes of UTF-8: it is written into every node its owner's acquisitions make.
pub const MAX_LABEL_BYTES: usize = 1024;

/// The most entries in a custom ACL: every node a lock makes carries them all.
pub const MAX_ACL_ENTRIES: usize = 32;

/// The longest scheme or id of an ACL entry, in bytes (an x509 distinguished name is the longest
/// kind in use, a few hundred bytes).
pub const MAX_ACL_ID_BYTES: usize = 1024;

/// The most leases one semaphore acquisition may ask for: each is a node (and a request) of its
/// own.
pub const MAX_LEASES_PER_ACQUISITION: u32 = 1024;

/// The most members of one multi-lock: each is an acquisition of its own.
pub const MAX_MULTI_LOCK_MEMBERS: usize = 256;

/// The refusal of an input over one of the limits above: what it is, and the limit.
fn over_limit(what: String, limit: String) -> Error {
    Error::invalid(format!(
        "{what}, over zklock's limit of {limit}, which keeps one client's input from costing a shared ZooKeeper \
         server too much"
    ))
}

/// Refuses a path (a lock path, a shared count path) deeper than [`MAX_PATH_DEPTH`].
fn path_depth(path: &str, what: &str) -> Result<()> {
    // Counted up to one past the limit: a huge path is not walked whole.
    let depth = path.bytes().filter(|&b| b == b'/').take(MAX_PATH_DEPTH + 1).count();
    if depth > MAX_PATH_DEPTH {
        let depth = path.bytes().filter(|&b| b == b'/').count();
        return Err(over_limit(format!("{what} is {depth} segments deep"), format!("{MAX_PATH_DEPTH} segments"))
            .with_path(path));
    }
    Ok(())
}

/// Refuses an acquisition whose queue paths (`queues`: lock paths, a semaphore's mutex and lease
/// parent and shared count) may make it create more parents than [`MAX_NEW_PARENTS`], or more
/// than [`MAX_NEW_PARENT_BYTES`] of them.
pub(crate) fn new_parents<'a>(queues: impl IntoIterator<Item = &'a str>) -> Result<()> {
    let mut parents = std::collections::BTreeSet::new();
    for queue in queues {
        // Every proper prefix ending before a '/', but the root.
        parents.extend(queue.match_indices('/').map(|(i, _)| &queue[..i]).filter(|parent| !parent.is_empty()));
    }
    if parents.len() > MAX_NEW_PARENTS {
        return Err(over_limit(
            format!("an acquisition here may have to create {} parent nodes", parents.len()),
            format!("{MAX_NEW_PARENTS} parents"),
        ));
    }
    let bytes: usize = parents.iter().map(|parent| parent.len()).sum();
    if bytes > MAX_NEW_PARENT_BYTES {
        return Err(over_limit(
            format!(
                "the {} parent nodes an acquisition here may have to create have {bytes} bytes of path",
                parents.len()
            ),
            format!("{MAX_NEW_PARENT_BYTES} bytes of parents' paths"),
        ));
    }
    Ok(())
}

/// Refuses an identifier longer than [`MAX_IDENTIFIER_BYTES`].
pub(crate) fn identifier(identifier: Option<&str>) -> Result<()> {
    match identifier {
        Some(identifier) if identifier.len() > MAX_IDENTIFIER_BYTES => Err(over_limit(
            format!("identifier of {} bytes", identifier.len()),
            format!("{MAX_IDENTIFIER_BYTES} bytes"),
        )),
        _ => Ok(()),
    }
}

/// Refuses an owner label longer than [`MAX_LABEL_BYTES`].
pub(crate) fn label(label: Option<&str>) -> Result<()> {
    match label {
        Some(label) if label.len() > MAX_LABEL_BYTES => {
            Err(over_limit(format!("owner label of {} bytes", label.len()), format!("{MAX_LABEL_BYTES} bytes")))
        }
        _ => Ok(()),
    }
}

/// Refuses an ACL of more than [`MAX_ACL_ENTRIES`] entries, or an entry's scheme or id longer
/// than [`MAX_ACL_ID_BYTES`].
/// `longest` gives, for each entry, the length of the longer of its scheme and id.
pub(crate) fn acl_size(entries: usize, longest: impl IntoIterator<Item = usize>) -> Result<()> {
    if entries > MAX_ACL_ENTRIES {
        return Err(over_limit(format!("the lock's ACL has {entries} entries"), format!("{MAX_ACL_ENTRIES} entries")));
    }
    for longest in longest {
        if longest > MAX_ACL_ID_BYTES {
            return Err(over_limit(
                format!("an entry of the lock's ACL has a scheme or id of {longest} bytes"),
                format!("{MAX_ACL_ID_BYTES} bytes"),
            ));
        }
    }
    Ok(())
}

/// Refuses more leases in one acquisition than [`MAX_LEASES_PER_ACQUISITION`].
pub(crate) fn lease_count(n: u32) -> Result<()> {
    if n > MAX_LEASES_PER_ACQUISITION {
        return Err(over_limit(
            format!("{n} leases asked for at once"),
            format!("{MAX_LEASES_PER_ACQUISITION} leases"),
        ));
    }
    Ok(())
}

/// Refuses a multi-lock of more than [`MAX_MULTI_LOCK_MEMBERS`] members.
pub(crate) fn multi_lock_members(count: usize) -> Result<()> {
    if count > MAX_MULTI_LOCK_MEMBERS {
        return Err(over_limit(
            format!("a multi-lock of {count} members"),
            format!("{MAX_MULTI_LOCK_MEMBERS} members"),
        ));
    }
    Ok(())
}

/// A lock path, relative to the client's chroot: valid for ZooKeeper, not reserved, and within
/// [`MAX_PATH_DEPTH`] and the parents' limits ([`MAX_NEW_PARENTS`], [`MAX_NEW_PARENT_BYTES`]).
pub(crate) fn lock_path(path: &str, chroot: &str) -> Result<()> {
    // The depth first: it is cheap, and the other checks would walk a huge path whole.
    path_depth(path, "lock path")?;
    check_znode_path(path, "lock path")?;
    if is_reserved(&format!("{chroot}{path}")) {
        return Err(Error::invalid(format!(
            "lock path {path:?} is under /zookeeper, which the server reserves for itself"
        )));
    }
    new_parents([path]).map_err(|err| err.with_path(path))
}

/// Checks a lock path's form before anything is sent: absolute, no empty, `.` or `..` segments,
/// no control characters, not the root and not under `/zookeeper`, at most [`MAX_PATH_DEPTH`]
/// segments deep, and its parents within [`MAX_NEW_PARENT_BYTES`]. A client checks it again with
/// its chroot. For tools that take a path before they connect (the `zklock` command).
pub fn check_lock_path(path: &str) -> Result<()> {
    lock_path(path, "")
}

/// Checks an owner label against [`MAX_LABEL_BYTES`] before anything is sent, for tools that take
/// a label before they connect (the `zklock` command). An acquisition checks its owner's label
/// itself.
pub fn check_label(owner_label: &str) -> Result<()> {
    label(Some(owner_label))
}

/// Checks a path to look for locks under ([`crate::Client::locks_under`]): a ZooKeeper path as
/// for a lock, or the root.
pub fn check_prefix(prefix: &str) -> Result<()> {
    match prefix {
        "/" => Ok(()),
        _ => check_znode_path(prefix, "prefix"),
    }
}

/// A connect string: `host[:port][,host[:port]...][/chroot]`. Returns the chroot ("" if none).
pub(crate) fn connect_string(connect: &str) -> Result<&str> {
    let fail = |why: String| Error::invalid(format!("connect string {connect:?} {why}"));
    if connect.trim().is_empty() {
        return Err(Error::invalid("connect string is empty"));
    }
    let (hosts, chroot) = match connect.find('/') {
        Some(i) => (&connect[..i], &connect[i..]),
        None => (connect, ""),
    };
    if hosts.is_empty() {
        return Err(fail("names no host".into()));
    }
    if !chroot.is_empty() {
        check_znode_path(chroot, "chroot").map_err(|e| fail(format!("has a bad chroot: {}", e.message())))?;
        // ZooKeeper allows ',' in a node's name, but the client splits the whole string at each
        // ',' before it looks for the chroot: "h/a,b" would be hosts "h/a" and "b".
        if chroot.contains(',') {
            return Err(fail("has a bad chroot: a ',' in it would be read as a host separator".into()));
        }
        if is_reserved(chroot) {
            return Err(fail("has a chroot under /zookeeper, which the server reserves for itself".into()));
        }
    }
    for address in hosts.split(',') {
        let (host, port) = split_host_port(address).ok_or_else(|| fail(format!("has a bad address {address:?}")))?;
        if host.is_empty() || host.chars().any(|c| c.is_whitespace()) {
            return Err(fail(format!("has a bad host in {address:?}")));
        }
        if let Some(port) = port {
            match port.parse::<u16>() {
                Ok(p) if p > 0 => {}
                _ => return Err(fail(format!("has a bad port in {address:?}: ports are 1 to 65535"))),
            }
        }
    }
    Ok(chroot)
}

/// Splits `host`, `host:port`, `[v6]` or `[v6]:port`.
fn split_host_port(address: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = address.strip_prefix('[') {
        let end = rest.find(']')?;
        let (host, after) = (&rest[..end], &rest[end + 1..]);
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?))),
        };
    }
    match address.rsplit_once(':') {
        Some((host, port)) => Some((host, Some(port))),
        None => Some((address, None)),
    }
}

/// A timeout that must be positive, such as a session or connect timeout.
pub(crate) fn positive_timeout(value: Duration, what: &str) -> Result<()> {
    if value.is_zero() {
        return Err(Error::invalid(format!("{what} must be greater than zero")));
    }
    Ok(())
}

/// The session timeout travels as a signed 32-bit count of milliseconds: anything longer would
/// wrap (2,147,484 s was granted as 1 s).
pub(crate) fn session_timeout(value: Duration) -> Result<()> {
    positive_timeout(value, "session timeout")?;
    if value.as_millis() > i32::MAX as u128 {
        return Err(Error::invalid(format!(
            "session timeout of {value:?} is out of range: ZooKeeper takes at most {} ms (about 24.8 days)",
            i32::MAX
        )));
    }
    Ok(())
}

/// ZooKeeper's default packet limit, `jute.maxbuffer` (0xfffff bytes): a server closes the
/// connection of a client that sends a larger request.
pub const DEFAULT_JUTE_MAXBUFFER: u32 = 0xfffff;

/// Below this, not even a lock with a short path and identity fits.
pub(crate) const MIN_JUTE_MAXBUFFER: u32 = 1024;

/// The size, as the server counts it against `jute.maxbuffer`, of the create request that
/// queues for a lock: header, path, data, the ACL (of `acl_len`, see [`acl_len`]), flags.
pub(crate) fn create_request_len(server_path_len: usize, data_len: usize, acl_len: usize) -> usize {
    const HEADER: usize = 8;
    HEADER + (4 + server_path_len) + (4 + data_len) + acl_len + 4
}

/// The size of an ACL in a request: its count, then each entry's permissions, scheme and id.
pub(crate) fn acl_len(acl: &[zookeeper_client::Acl]) -> usize {
    4 + acl.iter().map(|entry| 4 + (4 + entry.scheme().len()) + (4 + entry.id().len())).sum::<usize>()
}

/// Splits a multi-read of getData requests into consecutive ranges whose requests, and the
/// answers expected, each stay under the packet limit `limit`: each op given by the length of
/// its path on the server and of the data its stat said the node has. None for no ops.
pub(crate) fn multi_read_batches(
    ops: impl Iterator<Item = (usize, usize)>,
    limit: usize,
) -> Vec<std::ops::Range<usize>> {
    // Request header and length; the closing multi header. Per op: a multi header (type, done,
    // err), the path, and the watch flag.
    const FIXED: usize = 4 + 8 + 9;
    const PER_OP: usize = 9 + 4 + 1;
    // The answer's length and reply header (xid, zxid, err); the closing multi header. Per op: a
    // multi header, the data's length, and the stat.
    const ANSWER_FIXED: usize = 4 + 16 + 9;
    const ANSWER_PER_OP: usize = 9 + 4 + 68;
    let mut batches = Vec::new();
    let (mut start, mut len, mut answer, mut count) = (0, FIXED, ANSWER_FIXED, 0);
    for (i, (path_len, data_len)) in ops.enumerate() {
        let (op, op_answer) = (PER_OP + path_len, ANSWER_PER_OP + data_len);
        if i > start && (len + op > limit || answer + op_answer > limit) {
            batches.push(start..i);
            (start, len, answer) = (i, FIXED, ANSWER_FIXED);
        }
        len += op;
        answer += op_answer;
        count = i + 1;
    }
    if count > start {
        batches.push(start..count);
    }
    batches
}

/// How the client option of the packet limit (`ClientOptions::jute_maxbuffer`) is spelled in
/// `language` (the client's, as its identity records it), for the messages that name it.
pub(crate) fn packet_limit_option(language: &str) -> &'static str {
    match language {
        "node" => "juteMaxbuffer",
        _ => "jute_maxbuffer",
    }
}

/// Rejects a request the server would refuse by dropping the connection (and the client would
/// send again on every reconnection), naming what made it too large.
/// `language` (the client's, as its identity records it) says how its packet limit option is
/// spelled.
pub(crate) fn request_fits(len: usize, limit: u32, language: &str, what: impl FnOnce() -> String) -> Result<()> {
    if len > limit as usize {
        let option = packet_limit_option(language);
        return Err(Error::invalid(format!(
            "{} makes a request of {len} bytes, over ZooKeeper's packet limit of {limit} bytes \
             (the server's jute.maxbuffer; if the servers allow more, set the client option {option} to match)",
            what()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_reads_are_split_under_the_packet_limit() {
        let paths = |lens: &[usize]| lens.iter().map(|&len| (len, 0)).collect::<Vec<_>>().into_iter();
        assert!(multi_read_batches(std::iter::empty(), 1000).is_empty());
        assert_eq!(multi_read_batches(paths(&[10, 10, 10]), 1000), vec![0..3]);
        // 21 fixed + 24 an op: two requests fit in 69 bytes, but not two answers (29 fixed + 81
        // an op, with no data), which need 191.
        assert_eq!(multi_read_batches(paths(&[10; 5]), 69), vec![0..1, 1..2, 2..3, 3..4, 4..5]);
        assert_eq!(multi_read_batches(paths(&[10; 5]), 191), vec![0..2, 2..4, 4..5]);
        // An op too large alone still goes, alone (the server's refusal then ends in an error).
        assert_eq!(multi_read_batches(paths(&[500, 10]), 200), vec![0..1, 1..2]);
        // The data counts: the first two answer 29 + 2 * (81 + 400) = 991 bytes.
        let ops = [(10, 400), (10, 400), (10, 0), (10, 100)];
        assert_eq!(multi_read_batches(ops.into_iter(), 991), vec![0..2, 2..4]);
        assert_eq!(multi_read_batches(ops.into_iter(), 990), vec![0..1, 1..4]);
    }

    #[test]
    fn lock_paths() {
        for ok in ["/a", "/a/b-c_d", "/locks/ünïcode", "/zookeeperx", "/a\u{d7ff}", "/a\u{f900}"] {
            lock_path(ok, "").unwrap();
        }
        let cases = [
            ("", "lock path is empty"),
            ("a/b", "is relative"),
            ("/", "is the root"),
            ("/a/", "ends with '/'"),
            ("/a//b", "empty segment"),
            ("/a/./b", "relative segment"),
            ("/a/..", "relative segment"),
            ("/a\0b", "U+0000"),
            ("/a\u{1}", "U+0001"),
            ("/probe/\u{1f512}", "U+1F512 (outside the Basic Multilingual Plane)"),
            ("/a\u{e000}", "U+E000"),
            ("/a\u{fff0}b", "U+FFF0"),
            ("/zookeeper", "under /zookeeper"),
            ("/zookeeper/quota", "under /zookeeper"),
        ];
        for (path, why) in cases {
            let err = lock_path(path, "").unwrap_err();
            assert!(err.message().contains(why), "{path:?}: {err}");
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
        }
        let err = lock_path("/quota", "/zookeeper").unwrap_err();
        assert!(err.message().contains("under /zookeeper"));
        lock_path("/zookeeper", "/app").unwrap();
    }

    #[test]
    fn depth_and_parents() {
        let deep = |depth: usize| "/a".repeat(depth);
        lock_path(&deep(MAX_PATH_DEPTH), "").unwrap();
        let err = lock_path(&deep(MAX_PATH_DEPTH + 1), "").unwrap_err();
        assert!(err.message().contains("65 segments deep, over zklock's limit of 64 segments"), "{err}");
        // Counted once: shared parents, and not the root or the queues themselves.
        new_parents(["/a/b/c", "/a/b/d", "/x"]).unwrap();
        let many: Vec<String> = (0..=MAX_NEW_PARENTS).map(|i| format!("/p{i}/q")).collect();
        let err = new_parents(many.iter().map(String::as_str)).unwrap_err();
        assert!(err.message().contains("1025 parent nodes"), "{err}");
        new_parents(many[1..].iter().map(String::as_str)).unwrap();
        let segment = "s".repeat(MAX_NEW_PARENT_BYTES / 2);
        new_parents([format!("/{segment}/q").as_str()]).unwrap();
        let err = new_parents([format!("/{segment}/{segment}/q").as_str()]).unwrap_err();
        assert!(err.message().contains("bytes of path"), "{err}");
        assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument);
    }

    #[test]
    fn session_timeouts() {
        session_timeout(Duration::from_millis(i32::MAX as u64)).unwrap();
        let err = session_timeout(Duration::from_secs(2_147_484)).unwrap_err();
        assert!(err.message().contains("out of range"), "{err}");
        assert!(session_timeout(Duration::ZERO).unwrap_err().message().contains("greater than zero"));
    }

    #[test]
    fn connect_strings() {
        assert_eq!(connect_string("h1:2181,h2:2181/app").unwrap(), "/app");
        assert_eq!(connect_string("127.0.0.1:2181").unwrap(), "");
        assert_eq!(connect_string("[::1]:2181,localhost").unwrap(), "");
        let cases = [
            ("", "is empty"),
            ("   ", "is empty"),
            ("/app", "names no host"),
            ("h1:2181,", "bad host"),
            ("h1:0", "bad port"),
            ("h1:99999", "bad port"),
            ("h1:abc", "bad port"),
            ("h1:2181/app/", "bad chroot"),
            ("h1:2181/zookeeper", "under /zookeeper"),
            ("[::1:2181", "bad address"),
            ("h 1:2181", "bad host"),
            ("h1:2181/app,", "bad chroot"),
            ("h1:2181/a,,b", "bad chroot"),
        ];
        for (connect, why) in cases {
            let err = connect_string(connect).unwrap_err();
            assert!(err.message().contains(why), "{connect:?}: {err}");
        }
    }
}
