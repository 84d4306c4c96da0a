//! Who had the right to hold, by the server's record: the chaos soak's judge (`chaos-resource`)
//! asks this at every overlap (and late or missing lost signal) between two holders, instead of
//! blaming whoever began first.
//!
//! The record is the lock paths' story from the ensemble's transaction logs
//! ([`crate::txnlog::facts`]): each lock node's create (zxid = its czxid, the fencing token its
//! holder reports; its session) and its end (a delete, or its session's close or expiry), each
//! with the leader's clock. A node *holds rightly* at a moment if it exists then and no node that
//! conflicts with it is ahead of it in the queue then. The queue is the one every client of the
//! path keeps (Curator, kazoo, zklock; README "One lock path, every client"), read here from the
//! names on its own, not with zklock's code: the number after the marker (`-lock-`, `__WRIT__`,
//! kazoo's `__lock__`: exclusive; `__READ__`, kazoo's `__rlock__`: a reader, which conflicts only
//! with exclusive nodes), a reader right behind an exclusive node of the same number (a
//! downgrade's read node carries its write node's number). A name of no lock has no place: a
//! holder on one cannot be judged, and it holds no one back.
//!
//! A hold rests on the node whose czxid is its token; once it downgraded (`DOWNGRADE`), also on
//! the read node its session made on the path while that write node still existed (its own
//! write node does not hold it back). A read node made after the write node was gone (Curator
//! 5.5+'s race, README) carries no right over from the hold.
//!
//! Moments come from two clocks of one machine: the resource's wall clock when it received a
//! message (ms since the epoch, sub-millisecond) and the leader's when it made a txn (whole ms,
//! so the true time is in `[ms, ms + 1)`). A txn is before a moment if its ms + 1 is at most the
//! moment, after it if its ms is at least the moment, and too close to call otherwise: an answer
//! that depends on one is [`Tri::Unsure`]. A txn's time is when the leader made it, a little
//! before it was committed and anyone could see it.

use std::collections::HashMap;

use crate::txnlog::{parse_fact, Op};

/// Yes, no, or the record cannot tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tri {
    Yes,
    No,
    Unsure,
}

impl Tri {
    pub fn and(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::No, _) | (_, Tri::No) => Tri::No,
            (Tri::Yes, Tri::Yes) => Tri::Yes,
            _ => Tri::Unsure,
        }
    }

    pub fn or(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::Yes, _) | (_, Tri::Yes) => Tri::Yes,
            (Tri::No, Tri::No) => Tri::No,
            _ => Tri::Unsure,
        }
    }
}

/// Where a txn made at `ms` (the leader's whole ms) falls against `moment` (ms, the same clock).
fn when(ms: i64, moment: f64) -> Tri {
    if (ms + 1) as f64 <= moment {
        Tri::Yes // before
    } else if ms as f64 >= moment {
        Tri::No // after
    } else {
        Tri::Unsure
    }
}

/// A lock node's place in the queue (its number, then false for an exclusive node, true for a
/// reader's) by its name, or `None` if the name has no place (see the module documentation).
pub fn queue_key(name: &str) -> Option<(i64, bool)> {
    const MARKERS: [(&str, bool); 5] =
        [("-lock-", false), ("__WRIT__", false), ("__lock__", false), ("__READ__", true), ("__rlock__", true)];
    let (at, marker, read) =
        MARKERS.iter().filter_map(|&(m, read)| name.rfind(m).map(|at| (at, m, read))).max_by_key(|&(at, ..)| at)?;
    let number = &name[at + marker.len()..];
    if number.len() != 10 || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((number.parse().ok()?, read))
}

/// A child of a lock path, as the record tells it.
#[derive(Clone, Debug)]
struct Node {
    name: String,
    czxid: i64,
    created_ms: i64,
    /// Its owner if ephemeral, else 0.
    session: i64,
    /// zxid, time, and how it went ("deleted by 0x..", "its session ended").
    ended: Option<(i64, i64, String)>,
    key: Option<(i64, bool)>,
}

impl Node {
    /// Whether the node exists at `moment`.
    fn exists(&self, moment: f64) -> Tri {
        let made = when(self.created_ms, moment);
        let gone = self.ended.as_ref().map_or(Tri::No, |&(_, ms, _)| when(ms, moment));
        made.and(match gone {
            Tri::Yes => Tri::No,
            Tri::No => Tri::Yes,
            Tri::Unsure => Tri::Unsure,
        })
    }

    fn describe(&self) -> String {
        let end = match &self.ended {
            Some((zxid, ms, how)) => format!(", {how} at {zxid:#x} ({ms})"),
            None => String::new(),
        };
        format!("{} (czxid {:#x} at {}, session {:#x}{end})", self.name, self.czxid, self.created_ms, self.session)
    }
}

