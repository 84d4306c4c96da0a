//! Reads ZooKeeper's transaction logs (`DATA_DIR/version-2/log.*`), the server's own record of
//! every change: the chaos soak's judge learns from it when each lock node was made and deleted
//! and when each session ended, by zxid and the leader's clock.
//!
//! A log file is a header (`ZKLG`, version 2, dbid) and then records: the Adler-32 of the entry,
//! the entry as a jute buffer (a `TxnHeader`: session, cxid, zxid, time in ms, type; the txn's
//! record; in 3.6+ a digest), and the byte `B`. Preallocated zeros (a zero length), a record cut
//! short (a server killed while writing) or a bad checksum end the file, as they end
//! ZooKeeper's own reading of it. Only what the judge needs is decoded: the paths of creates
//! (`create`, `create2`, `createContainer`, `createTTL`; ephemeral or not) and deletes, session
//! closes (a close or an expiry: every ephemeral node of the session goes with it), also inside a
//! multi; the rest of a record is skipped.
//!
//! Each server logs what it acknowledges, so with 3 servers a txn the ensemble committed is in
//! at least 2 logs (a quorum acknowledged it; logs are never purged here: `scripts/zk config`
//! turns autopurge off), and a proposal that a dying leader logged alone may be in 1 and was not
//! necessarily committed: [`committed`] keeps the txns found in a majority of the logs.
//!
//! [`facts`] writes the lock paths' story as text, one event a line, which `chaos-resource`
//! reads (`FACTS file`) and the soak keeps in its run directory:
//!
//! ```text
//! 0x100000003 1764242872123 0x1000a2b3c0001 create /chaos/mutex/_c_...-lock-0000000001 ephemeral
//! 0x100000009 1764242872140 0x1000a2b3c0001 delete /chaos/mutex/_c_...-lock-0000000001
//! 0x10000000c 1764242873002 0x1000a2b3c0002 close
//! ```
//!
//! (zxid, the leader's wall clock in ms when it made the txn, the session whose request it was,
//! the event); the events of one multi share its zxid.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// `ZKLG`, the magic number of a transaction log file.
const MAGIC: i32 = 0x5a4b_4c47;

/// One change a txn made that the judge reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    Create {
        path: String,
        ephemeral: bool,
    },
    Delete {
        path: String,
    },
    /// The session ended (closed by its client, or expired): its ephemeral nodes are deleted.
    CloseSession,
}

/// A txn as logged: its header and the changes of [`Op`] it made (none for the other kinds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    pub zxid: i64,
    /// The leader's wall clock (ms since the epoch) when it made the txn.
    pub time_ms: i64,
    /// The session whose request it was.
    pub session: i64,
    /// The txn's type (`OpCode`).
    pub kind: i32,
    pub ops: Vec<Op>,
}

// OpCodes (org.apache.zookeeper.ZooDefs.OpCode).
const CREATE: i32 = 1;
const DELETE: i32 = 2;
const MULTI: i32 = 14;
const CREATE2: i32 = 15;
const DELETE_CONTAINER: i32 = 20;
const CREATE_CONTAINER: i32 = 19;
const CREATE_TTL: i32 = 21;
const CLOSE_SESSION: i32 = -11;