/// A hold as the judge needs it.
#[derive(Clone, Debug)]
pub struct Claimant {
    /// The lock path (the parent of its node).
    pub path: String,
    /// Its fencing token: its node's czxid.
    pub token: i64,
    /// It said DOWNGRADE: its read node carries it on once its write node is released.
    pub downgraded: bool,
    /// When the resource received its BEGIN (ms since the epoch): it was granted before.
    pub began_ms: f64,
}

/// The lock paths' story (see the module documentation).
#[derive(Default)]
pub struct ServerRecord {
    /// By lock path, in creation order.
    nodes: HashMap<String, Vec<Node>>,
    by_czxid: HashMap<(String, i64), usize>,
    pub events: usize,
}

impl ServerRecord {
    /// Reads the facts text of [`crate::txnlog::facts`].
    pub fn parse(text: &str) -> Result<ServerRecord, String> {
        let mut record = ServerRecord::default();
        let mut live: HashMap<String, (String, usize)> = HashMap::new();
        let mut by_session: HashMap<i64, Vec<String>> = HashMap::new();
        let mut last_zxid = i64::MIN;
        for (n, line) in text.lines().enumerate() {
            let Some(fact) = parse_fact(line) else { continue };
            let fact = fact.map_err(|e| format!("line {}: {e}", n + 1))?;
            if fact.zxid < last_zxid {
                return Err(format!("line {}: zxid {:#x} after {last_zxid:#x}", n + 1, fact.zxid));
            }
            last_zxid = fact.zxid;
            record.events += 1;
            let mut end = |full: &str, how: String, record: &mut ServerRecord| {
                if let Some((parent, i)) = live.remove(full) {
                    record.nodes.get_mut(&parent).expect("parent")[i].ended = Some((fact.zxid, fact.time_ms, how));
                }
            };
            match &fact.op {
                Op::Create { path, ephemeral } => {
                    let Some((parent, name)) = path.rsplit_once('/') else {
                        return Err(format!("line {}: no parent in {path:?}", n + 1));
                    };
                    if live.contains_key(path) {
                        return Err(format!("line {}: {path} made again while it exists", n + 1));
                    }
                    let nodes = record.nodes.entry(parent.to_string()).or_default();
                    nodes.push(Node {
                        name: name.to_string(),
                        czxid: fact.zxid,
                        created_ms: fact.time_ms,
                        session: if *ephemeral { fact.session } else { 0 },
                        ended: None,
                        key: queue_key(name),
                    });
                    record.by_czxid.insert((parent.to_string(), fact.zxid), nodes.len() - 1);
                    live.insert(path.clone(), (parent.to_string(), nodes.len() - 1));
                    if *ephemeral {
                        by_session.entry(fact.session).or_default().push(path.clone());
                    }
                }
                Op::Delete { path } => end(path, format!("deleted by {:#x}", fact.session), &mut record),
                Op::CloseSession => {
                    for path in by_session.remove(&fact.session).unwrap_or_default() {
                        end(&path, "its session ended".to_string(), &mut record);
                    }
                }
            }
        }
        Ok(record)
    }

    /// Lock nodes in the record.
    pub fn node_count(&self) -> usize {
        self.nodes.values().map(Vec::len).sum()
    }

    /// Whether the record has a node of `path` made at `czxid`.
    pub fn has_node(&self, path: &str, czxid: i64) -> bool {
        self.by_czxid.contains_key(&(path.to_string(), czxid))
    }

    /// Whether no node that conflicts with node `n` of `path` was ahead of it at `moment`, and
    /// what the record says.
    fn first(&self, path: &str, n: usize, moment: f64) -> (Tri, String) {
        let nodes = &self.nodes[path];
        let node = &nodes[n];
        let Some(key) = node.key else {
            return (Tri::Unsure, format!("its node {} has no place in the queue", node.name));
        };
        let mut unsure = None;
        for (i, b) in nodes.iter().enumerate() {
            let Some(bkey) = b.key else { continue };
            if i == n || bkey >= key || (bkey.1 && key.1) {
                continue;
            }
            match b.exists(moment) {
                Tri::Yes => return (Tri::No, format!("let in behind {}", b.describe())),
                Tri::Unsure => unsure = Some(b),
                Tri::No => {}
            }
        }
        match unsure {
            Some(b) => (Tri::Unsure, format!("too close to call whether it was let in behind {}", b.describe())),
            None => (Tri::Yes, "let in first".to_string()),
        }
    }