/// A jute reader over one record's bytes (big-endian; strings and buffers length-prefixed).
struct Jute<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Jute<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let s = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(s)
    }

    fn int(&mut self) -> Option<i32> {
        self.take(4).map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
    }

    fn long(&mut self) -> Option<i64> {
        self.take(8).map(|b| i64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    fn bool(&mut self) -> Option<bool> {
        self.take(1).map(|b| b[0] != 0)
    }

    /// A buffer or string: `None` for a missing one (length -1) as for a short read.
    fn buffer(&mut self) -> Option<&'a [u8]> {
        let n = self.int()?;
        if n < 0 {
            return Some(&[]);
        }
        self.take(n as usize)
    }

    fn string(&mut self) -> Option<String> {
        self.buffer().map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// Skips a `vector<ACL>` (perms, then the id's scheme and id).
    fn skip_acls(&mut self) -> Option<()> {
        let n = self.int()?;
        for _ in 0..n.max(0) {
            self.int()?;
            self.buffer()?;
            self.buffer()?;
        }
        Some(())
    }
}

/// The [`Op`]s of one txn record of type `kind` (`None`: the record does not parse).
fn ops_of(kind: i32, record: &[u8]) -> Option<Vec<Op>> {
    let mut r = Jute { bytes: record, at: 0 };
    Some(match kind {
        CREATE | CREATE2 => {
            let path = r.string()?;
            r.buffer()?;
            r.skip_acls()?;
            let ephemeral = r.bool()?;
            vec![Op::Create { path, ephemeral }]
        }
        CREATE_CONTAINER | CREATE_TTL => vec![Op::Create { path: r.string()?, ephemeral: false }],
        DELETE | DELETE_CONTAINER => vec![Op::Delete { path: r.string()? }],
        CLOSE_SESSION => vec![Op::CloseSession],
        MULTI => {
            let n = r.int()?;
            let mut ops = Vec::new();
            for _ in 0..n.max(0) {
                let sub = r.int()?;
                let data = r.buffer()?;
                ops.extend(ops_of(sub, data)?);
            }
            ops
        }
        _ => Vec::new(),
    })
}

/// Adler-32, the checksum of each logged entry.
fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in bytes.chunks(5552) {
        for &x in chunk {
            a += u32::from(x);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    (b << 16) | a
}

/// The txns of one log file's bytes, up to its end (see the module documentation). An error
/// only for a file that is not a transaction log.
pub fn parse_log(bytes: &[u8]) -> Result<Vec<Txn>, String> {
    let mut r = Jute { bytes, at: 0 };
    let (magic, version) = (r.int(), r.int());
    if magic != Some(MAGIC) || version != Some(2) || r.long().is_none() {
        return Err(format!("not a ZooKeeper transaction log (magic {magic:x?}, version {version:?})"));
    }
    let mut txns = Vec::new();
    while let Some(crc) = r.long() {
        let Some(n) = r.int() else { break };
        if n <= 0 {
            break; // preallocated zeros
        }
        let Some(entry) = r.take(n as usize) else { break };
        if r.take(1) != Some(b"B") || crc != i64::from(adler32(entry)) {
            break;
        }
        let mut e = Jute { bytes: entry, at: 0 };
        let (Some(session), Some(_cxid), Some(zxid), Some(time_ms), Some(kind)) =
            (e.long(), e.int(), e.long(), e.long(), e.int())
        else {
            break;
        };
        let Some(ops) = ops_of(kind, &entry[e.at..]) else {
            return Err(format!("txn {zxid:#x} of type {kind}: its record does not parse"));
        };
        txns.push(Txn { zxid, time_ms, session, kind, ops });
    }
    Ok(txns)
}

/// Every txn of the log files in `data_dir/version-2` (or in `data_dir` itself), in zxid order.
pub fn read_data_dir(data_dir: &Path) -> io::Result<Vec<Txn>> {
    let dir = if data_dir.join("version-2").is_dir() { data_dir.join("version-2") } else { data_dir.to_path_buf() };
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("log.")))
        .collect();
    files.sort();
    let mut txns = Vec::new();
    for file in files {
        let bytes = fs::read(&file)?;
        let parsed = parse_log(&bytes)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", file.display())))?;
        txns.extend(parsed);
    }
    txns.sort_by_key(|t| t.zxid);
    txns.dedup_by_key(|t| t.zxid);
    Ok(txns)
}

/// The txns in more than half of `logs` (one list per server), in zxid order: those the
/// ensemble committed. An error if two servers logged different txns under one zxid.
pub fn committed(logs: &[Vec<Txn>]) -> Result<Vec<Txn>, String> {
    let mut seen: BTreeMap<i64, (Txn, usize)> = BTreeMap::new();
    for log in logs {
        for t in log {
            match seen.get_mut(&t.zxid) {
                Some((first, n)) if first == t => *n += 1,
                Some((first, _)) => {
                    return Err(format!("two servers logged different txns as zxid {:#x}: {first:?} and {t:?}", t.zxid))
                }
                None => {
                    seen.insert(t.zxid, (t.clone(), 1));
                }
            }
        }
    }
    Ok(seen.into_values().filter(|(_, n)| *n > logs.len() / 2).map(|(t, _)| t).collect())
}

/// The facts text (see the module documentation) of `txns`: creates and deletes of the children
/// of `parents`, and every session's close.
pub fn facts(txns: &[Txn], parents: &[&str]) -> String {
    let under = |path: &str| path.rsplit_once('/').is_some_and(|(parent, _)| parents.contains(&parent));
    let mut out = String::new();
    for t in txns {
        let head = format!("{:#x} {} {:#x}", t.zxid, t.time_ms, t.session);
        for op in &t.ops {
            match op {
                Op::Create { path, ephemeral } if under(path) => {
                    let kind = if *ephemeral { "ephemeral" } else { "persistent" };
                    out.push_str(&format!("{head} create {path} {kind}\n"));
                }
                Op::Delete { path } if under(path) => out.push_str(&format!("{head} delete {path}\n")),
                Op::CloseSession => out.push_str(&format!("{head} close\n")),
                _ => {}
            }
        }
    }
    out
}

/// One line of [`facts`]: zxid, time, session and the event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    pub zxid: i64,
    pub time_ms: i64,
    pub session: i64,
    pub op: Op,
}

/// Reads one line of [`facts`] (`None` for a blank line or a `#` comment).
pub fn parse_fact(line: &str) -> Option<Result<Fact, String>> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let bad = || format!("bad facts line {line:?}");
    let hex = |s: &str| s.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()).map(|x| x as i64);
    let words: Vec<&str> = line.split_whitespace().collect();
    let parsed = match words.as_slice() {
        [zxid, time, session, rest @ ..] => {
            let (Some(zxid), Ok(time_ms), Some(session)) = (hex(zxid), time.parse::<i64>(), hex(session)) else {
                return Some(Err(bad()));
            };
            let op = match rest {
                ["create", path, kind @ ("ephemeral" | "persistent")] => {
                    Op::Create { path: path.to_string(), ephemeral: *kind == "ephemeral" }
                }
                ["delete", path] => Op::Delete { path: path.to_string() },
                ["close"] => Op::CloseSession,
                _ => return Some(Err(bad())),
            };
            Fact { zxid, time_ms, session, op }
        }
        _ => return Some(Err(bad())),
    };
    Some(Ok(parsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds log bytes as ZooKeeper writes them.
    struct Writer(Vec<u8>);

    impl Writer {
        fn new() -> Writer {
            let mut w = Writer(Vec::new());
            w.int(MAGIC);
            w.int(2);
            w.long(0);
            w
        }
        fn int(&mut self, x: i32) {
            self.0.extend(x.to_be_bytes());
        }
        fn long(&mut self, x: i64) {
            self.0.extend(x.to_be_bytes());
        }
        fn txn(&mut self, session: i64, zxid: i64, time: i64, kind: i32, record: &[u8]) {
            let mut e = Vec::new();
            e.extend(session.to_be_bytes());
            e.extend(7i32.to_be_bytes());
            e.extend(zxid.to_be_bytes());
            e.extend(time.to_be_bytes());
            e.extend(kind.to_be_bytes());
            e.extend(record);
            e.extend([0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9]); // a digest, as 3.6+ appends
            self.long(i64::from(adler32(&e)));
            self.int(e.len() as i32);
            self.0.extend(&e);
            self.0.push(b'B');
        }
    }

    fn string(s: &str) -> Vec<u8> {
        let mut v = (s.len() as i32).to_be_bytes().to_vec();
        v.extend(s.as_bytes());
        v
    }

    fn create_record(path: &str, ephemeral: bool) -> Vec<u8> {
        let mut v = string(path);
        v.extend(string("{\"lang\":\"rust\"}"));
        v.extend(1i32.to_be_bytes()); // one ACL: world:anyone, all
        v.extend(31i32.to_be_bytes());
        v.extend(string("world"));
        v.extend(string("anyone"));
        v.push(u8::from(ephemeral));
        v.extend(5i32.to_be_bytes());
        v
    }

    #[test]
    fn adler32_is_zlibs() {
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(&[0xff; 10_000]), {
            let (mut a, mut b) = (1u64, 0u64);
            for _ in 0..10_000 {
                a = (a + 255) % 65521;
                b = (b + a) % 65521;
            }
            ((b << 16) | a) as u32
        });
    }

    #[test]
    fn a_log_reads_creates_deletes_multis_and_closes_and_stops_at_its_end() {
        let mut w = Writer::new();
        w.txn(0x11, 0x1_0000_0001, 1000, CREATE2, &create_record("/chaos/mutex/_c_a-lock-0000000001", true));
        w.txn(0x11, 0x1_0000_0002, 1001, 5, &string("/elsewhere")); // setData: no op read
        let mut multi = 2i32.to_be_bytes().to_vec();
        multi.extend(13i32.to_be_bytes()); // check
        let mut check = string("/chaos/rw/_c_w-__WRIT__0000000003");
        check.extend(0i32.to_be_bytes());
        multi.extend((check.len() as i32).to_be_bytes());
        multi.extend(&check);
        multi.extend(CREATE.to_be_bytes());
        let create = create_record("/chaos/rw/_c_w-__READ__0000000003", true);
        multi.extend((create.len() as i32).to_be_bytes());
        multi.extend(&create);
        w.txn(0x12, 0x1_0000_0003, 1002, MULTI, &multi);
        w.txn(0x13, 0x1_0000_0004, 1003, DELETE, &string("/chaos/mutex/_c_a-lock-0000000001"));
        w.txn(0x12, 0x2_0000_0001, 1010, CLOSE_SESSION, &0i32.to_be_bytes());
        let whole = w.0.len();
        // a record cut short, then preallocated zeros
        w.txn(0x14, 0x2_0000_0002, 1011, DELETE, &string("/chaos/mutex/x"));
        w.0.truncate(whole + 20);
        w.0.extend([0u8; 64]);

        let txns = parse_log(&w.0).unwrap();
        assert_eq!(txns.len(), 5, "{txns:?}");
        assert_eq!(txns[0].ops, [Op::Create { path: "/chaos/mutex/_c_a-lock-0000000001".into(), ephemeral: true }]);
        assert_eq!((txns[0].session, txns[0].zxid, txns[0].time_ms), (0x11, 0x1_0000_0001, 1000));
        assert!(txns[1].ops.is_empty());
        assert_eq!(txns[2].ops, [Op::Create { path: "/chaos/rw/_c_w-__READ__0000000003".into(), ephemeral: true }]);
        assert_eq!(txns[4].ops, [Op::CloseSession]);

        let text = facts(&txns, &["/chaos/mutex", "/chaos/rw"]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "0x100000001 1000 0x11 create /chaos/mutex/_c_a-lock-0000000001 ephemeral",
                "0x100000003 1002 0x12 create /chaos/rw/_c_w-__READ__0000000003 ephemeral",
                "0x100000004 1003 0x13 delete /chaos/mutex/_c_a-lock-0000000001",
                "0x200000001 1010 0x12 close",
            ]
        );
        let back: Vec<Fact> = lines.iter().map(|l| parse_fact(l).unwrap().unwrap()).collect();
        assert_eq!(back[3], Fact { zxid: 0x2_0000_0001, time_ms: 1010, session: 0x12, op: Op::CloseSession });
        assert!(parse_fact("# a comment").is_none());
        assert!(parse_fact("0x1 12 0x2 create /a/b sideways").unwrap().is_err());

        // A bad checksum ends the file too.
        let mut bad = Writer::new();
        bad.txn(0x11, 1, 1, DELETE, &string("/a/b"));
        bad.0[16] ^= 1;
        assert_eq!(parse_log(&bad.0).unwrap(), []);
        assert!(parse_log(b"not a log at all").is_err());
    }

    #[test]
    fn committed_keeps_what_a_majority_logged() {
        let t = |zxid, path: &str| Txn {
            zxid,
            time_ms: 5,
            session: 1,
            kind: DELETE,
            ops: vec![Op::Delete { path: path.to_string() }],
        };
        let logs = vec![vec![t(1, "/a/x"), t(2, "/a/y")], vec![t(1, "/a/x")], vec![t(1, "/a/x"), t(3, "/a/z")]];
        assert_eq!(committed(&logs).unwrap(), [t(1, "/a/x")]);
        let logs = vec![vec![t(1, "/a/x"), t(2, "/a/y")], vec![t(2, "/a/y")], vec![]];
        assert_eq!(committed(&logs).unwrap(), [t(2, "/a/y")]);
        assert!(committed(&[vec![t(1, "/a/x")], vec![t(1, "/a/other")]]).is_err());
    }
}