    /// Whether `hold` held rightly at `moment`, and what the record says: its node was first
    /// when it began (the resource received its BEGIN after it was let in; a node made ahead of
    /// it later takes nothing from it, its maker is the one at fault), and it still existed at
    /// `moment`; or, once it downgraded, its read node carries it on (see the module
    /// documentation).
    pub fn holds_rightly(&self, hold: &Claimant, moment: f64) -> (Tri, String) {
        let Some(&w) = self.by_czxid.get(&(hold.path.clone(), hold.token)) else {
            return (Tri::Unsure, format!("no node of {} has czxid {:#x}", hold.path, hold.token));
        };
        let nodes = &self.nodes[&hold.path];
        let write = &nodes[w];
        let (let_in, how) = self.first(&hold.path, w, hold.began_ms);
        let there = write.exists(moment);
        let state = match there {
            Tri::Yes => "still there",
            Tri::No => "gone by then",
            Tri::Unsure => "gone within that ms or not",
        };
        let mut why = format!("its node {}: {how}, {state}", write.describe());
        let mut right = let_in.and(there);
        if there != Tri::Yes && hold.downgraded {
            // The read node its session made while the write node lived, first of its kind
            // once the write node was gone (by zxid).
            let end = write.ended.as_ref().map_or(i64::MAX, |&(zxid, ..)| zxid);
            let read = nodes.iter().position(|r| {
                r.key.is_some_and(|k| k.1) && r.session == write.session && r.czxid > write.czxid && r.czxid < end
            });
            match read {
                Some(r) => {
                    let read_node = &nodes[r];
                    let rkey = read_node.key.expect("a read key");
                    let ahead = nodes.iter().enumerate().find(|&(i, b)| {
                        i != r
                            && i != w
                            && b.key.is_some_and(|k| k < rkey && !k.1)
                            && b.czxid < end
                            && b.ended.as_ref().is_none_or(|&(zxid, ..)| zxid > end)
                    });
                    let carried = match ahead {
                        Some((_, b)) => {
                            why += &format!("; its read node {} was behind {}", read_node.describe(), b.describe());
                            Tri::No
                        }
                        None => {
                            why += &format!("; its read node {}", read_node.describe());
                            read_node.exists(moment)
                        }
                    };
                    right = let_in.and(there.or(carried));
                }
                None => why += "; no read node of its session made while its write node lived",
            }
        }
        (right, why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_key_is_the_number_after_the_last_marker() {
        assert_eq!(queue_key("_c_8d1e-77-lock-0000000012"), Some((12, false)));
        assert_eq!(queue_key("_c_x-__READ__0000000007"), Some((7, true)));
        assert_eq!(queue_key("_c_x-__WRIT__0000000007"), Some((7, false)));
        assert_eq!(queue_key("0abad917__lock__0000000042"), Some((42, false)));
        assert_eq!(queue_key("0abad917__rlock__0000000043"), Some((43, true)));
        assert_eq!(queue_key("_c_x-__WRIT__-000000007"), None);
        assert_eq!(queue_key("leases"), None);
    }

    fn hold(path: &str, token: i64, began_ms: f64) -> Claimant {
        Claimant { path: path.to_string(), token, downgraded: false, began_ms }
    }

    #[test]
    fn a_hold_holds_rightly_if_let_in_first_while_its_node_is_there() {
        let record = ServerRecord::parse(
            "0x1 100 0xa create /m/_c_a-lock-0000000001 ephemeral\n\
             0x2 110 0xb create /m/_c_b-lock-0000000002 ephemeral\n\
             0x3 120 0xa close\n",
        )
        .unwrap();
        assert_eq!((record.events, record.node_count()), (3, 2));
        let a = hold("/m", 1, 102.0);
        assert_eq!(record.holds_rightly(&a, 115.0).0, Tri::Yes);
        assert_eq!(record.holds_rightly(&a, 120.5).0, Tri::Unsure, "its session ended within that ms");
        let (right, why) = record.holds_rightly(&a, 121.0);
        assert_eq!(right, Tri::No, "{why}");
        assert!(why.contains("its session ended at 0x3 (120)): let in first, gone by then"), "{why}");
        // b let in while a's node was first: it holds no right, whenever it is asked.
        let early = hold("/m", 2, 112.0);
        let (right, why) = record.holds_rightly(&early, 115.0);
        assert_eq!(right, Tri::No, "{why}");
        assert!(why.contains("let in behind _c_a-lock-0000000001"), "{why}");
        assert_eq!(record.holds_rightly(&early, 125.0).0, Tri::No, "even once a's node is gone");
        assert_eq!(record.holds_rightly(&hold("/m", 2, 122.0), 125.0).0, Tri::Yes);
        assert_eq!(record.holds_rightly(&hold("/m", 2, 120.5), 125.0).0, Tri::Unsure, "let in within the ms");
        assert_eq!(record.holds_rightly(&hold("/m", 9, 122.0), 125.0).0, Tri::Unsure, "no such node");
        assert!(record.has_node("/m", 2) && !record.has_node("/m", 9) && !record.has_node("/rw", 2));
    }

    #[test]
    fn readers_share_and_a_downgrade_is_carried_by_its_read_node() {
        let record = ServerRecord::parse(
            "0x4 130 0xc create /rw/_c_w-__WRIT__0000000003 ephemeral\n\
             0x5 131 0xd create /rw/_c_r-__READ__0000000004 ephemeral\n\
             0x6 132 0xe create /rw/k__rlock__0000000005 ephemeral\n\
             0x7 133 0xf create /rw/_c_x-__WRIT__0000000006 ephemeral\n\
             0x8 140 0xc create /rw/_c_w-__READ__0000000003 ephemeral\n\
             0x9 150 0xc delete /rw/_c_w-__WRIT__0000000003\n\
             0xa 160 0xd delete /rw/_c_r-__READ__0000000004\n\
             0xb 161 0xe delete /rw/k__rlock__0000000005\n",
        )
        .unwrap();
        let w = hold("/rw", 4, 131.5);
        assert_eq!(record.holds_rightly(&w, 145.0).0, Tri::Yes);
        assert_eq!(record.holds_rightly(&hold("/rw", 5, 135.0), 145.0).0, Tri::No, "a reader behind the writer");
        assert_eq!(record.holds_rightly(&w, 155.0).0, Tri::No, "its write node is gone and it did not downgrade");
        let downgraded = Claimant { downgraded: true, ..w };
        assert_eq!(record.holds_rightly(&downgraded, 155.0).0, Tri::Yes, "its read node carries it");
        assert_eq!(record.holds_rightly(&hold("/rw", 5, 152.0), 155.0).0, Tri::Yes, "readers share");
        assert_eq!(record.holds_rightly(&hold("/rw", 6, 152.0), 155.0).0, Tri::Yes, "kazoo's reader too");
        let (right, why) = record.holds_rightly(&hold("/rw", 7, 162.0), 165.0);
        assert_eq!(right, Tri::No, "the writer behind the downgrade's read node: {why}");
        assert!(why.contains("_c_w-__READ__0000000003"), "{why}");
    }

    /// Curator 5.4's downgrade makes a read node with a number of its own, behind the writers
    /// already waiting; Curator 5.5+'s race makes one after the write node was deleted: neither
    /// carries the hold on.
    #[test]
    fn a_read_node_behind_a_waiting_writer_or_made_after_the_write_node_carries_no_right() {
        let record = ServerRecord::parse(
            "0x1 100 0xc create /rw/_c_w-__WRIT__0000000001 ephemeral\n\
             0x2 110 0xd create /rw/_c_x-__WRIT__0000000002 ephemeral\n\
             0x3 115 0xc create /rw/_c_w-__READ__0000000003 ephemeral\n\
             0x4 120 0xc delete /rw/_c_w-__WRIT__0000000001\n\
             0x5 130 0xc close\n\
             0x6 140 0xd close\n\
             0x7 200 0x1c create /rw/_c_v-__WRIT__0000000004 ephemeral\n\
             0x8 210 0x1d create /rw/_c_y-__WRIT__0000000005 ephemeral\n\
             0x9 220 0xf delete /rw/_c_v-__WRIT__0000000004\n\
             0xa 230 0x1c create /rw/_c_v-__READ__0000000004 ephemeral\n",
        )
        .unwrap();
        let old = Claimant { downgraded: true, ..hold("/rw", 1, 101.0) };
        assert_eq!(record.holds_rightly(&old, 117.0).0, Tri::Yes, "its write node is still there");
        let (right, why) = record.holds_rightly(&old, 125.0);
        assert_eq!(right, Tri::No, "{why}");
        assert!(why.contains("_c_w-__READ__0000000003") && why.contains("behind _c_x-__WRIT__0000000002"), "{why}");
        assert_eq!(record.holds_rightly(&hold("/rw", 2, 122.0), 125.0).0, Tri::Yes, "the writer let in");

        let raced = Claimant { downgraded: true, ..hold("/rw", 7, 201.0) };
        let (right, why) = record.holds_rightly(&raced, 235.0);
        assert_eq!(right, Tri::No, "{why}");
        assert!(why.contains("no read node of its session made while its write node lived"), "{why}");
        let (right, why) = record.holds_rightly(&hold("/rw", 8, 222.0), 235.0);
        assert_eq!(right, Tri::Yes, "let in before the read node was made ahead of it: {why}");
    }

    #[test]
    fn a_record_out_of_order_or_malformed_is_refused() {
        assert!(ServerRecord::parse("0x2 1 0xa close\n0x1 1 0xa close\n").is_err());
        assert!(ServerRecord::parse("0x2 1 0xa open /m/x\n").is_err());
        assert!(ServerRecord::parse("0x1 1 0xa create /m/x ephemeral\n0x2 1 0xa create /m/x ephemeral\n").is_err());
    }
}
