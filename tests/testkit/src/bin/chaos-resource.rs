//! The chaos soak's fenced resource: a small TCP server that lock holders write to, which accepts
//! a write only with a fencing token at least the highest it has seen, and which judges, from the
//! order in which it receives the holders' messages, whether two holders ever acted at once, and,
//! from the server's record, which of them had no right to.
//!
//!   chaos-resource [--log FILE]
//!
//! It listens on a free `127.0.0.1` port and prints `LISTEN 127.0.0.1:PORT`. Contenders connect
//! and speak the protocol of the soak (one line per message, see `scripts/chaos`):
//! `WAIT path mode ms outcome`, `BEGIN path mode token lang name` (reply `OK`; mode `x`, `r`,
//! `w`, or `l` for a lease of the semaphore at `SEMAPHORE_PATH`), `WRITE path
//! token` / `READ path token` (reply `OK` or `STALE`), `DOWNGRADE path token` (reply `OK`), `END
//! path token` (reply `OK`), `LOST path token reason` (reply `OK`), `ZOMBIE-WRITE path token`
//! (reply `OK` or `STALE`), `ERROR kind`. A connection that closes ends its open holds.
//!
//! * `DOWNGRADE`: a write hold (mode `w`) took the read side and is about to release the write
//!   side (Curator 5.5+'s and zklock's downgrade): from this message on the hold is judged as a
//!   read (mode `r`) with the same token, so it may only READ; a writer that operates while it is
//!   open overlaps it, a reader does not. Sent before the write side is released, as END is.
//! * `ZOMBIE-WRITE`: a hold this connection reported LOST writes anyway with its old token, as a
//!   process that missed (or ignored) its loss would after a pause. It is the test of the fence:
//!   it must be answered STALE if any hold on the path has begun since the zombie's did. It is
//!   not an operation of an open hold, so it takes part in no overlap or loss figure; only a
//!   write (`w`/`x`) hold may do it, and only after its LOST.
//!
//! # Fencing
//! Per path the resource keeps the highest token seen (every BEGIN's and every accepted write's)
//! and the highest writer token seen (BEGINs of `w`/`x` holds and accepted writes). A WRITE or
//! ZOMBIE-WRITE is accepted only with a token at least the highest seen, a READ only with one at
//! least the highest writer token (readers that share have unordered tokens). A write is a stale
//! write attempted if its token is below the highest seen or a hold on its path has begun since
//! its hold did (superseded); "stale writes accepted" (must be 0) counts those let through.
//!
//! The orchestrator drives it on stdin, one command per line, one reply line each:
//! * `MARK label`  a leader was killed now: the time to the next BEGIN is a recovery time (`OK`);
//! * `NOTE text`   written to the event log, to read faults and holds in one timeline (`OK`);
//! * `HOLDERS`     `HOLDERS name...`: the contenders that hold something now;
//! * `PIN name ms [label]`  the next BEGIN of contender `name` is answered `OK PIN ms`: that
//!   hold lasts `ms` (the orchestrator stalls or cuts the holder meanwhile); how each pinned hold
//!   ended is counted by `label` and language (`OK`);
//! * `UNPIN name`  drops a pin not yet given: `UNPIN cleared`, or `UNPIN none` if there was none;
//! * `PINNED`      `PINNED name...`: the contenders that hold a pinned hold now;
//! * `COUNT`       `COUNT n`: holds begun so far;
//! * `OPDELETE path token`  an operator is about to delete the lock node of the open hold on
//!   `path` with that token (its node's creation zxid): `OPDELETE name` (the hold is marked a
//!   victim from now on, see below), or `OPDELETE none` if no such hold is open;
//! * `OPDELETE-DONE path token outcome`  how that delete went: `deleted`, `failed` (unknown
//!   whether it was applied: the mark stays), `nonode` or `skipped` (not deleted: the mark goes);
//! * `STOP`        the soak is over: contenders are about to be shut down, so losses caused by
//!   closing them are not judged; holds still open are judged as if they ended now (`OK`);
//! * `FACTS file`  the server's record of the lock paths (`zklock_testkit::txnlog::facts`, read
//!   from the ensemble's transaction logs), which decides the claims (see "Who is at fault"):
//!   `FACTS events N nodes M`, or `ERR FACTS why` (then every claim is unjudged);
//! * `REPORT`      every figure, as one line of JSON.
//!
//! It exits when stdin reaches end of file, so it never outlives the orchestrator.
//!
//! # Figures (receipt order at the resource says what happened; the server's record, who did it)
//! For holds G and H on one path whose modes conflict (not both `r`), H begun after G:
//! * overlap: at an operation by one of them, the other is open (not ended, not lost, its
//!   connection alive) and has already operated;
//! * stale accepted: G's operation is accepted after H's first operation, or G's WRITE (or
//!   zombie write) is accepted after H began;
//! * late loss: G's LOST arrives after H's first operation;
//! * unsignalled loss: G's END arrives after H's first operation (G never learned that it lost).
//!
//! * more than max holding: at an operation by a lease (mode `l`), more than `SEMAPHORE_MAX`
//!   lease holds of its path are open and have operated, itself included. Leases do not
//!   conflict with each other (the semaphore is for `max` at once): this is their only figure,
//!   and they only READ (their tokens are not ordered among holders at once, as readers' are not).
//!
//! A pinned hold G that ended LOST is "taken over" if a conflicting H begun after G operated
//! before G's pinned time was up: the lock moved on while G would still have acted had it not
//! been told, i.e. the case the late-loss figure is about did happen.
//!
//! # Operator deletes
//! An outside client deleting a holder's node takes its lock away: the server tells the victim
//! G (its watch on its own node) and the next waiter H at the same time, and H may act before G
//! has heard, which no client can prevent. So for a marked victim G (`OPDELETE`), the overlaps,
//! late losses and unsignalled losses that the server's record charges it with against a hold H
//! whose first operation came after the mark are counted in the class `operator_delete`, not in
//! G's language's: they
//! are reported, with how each victim learned of it (`told_in_time`: LOST before any later
//! conflicting hold operated; `told_late`; `ended_before_next`: it ended before anyone else
//! acted and before it was told; `ended_untold_after_next`; `killed`; `open_at_stop`) and the
//! time from the mark to its LOST. Stale writes accepted stay the fence's figure: a victim's
//! write after H began carries a token below H's and must be refused whatever the cause.
//!
//! A hold's mode is the one it had at the operation judged: a downgraded hold (`DOWNGRADE`) is a
//! writer up to that message and a reader from then on, so a reader H that first operated after
//! G's downgrade does not conflict with G.
//!
//! # Who is at fault
//! An overlap, a late loss and an unsignalled loss say that G and H both held at one moment (the
//! operation that showed the overlap, or H's first operation): a claim, which the server's record
//! (`FACTS`) decides at REPORT, whoever began first. Each party held rightly at that moment if its
//! lock node (the node whose czxid is its token) was first in the server's queue, among the nodes
//! it conflicts with, when the resource received its BEGIN (it was let in before), and the node
//! still existed at the moment (not deleted, its session not ended), or once it downgraded, the
//! read node its session made while the write node lived, first once the write node was gone
//! (`zklock_testkit::chaos::entitlement`, which reads the queue from the node names on its own,
//! not with zklock's code). A party that held without the right is charged with the figure, in
//! its own class: G kept acting after its node or session was gone; H was let in while a node
//! ahead of it still rightly held (a zklock holder let in beside a live Curator holder is
//! zklock's); both, if neither had the right. A claim whose parties both held rightly by the
//! record, or where the record cannot tell (no record, a token that names no node, an event within
//! the same millisecond as the moment), is `unjudged`, counted by figure, and `with_zklock` (must
//! be 0: the soak fails closed) when a zklock holder is in it; a party the record does say held
//! without the right is charged all the same.
//!
//! Figures whose offender is a peer's holder (`curator`, `curator57`, `kazoo`: not zklock) are
//! reported apart, by language, and those between a Curator holder and a kazoo holder apart again
//! (`curator~kazoo`: Curator does not know kazoo's node names, see `pair_class`). Stale writes
//! accepted and more than max holding are the earlier (the operating) holder's, as the fence's and
//! the semaphore's figures. A zombie write accepted after another hold began on its path is
//! counted apart too (`zombie_writes_accepted_superseded`), whoever the zombie is: it is the fence
//! that failed.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fs::File;
use std::io::{BufRead, BufReader, LineWriter, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use zklock_testkit::chaos::entitlement::{Claimant, ServerRecord, Tri};
use zklock_testkit::chaos::SEMAPHORE_MAX;

/// How many violations are described in full in the report.
const DETAILS_KEPT: usize = 50;

type HoldId = u64;
type ConnId = u64;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Violation {
    Overlap,
    StaleAccepted,
    LateLoss,
    UnsignalledLoss,
    OverMax,
}

impl Violation {
    const ALL: [Violation; 5] = [
        Violation::Overlap,
        Violation::StaleAccepted,
        Violation::LateLoss,
        Violation::UnsignalledLoss,
        Violation::OverMax,
    ];

    fn key(self) -> &'static str {
        match self {
            Violation::Overlap => "overlaps",
            Violation::StaleAccepted => "stale_writes_accepted",
            Violation::LateLoss => "late_lost_signals",
            Violation::UnsignalledLoss => "unsignalled_losses",
            Violation::OverMax => "more_than_max_holding",
        }
    }
}

struct Hold {
    conn: ConnId,
    path: String,
    /// The mode now: `r` once downgraded.
    mode: char,
    /// The mode it began with.
    began_mode: char,
    /// The event (message receipt number) of its DOWNGRADE.
    downgraded_ev: Option<u64>,
    /// The event of its first operation.
    first_op_ev: Option<u64>,
    token: i64,
    lang: String,
    name: String,
    /// Order of BEGIN receipt over all paths.
    seq: u64,
    began_ms: f64,
    /// The wall clock (ms since the epoch) at its BEGIN and its first operation: the server's
    /// record is judged against it.
    began_unix: f64,
    first_op_unix: Option<f64>,
    first_op_ms: Option<f64>,
    ops: u32,
    /// Not ended, not lost, connection alive.
    open: bool,
    /// How it stopped being open, and when.
    ended: Option<(&'static str, f64)>,
    /// At most one figure of each kind per hold as offender.
    flagged: Vec<Violation>,
    /// `PIN` label and the end of the pinned time (resource clock), for a pinned hold.
    pin: Option<(String, f64)>,
    /// Marked by `OPDELETE`: the event of the mark and the victim's entry in `Figures::victims`.
    deleted: Option<(u64, usize)>,
}

impl Hold {
    /// Its mode at event `ev`.
    fn mode_at(&self, ev: u64) -> char {
        if self.downgraded_ev.is_some_and(|d| d < ev) {
            'r'
        } else {
            self.began_mode
        }
    }

    fn describe(&self) -> String {
        let first = self.first_op_ms.map_or("none".to_string(), |t| format!("{t:.1}ms"));
        let ended = self.ended.map_or("open".to_string(), |(how, t)| format!("{how} at {t:.1}ms"));
        let mode = if self.downgraded_ev.is_some() { "w->r" } else { &self.mode.to_string() };
        format!(
            "{} ({}) {} mode {mode} token {} began {:.1}ms first op {} ops {} {}",
            self.name, self.lang, self.path, self.token, self.began_ms, first, self.ops, ended
        )
    }
}

/// Whether two holds' modes exclude each other: readers share, and so do leases (up to the max,
/// judged apart).
fn conflict(a: char, b: char) -> bool {
    !(a == 'r' && b == 'r' || a == 'l' && b == 'l')
}

/// zklock's languages; every other is a peer's, whose figures are reported apart.
const ZKLOCK_LANGS: [&str; 4] = ["rust", "c", "python", "node"];

/// The class of a violation between the holders of languages `g` (the offender) and `h`: the
/// offender's, except between Curator's and kazoo's holders: "curator~kazoo" (Curator orders a
/// lock's children by the sequence after its own marker, `lock-`, `__READ__`, `__WRIT__`, and
/// kazoo's `__lock__`/`__rlock__` nodes have none of them, so Curator does not see them in their
/// place; kazoo sees Curator's with `extra_lock_patterns`).
fn pair_class(g: &str, h: &str) -> String {
    fn family(lang: &str) -> &str {
        if lang.starts_with("curator") {
            "curator"
        } else {
            lang
        }
    }
    let (fg, fh) = (family(g), family(h));
    if class_of(g) != "zklock" && class_of(h) != "zklock" && fg != fh {
        let (a, b) = if fg < fh { (fg, fh) } else { (fh, fg) };
        return format!("{a}~{b}");
    }
    class_of(g).to_string()
}

/// The class a holder's violations count in: "zklock", or the peer's language.
fn class_of(lang: &str) -> &str {
    if ZKLOCK_LANGS.contains(&lang) {
        "zklock"
    } else {
        lang
    }
}

#[derive(Default)]
struct PathState {
    /// The highest token of a BEGIN or an accepted write: a WRITE needs at least this.
    max_token: i64,
    /// The highest token of a writer's (`w`/`x`) BEGIN or an accepted write: a READ needs this.
    max_write_token: i64,
    /// The `seq` of the last hold begun on the path.
    last_seq: Option<u64>,
    /// Holds from the oldest still open on (in BEGIN order): every hold a check may need.
    holds: VecDeque<HoldId>,
    /// Pinned holds that ended LOST before their pinned time was up: (seq, mode, lang, label,
    /// pin end), until a later conflicting hold operates (taken over) or the pinned time is up.
    pinned_lost: Vec<(u64, char, String, String, f64)>,
}

#[derive(Default)]
struct Conn {
    lang: Option<String>,
    name: Option<String>,
    alive: bool,
    open: HashMap<(String, i64), HoldId>,
    /// Recently ended holds, to tell a LOST after END from a protocol error.
    ended: VecDeque<(String, i64)>,
    /// Recently lost holds, for their zombie writes: (path, token), seq, mode.
    lost_holds: VecDeque<((String, i64), u64, char)>,
    outcomes: BTreeMap<String, u64>,
    errors: BTreeMap<String, u64>,
    lost: BTreeMap<String, u64>,
    waits_ms: Vec<f64>,
    stale_writes_rejected: u64,
    stale_reads_rejected: u64,
    stale_writes_attempted: u64,
    accepted: u64,
    downgrades: u64,
    zombie_writes: u64,
    zombie_writes_rejected: u64,
}

#[derive(Default)]
struct Figures {
    /// by class ("zklock", or a peer's language), by violation
    violations: BTreeMap<String, BTreeMap<&'static str, u64>>,
    details: Vec<String>,
    protocol_errors: u64,
    protocol_error_examples: Vec<String>,
    /// Zombie writes accepted although a hold on the path had begun since (must be 0).
    zombie_accepted_superseded: u64,
    lost_after_end: u64,
    closed_holding: u64,
    handoffs: BTreeMap<String, u64>,
    handoffs_total: u64,
    recoveries: Vec<(String, f64, f64)>,
    pending_marks: Vec<(String, f64)>,
    /// The most lease holds open and operated at once, at an operation.
    most_leases_holding: u64,
    /// Lease holds begun (mode `l`).
    lease_holds: u64,
    /// Pinned holds by label, by language, by how they ended (`ended`, `lost`, `killed`,
    /// `open_at_stop`, and `taken_over` among the `lost`).
    pinned: BTreeMap<String, BTreeMap<String, BTreeMap<&'static str, u64>>>,
    /// The holds whose node an operator deleted (`OPDELETE`), in the order marked.
    victims: Vec<Victim>,
}

/// A hold whose node an operator deleted, and how it learned of it.
struct Victim {
    path: String,
    token: i64,
    lang: String,
    marked_ms: f64,
    /// False once `OPDELETE-DONE` said the node was not deleted after all.
    deleted: bool,
    /// How it stopped being open (see the module documentation), and when.
    outcome: Option<(&'static str, f64)>,
}

/// The class of violations a victim of an operator delete offends after the delete.
const OPERATOR_DELETE: &str = "operator_delete";

/// Two holds that both held (an overlap, or a loss told late or never): who was at fault is
/// the server's record's to say (`FACTS`), at REPORT.
struct Claim {
    v: Violation,
    /// The hold begun first, then the other, as they were when it was seen.
    parties: [Party; 2],
    /// When both held (the wall clock, ms since the epoch): the operation that showed the
    /// overlap, or the later hold's first operation.
    moment: f64,
    /// The resource's clock then, and what showed it (for the description).
    at_ms: f64,
    at: String,
}

struct Party {
    lang: String,
    claimant: Claimant,
    /// Its `OPDELETE` mark then: (event, victim).
    mark: Option<(u64, usize)>,
    /// The event of its first operation.
    first_op_ev: u64,
    text: String,
}

/// The claims judged (see `State::judge`).
#[derive(Default)]
struct Verdicts {
    /// By class, by figure: each party the record says held without the right is charged.
    violations: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// By figure: claims the record cannot settle (a party it cannot tell, or no party without
    /// the right).
    unjudged: BTreeMap<&'static str, u64>,
    /// Unjudged claims with a zklock holder in them (fail the soak).
    unjudged_with_zklock: u64,
    judged: u64,
    details: Vec<String>,
}

/// The wall clock, ms since the epoch (what the server's record is stamped with).
fn unix_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

struct State {
    t0: Instant,
    frozen: bool,
    next_hold: HoldId,
    next_seq: u64,
    /// Messages received so far: the receipt order the judging rules go by.
    ev: u64,
    holds: HashMap<HoldId, Hold>,
    paths: HashMap<String, PathState>,
    conns: HashMap<ConnId, Conn>,
    overlap_pairs: HashSet<(HoldId, HoldId)>,
    /// Overlaps, late and unsignalled losses seen, for the server's record to judge.
    claims: Vec<Claim>,
    /// The server's record (`FACTS`), or why it could not be read.
    record: Option<Result<ServerRecord, String>>,
    /// The path and token of every lock hold begun (not leases), to check the record against.
    begun: Vec<(String, i64)>,
    /// Pins not yet given, by contender name: (ms, label).
    pins: HashMap<String, (u64, String)>,
    fig: Figures,
    log: Option<LineWriter<File>>,
}

impl State {
    fn now_ms(&self) -> f64 {
        self.t0.elapsed().as_secs_f64() * 1000.0
    }

    fn log(&mut self, who: &str, line: &str) {
        let t = self.now_ms();
        if let Some(log) = &mut self.log {
            let _ = writeln!(log, "{t:.1} {who} {line}");
        }
    }

    fn protocol_error(&mut self, conn: ConnId, what: String) {
        self.fig.protocol_errors += 1;
        if self.fig.protocol_error_examples.len() < 20 {
            self.fig.protocol_error_examples.push(format!("conn {conn}: {what}"));
        }
        self.log(&format!("c{conn}"), &format!("PROTOCOL-ERROR {what}"));
    }

    /// Records violation `v` between the holds `g` and `h` (`h` began after `g`). An overlap, a
    /// late or an unsignalled loss is a claim the server's record decides at REPORT (see the
    /// module documentation); the others are `g`'s, now.
    fn violation(&mut self, v: Violation, g: HoldId, h: HoldId, at: &str) {
        if matches!(v, Violation::Overlap | Violation::LateLoss | Violation::UnsignalledLoss) {
            return self.claim(v, g, h, at);
        }
        let (gh, hh) = (&self.holds[&g], &self.holds[&h]);
        let class = pair_class(&gh.lang, &hh.lang);
        let text = format!(
            "{} at {:.1}ms ({at}): offender {} | other {}",
            v.key(),
            self.now_ms(),
            gh.describe(),
            hh.describe()
        );
        *self.fig.violations.entry(class.clone()).or_default().entry(v.key()).or_default() += 1;
        self.log("VIOLATION", &format!("[{class}] {text}"));
        if self.fig.details.len() < DETAILS_KEPT {
            self.fig.details.push(format!("[{class}] {text}"));
        }
        eprintln!("chaos-resource: VIOLATION [{class}] {text}");
    }

    /// Records a claim: holds `g` and `h` (begun after `g`) both held, at the operation being
    /// judged (an overlap) or at `h`'s first operation (`g`'s loss told late, or never).
    fn claim(&mut self, v: Violation, g: HoldId, h: HoldId, at: &str) {
        let moment = match v {
            Violation::Overlap => unix_ms(),
            _ => self.holds[&h].first_op_unix.unwrap_or_else(unix_ms),
        };
        let party = |hold: &Hold| Party {
            lang: hold.lang.clone(),
            claimant: Claimant {
                path: hold.path.clone(),
                token: hold.token,
                downgraded: hold.downgraded_ev.is_some(),
                began_ms: hold.began_unix,
            },
            mark: hold.deleted,
            // (its first operation may be the one being judged, not recorded yet: the latest event)
            first_op_ev: hold.first_op_ev.unwrap_or(self.ev),
            text: hold.describe(),
        };
        let claim = Claim {
            v,
            parties: [party(&self.holds[&g]), party(&self.holds[&h])],
            moment,
            at_ms: self.now_ms(),
            at: at.to_string(),
        };
        let text = format!(
            "{} at {:.1}ms ({at}): {} | {}",
            v.key(),
            claim.at_ms,
            claim.parties[0].text,
            claim.parties[1].text
        );
        self.log("CLAIM", &text);
        eprintln!("chaos-resource: to judge by the server's record: {text}");
        self.claims.push(claim);
    }

    /// The claims judged by the server's record: figures by class, the unjudged ones, and their
    /// descriptions.
    fn judge(&self) -> Verdicts {
        let mut out = Verdicts::default();
        for c in &self.claims {
            let rights: Vec<(Tri, String)> = c
                .parties
                .iter()
                .map(|p| match &self.record {
                    Some(Ok(record)) => record.holds_rightly(&p.claimant, c.moment),
                    Some(Err(e)) => (Tri::Unsure, format!("the server's record could not be read: {e}")),
                    None => (Tri::Unsure, "no server's record was given (FACTS)".to_string()),
                })
                .collect();
            let server = c
                .parties
                .iter()
                .zip(&rights)
                .map(|(p, (right, why))| {
                    let verdict = match right {
                        Tri::Yes => "held rightly",
                        Tri::No => "held without the right",
                        Tri::Unsure => "cannot tell",
                    };
                    format!("{} {verdict} ({why})", p.text.split(' ').next().unwrap_or_default())
                })
                .collect::<Vec<_>>()
                .join("; ");
            let offenders: Vec<usize> = (0..2).filter(|&i| rights[i].0 == Tri::No).collect();
            for &i in &offenders {
                let (x, y) = (&c.parties[i], &c.parties[1 - i]);
                let operators = matches!(x.mark, Some((marked, victim)) if self.fig.victims[victim].deleted && y.first_op_ev > marked);
                let class = if operators { OPERATOR_DELETE.to_string() } else { pair_class(&x.lang, &y.lang) };
                *out.violations.entry(class.clone()).or_default().entry(c.v.key()).or_default() += 1;
                out.details.push(format!(
                    "[{class}] {} at {:.1}ms ({}): offender {} | other {} | server: {server}",
                    c.v.key(),
                    c.at_ms,
                    c.at,
                    x.text,
                    y.text
                ));
            }
            if offenders.is_empty() || rights.iter().any(|(right, _)| *right == Tri::Unsure) {
                *out.unjudged.entry(c.v.key()).or_default() += 1;
                if c.parties.iter().any(|p| class_of(&p.lang) == "zklock") {
                    out.unjudged_with_zklock += 1;
                }
                out.details.push(format!(
                    "[unjudged] {} at {:.1}ms ({}): {} | {} | server: {server}",
                    c.v.key(),
                    c.at_ms,
                    c.at,
                    c.parties[0].text,
                    c.parties[1].text
                ));
            } else {
                out.judged += 1;
            }
        }
        out
    }

    /// A hold begun after `g` on its path, conflicting with it, that has operated already.
    fn later_conflicting_operated(&self, g: HoldId) -> Option<HoldId> {
        let gh = &self.holds[&g];
        self.paths[&gh.path].holds.iter().copied().find(|&h| {
            let hh = &self.holds[&h];
            h != g && hh.seq > gh.seq && hh.first_op_ev.is_some_and(|ev| conflict(hh.mode_at(ev), gh.mode_at(ev)))
        })
    }

    fn flag_once(&mut self, hold: HoldId, v: Violation) -> bool {
        let h = self.holds.get_mut(&hold).expect("hold");
        if h.flagged.contains(&v) {
            return false;
        }
        h.flagged.push(v);
        true
    }

    /// Drops holds no check can need any more: those before the oldest open one.
    fn prune(&mut self, path: &str) {
        let Some(ps) = self.paths.get_mut(path) else { return };
        while let Some(&front) = ps.holds.front() {
            if self.holds[&front].open {
                break;
            }
            ps.holds.pop_front();
            self.holds.remove(&front);
        }
    }

    fn count_pinned(&mut self, label: &str, lang: &str, how: &'static str) {
        let by_lang = self.fig.pinned.entry(label.to_string()).or_default();
        *by_lang.entry(lang.to_string()).or_default().entry(how).or_default() += 1;
    }

    /// Closes `hold` (END, LOST or connection closed).
    fn close_hold(&mut self, hold: HoldId, how: &'static str) {
        let now = self.now_ms();
        if let (Some((_, victim)), false) = (self.holds[&hold].deleted, self.frozen) {
            let after_next = self.later_conflicting_operated(hold).is_some();
            let outcome = match (how, after_next) {
                ("lost", false) => "told_in_time",
                ("lost", true) => "told_late",
                ("ended", false) => "ended_before_next",
                ("ended", true) => "ended_untold_after_next",
                _ => "killed",
            };
            self.fig.victims[victim].outcome = Some((outcome, now));
        }
        let h = self.holds.get_mut(&hold).expect("hold");
        h.open = false;
        h.ended = Some((how, now));
        if let (Some((label, end)), false) = (h.pin.clone(), self.frozen) {
            let (seq, mode, lang, path) = (h.seq, h.mode, h.lang.clone(), h.path.clone());
            let key = match how {
                "ended" => "ended",
                "lost" => "lost",
                _ => "killed",
            };
            self.count_pinned(&label, &lang, key);
            if how == "lost" && end > now {
                self.paths.entry(path).or_default().pinned_lost.push((seq, mode, lang, label, end));
            }
        }
        let h = &self.holds[&hold];
        let key = (h.path.clone(), h.token);
        let (seq, mode) = (h.seq, h.mode);
        let conn = self.conns.get_mut(&h.conn).expect("conn");
        conn.open.remove(&key);
        if how == "lost" {
            conn.lost_holds.push_back((key.clone(), seq, mode));
            if conn.lost_holds.len() > 16 {
                conn.lost_holds.pop_front();
            }
        }
        conn.ended.push_back(key);
        if conn.ended.len() > 16 {
            conn.ended.pop_front();
        }
    }

    fn handle(&mut self, conn: ConnId, line: &str) -> Option<String> {
        self.handle_message(conn, line).map(|reply| match reply {
            Reply::Ok => "OK".to_string(),
            Reply::Stale => "STALE".to_string(),
            Reply::Pin(ms) => format!("OK PIN {ms}"),
        })
    }

    fn handle_message(&mut self, conn: ConnId, line: &str) -> Option<Reply> {
        self.log(&format!("c{conn}"), line);
        self.ev += 1;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["WAIT", _path, _mode, ms, outcome] => {
                let c = self.conns.get_mut(&conn).expect("conn");
                *c.outcomes.entry(outcome.to_string()).or_default() += 1;
                if *outcome == "held" {
                    match ms.parse::<f64>() {
                        Ok(ms) => c.waits_ms.push(ms),
                        Err(_) => self.protocol_error(conn, format!("bad wait time in {line:?}")),
                    }
                }
                None
            }
            ["ERROR", kind] => {
                let c = self.conns.get_mut(&conn).expect("conn");
                *c.errors.entry(kind.to_string()).or_default() += 1;
                None
            }
            ["BEGIN", path, mode, token, lang, name] => {
                let (Ok(token), Some(mode)) = (token.parse::<i64>(), parse_mode(mode)) else {
                    self.protocol_error(conn, format!("bad BEGIN {line:?}"));
                    return Some(Reply::Ok);
                };
                Some(match self.begin(conn, path, mode, token, lang, name) {
                    Some(ms) => Reply::Pin(ms),
                    None => Reply::Ok,
                })
            }
            [op @ ("WRITE" | "READ"), path, token] => {
                let Ok(token) = token.parse::<i64>() else {
                    self.protocol_error(conn, format!("bad token in {line:?}"));
                    return Some(Reply::Stale);
                };
                Some(if self.operate(conn, path, token, *op == "WRITE") { Reply::Ok } else { Reply::Stale })
            }
            ["ZOMBIE-WRITE", path, token] => {
                let Ok(token) = token.parse::<i64>() else {
                    self.protocol_error(conn, format!("bad token in {line:?}"));
                    return Some(Reply::Stale);
                };
                Some(if self.zombie_write(conn, path, token) { Reply::Ok } else { Reply::Stale })
            }
            ["DOWNGRADE", path, token] => {
                let hold = token.parse::<i64>().ok().and_then(|t| self.conns[&conn].open.get(&(path.to_string(), t)));
                match hold.copied() {
                    Some(hold) if self.holds[&hold].mode == 'w' => {
                        let ev = self.ev;
                        let h = self.holds.get_mut(&hold).expect("hold");
                        h.mode = 'r';
                        h.downgraded_ev = Some(ev);
                        self.conns.get_mut(&conn).expect("conn").downgrades += 1;
                    }
                    Some(_) => self.protocol_error(conn, format!("DOWNGRADE of a hold not of mode w: {line:?}")),
                    None => self.protocol_error(conn, format!("DOWNGRADE of no open hold: {line:?}")),
                }
                Some(Reply::Ok)
            }
            ["END", path, token] => {
                match token.parse::<i64>().ok().and_then(|t| self.conns[&conn].open.get(&(path.to_string(), t))) {
                    Some(&hold) => {
                        self.close_hold(hold, "ended");
                        if !self.frozen {
                            self.judge_end(hold);
                        }
                        self.prune(path);
                    }
                    None => self.protocol_error(conn, format!("END of no open hold: {line:?}")),
                }
                Some(Reply::Ok)
            }
            ["LOST", path, token, reason @ ..] => {
                let reason = reason.first().copied().unwrap_or("unknown");
                let key = token.parse::<i64>().ok().map(|t| (path.to_string(), t));
                match key.as_ref().and_then(|k| self.conns[&conn].open.get(k)).copied() {
                    Some(hold) => {
                        self.close_hold(hold, "lost");
                        let c = self.conns.get_mut(&conn).expect("conn");
                        *c.lost.entry(reason.to_string()).or_default() += 1;
                        if !self.frozen {
                            if let Some(h) = self.later_conflicting_operated(hold) {
                                if self.flag_once(hold, Violation::LateLoss) {
                                    self.violation(Violation::LateLoss, hold, h, "LOST");
                                }
                            }
                        }
                        self.prune(path);
                    }
                    None if key.as_ref().is_some_and(|k| self.conns[&conn].ended.contains(k)) => {
                        self.fig.lost_after_end += 1;
                    }
                    None => self.protocol_error(conn, format!("LOST of no open hold: {line:?}")),
                }
                Some(Reply::Ok)
            }
            _ => {
                self.protocol_error(conn, format!("unknown message {line:?}"));
                None
            }
        }
    }

    /// Records a hold begun; `Some(ms)` if it is pinned for `ms`.
    fn begin(&mut self, conn: ConnId, path: &str, mode: char, token: i64, lang: &str, name: &str) -> Option<u64> {
        let now = self.now_ms();
        let pin = self.pins.remove(name);
        let id = self.next_hold;
        self.next_hold += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        let c = self.conns.get_mut(&conn).expect("conn");
        c.lang = Some(lang.to_string());
        c.name = Some(name.to_string());
        if c.open.insert((path.to_string(), token), id).is_some() {
            self.protocol_error(conn, format!("second BEGIN of {path} token {token}"));
        }
        self.holds.insert(
            id,
            Hold {
                conn,
                path: path.to_string(),
                mode,
                began_mode: mode,
                downgraded_ev: None,
                first_op_ev: None,
                token,
                lang: lang.to_string(),
                name: name.to_string(),
                seq,
                began_ms: now,
                began_unix: unix_ms(),
                first_op_unix: None,
                first_op_ms: None,
                ops: 0,
                open: true,
                ended: None,
                flagged: Vec::new(),
                pin: pin.as_ref().map(|(ms, label)| (label.clone(), now + *ms as f64)),
                deleted: None,
            },
        );
        if mode != 'l' {
            self.begun.push((path.to_string(), token));
        }
        let ps = self.paths.entry(path.to_string()).or_default();
        ps.holds.push_back(id);
        ps.last_seq = Some(seq);
        // The fence learns the new holder's token now: from here on an older holder's write
        // (a zombie's above all) is refused, whether or not the new holder has written yet.
        ps.max_token = ps.max_token.max(token);
        if matches!(mode, 'w' | 'x') {
            ps.max_write_token = ps.max_write_token.max(token);
        }
        *self.fig.handoffs.entry(lang.to_string()).or_default() += 1;
        self.fig.handoffs_total += 1;
        self.fig.lease_holds += u64::from(mode == 'l');
        for (label, at) in std::mem::take(&mut self.fig.pending_marks) {
            self.fig.recoveries.push((label, at, now - at));
        }
        pin.map(|(ms, _)| ms)
    }

    /// A WRITE (`write`) or READ; true if accepted.
    fn operate(&mut self, conn: ConnId, path: &str, token: i64, write: bool) -> bool {
        let hold = self.conns[&conn].open.get(&(path.to_string(), token)).copied();
        let seq = hold.map(|h| self.holds[&h].seq);
        let ps = self.paths.entry(path.to_string()).or_default();
        // A write is stale if its token is below the highest seen, or a hold began after its own.
        let superseded = seq.is_some_and(|seq| ps.last_seq.is_some_and(|last| last > seq));
        let stale = write && (token < ps.max_token || superseded);
        let accepted = if write { token >= ps.max_token } else { token >= ps.max_write_token };
        if accepted && write {
            ps.max_token = token;
            ps.max_write_token = ps.max_write_token.max(token);
        }
        let c = self.conns.get_mut(&conn).expect("conn");
        if accepted {
            c.accepted += 1;
        } else if write {
            c.stale_writes_rejected += 1;
        } else {
            c.stale_reads_rejected += 1;
        }
        if stale {
            c.stale_writes_attempted += 1;
        }
        let Some(hold) = hold else {
            self.protocol_error(conn, format!("operation without an open hold on {path} token {token}"));
            return accepted;
        };
        let mode = self.holds[&hold].mode;
        if write == matches!(mode, 'r' | 'l') {
            self.protocol_error(conn, format!("{} by a hold of mode {mode}", if write { "WRITE" } else { "READ" }));
        }
        if !self.frozen {
            // overlap: another open, conflicting hold that has operated
            let others: Vec<HoldId> = self.paths[path]
                .holds
                .iter()
                .copied()
                .filter(|&g| {
                    let gh = &self.holds[&g];
                    g != hold && gh.open && gh.first_op_ms.is_some() && conflict(gh.mode, mode)
                })
                .collect();
            if mode == 'l' {
                let holding: Vec<HoldId> = self.paths[path]
                    .holds
                    .iter()
                    .copied()
                    .filter(|&g| {
                        let gh = &self.holds[&g];
                        g != hold && gh.open && gh.first_op_ms.is_some() && gh.mode == 'l'
                    })
                    .collect();
                let holding_now = holding.len() as u64 + 1;
                self.fig.most_leases_holding = self.fig.most_leases_holding.max(holding_now);
                if holding_now > u64::from(SEMAPHORE_MAX) && self.flag_once(hold, Violation::OverMax) {
                    self.violation(Violation::OverMax, hold, holding[0], "READ");
                }
            }
            for g in others {
                let pair = (g.min(hold), g.max(hold));
                if self.overlap_pairs.insert(pair) {
                    let (earlier, later) =
                        if self.holds[&g].seq < self.holds[&hold].seq { (g, hold) } else { (hold, g) };
                    self.violation(Violation::Overlap, earlier, later, if write { "WRITE" } else { "READ" });
                }
            }
            if accepted {
                if let Some(h) = self.later_conflicting_operated(hold) {
                    if self.flag_once(hold, Violation::StaleAccepted) {
                        self.violation(Violation::StaleAccepted, hold, h, "accepted operation");
                    }
                } else if stale {
                    let later =
                        self.paths[path].holds.iter().copied().find(|&h| self.holds[&h].seq > self.holds[&hold].seq);
                    if self.flag_once(hold, Violation::StaleAccepted) {
                        self.violation(
                            Violation::StaleAccepted,
                            hold,
                            later.unwrap_or(hold),
                            "write accepted after a later hold began",
                        );
                    }
                }
            }
        }
        let (now, ev) = (self.now_ms(), self.ev);
        let h = self.holds.get_mut(&hold).expect("hold");
        let first = h.first_op_ms.is_none();
        h.first_op_ms.get_or_insert(now);
        h.first_op_unix.get_or_insert_with(unix_ms);
        h.first_op_ev.get_or_insert(ev);
        h.ops += 1;
        if first && !self.frozen {
            self.take_over_pinned(path, hold, now);
        }
        accepted
    }

    /// A zombie write: a hold this connection reported LOST writes with its old token. True if
    /// accepted (the fence lets it through only if no hold has begun on the path since).
    fn zombie_write(&mut self, conn: ConnId, path: &str, token: i64) -> bool {
        let key = (path.to_string(), token);
        let lost = self.conns[&conn].lost_holds.iter().find(|(k, _, _)| *k == key).map(|(_, seq, mode)| (*seq, *mode));
        let ps = self.paths.entry(path.to_string()).or_default();
        let superseded = lost.is_some_and(|(seq, _)| ps.last_seq.is_some_and(|last| last > seq));
        let stale = token < ps.max_token || superseded;
        let accepted = token >= ps.max_token;
        if accepted {
            ps.max_token = token;
            ps.max_write_token = ps.max_write_token.max(token);
        }
        let c = self.conns.get_mut(&conn).expect("conn");
        c.zombie_writes += 1;
        if accepted {
            c.accepted += 1;
        } else {
            c.stale_writes_rejected += 1;
            c.zombie_writes_rejected += 1;
        }
        if stale {
            c.stale_writes_attempted += 1;
        }
        let who = format!("{} ({})", c.name.clone().unwrap_or_default(), c.lang.clone().unwrap_or_default());
        match lost {
            None => self.protocol_error(conn, format!("ZOMBIE-WRITE of no hold reported LOST: {path} token {token}")),
            Some((_, 'r' | 'l')) => {
                self.protocol_error(conn, format!("ZOMBIE-WRITE by a read or lease hold: {path} token {token}"))
            }
            Some(_) if accepted && superseded && !self.frozen => {
                self.fig.zombie_accepted_superseded += 1;
                let text = format!(
                    "zombie write accepted after a later hold began at {:.1}ms: {who} {path} token {token}",
                    self.now_ms()
                );
                self.log("VIOLATION", &text);
                eprintln!("chaos-resource: VIOLATION {text}");
                if self.fig.details.len() < DETAILS_KEPT {
                    self.fig.details.push(text);
                }
            }
            Some(_) => {}
        }
        accepted
    }

    /// At the first operation of `hold`: pinned holds on `path` that ended LOST, began before it
    /// and conflict with it, whose pinned time is not up, were taken over.
    fn take_over_pinned(&mut self, path: &str, hold: HoldId, now: f64) {
        let (seq, mode) = (self.holds[&hold].seq, self.holds[&hold].mode);
        let mut taken = Vec::new();
        self.paths.get_mut(path).expect("path").pinned_lost.retain(|(g_seq, g_mode, lang, label, end)| {
            if *end <= now {
                return false;
            }
            if *g_seq < seq && conflict(*g_mode, mode) {
                taken.push((label.clone(), lang.clone()));
                return false;
            }
            true
        });
        for (label, lang) in taken {
            self.count_pinned(&label, &lang, "taken_over");
        }
    }

    /// An END (or a hold still open when the soak stops) after a later conflicting holder acted.
    fn judge_end(&mut self, hold: HoldId) {
        if let Some(h) = self.later_conflicting_operated(hold) {
            if self.flag_once(hold, Violation::UnsignalledLoss) {
                self.violation(Violation::UnsignalledLoss, hold, h, "END");
            }
        }
    }

    fn connection_closed(&mut self, conn: ConnId) {
        self.log(&format!("c{conn}"), "CLOSED");
        let open: Vec<(String, HoldId)> = {
            let c = self.conns.get_mut(&conn).expect("conn");
            c.alive = false;
            c.open.iter().map(|((p, _), &h)| (p.clone(), h)).collect()
        };
        for (path, hold) in open {
            self.fig.closed_holding += 1;
            self.close_hold(hold, "connection closed");
            self.prune(&path);
        }
    }

    fn control(&mut self, line: &str) -> String {
        // (an OPDELETE that finds no hold is retried every tick: logged only when it marks one)
        if !matches!(line, "HOLDERS" | "COUNT" | "PINNED") && !line.starts_with("OPDELETE ") {
            self.log("ctl", line);
        }
        let (cmd, rest) = line.split_once(' ').unwrap_or((line, ""));
        match cmd {
            "MARK" => {
                let now = self.now_ms();
                self.fig.pending_marks.push((rest.to_string(), now));
                "OK".to_string()
            }
            "NOTE" => "OK".to_string(),
            "HOLDERS" => {
                let mut names: Vec<&str> = self
                    .conns
                    .values()
                    .filter(|c| c.alive && !c.open.is_empty())
                    .filter_map(|c| c.name.as_deref())
                    .collect();
                names.sort_unstable();
                format!("HOLDERS {}", names.join(" ")).trim_end().to_string()
            }
            "COUNT" => format!("COUNT {}", self.fig.handoffs_total),
            "OPDELETE" => {
                let mut words = rest.split_whitespace();
                let (Some(path), Some(Ok(token))) = (words.next(), words.next().map(str::parse::<i64>)) else {
                    return format!("ERR OPDELETE wants a path and a token, got {rest:?}");
                };
                let found = self
                    .holds
                    .iter()
                    .find(|(_, h)| h.open && h.deleted.is_none() && h.path == path && h.token == token)
                    .map(|(&id, h)| (id, h.name.clone(), h.lang.clone()));
                let Some((id, name, lang)) = found else { return "OPDELETE none".to_string() };
                let now = self.now_ms();
                self.fig.victims.push(Victim {
                    path: path.to_string(),
                    token,
                    lang,
                    marked_ms: now,
                    deleted: true,
                    outcome: None,
                });
                let (ev, victim) = (self.ev, self.fig.victims.len() - 1);
                self.holds.get_mut(&id).expect("hold").deleted = Some((ev, victim));
                self.log("ctl", line);
                format!("OPDELETE {name}")
            }
            "OPDELETE-DONE" => {
                let words: Vec<&str> = rest.split_whitespace().collect();
                let [path, token, outcome] = words.as_slice() else {
                    return format!("ERR OPDELETE-DONE wants a path, a token and an outcome, got {rest:?}");
                };
                if matches!(*outcome, "nonode" | "skipped") {
                    let token = token.parse::<i64>().ok();
                    let marked = self.fig.victims.iter().rposition(|v| v.path == *path && Some(v.token) == token);
                    if let Some(victim) = marked {
                        self.fig.victims[victim].deleted = false;
                        for h in self.holds.values_mut().filter(|h| h.deleted.is_some_and(|(_, v)| v == victim)) {
                            h.deleted = None;
                        }
                    }
                }
                "OK".to_string()
            }
            "FACTS" => {
                let file = rest.trim();
                let record = std::fs::read_to_string(file)
                    .map_err(|e| format!("read {file}: {e}"))
                    .and_then(|text| ServerRecord::parse(&text));
                let reply = match &record {
                    Ok(r) => format!("FACTS events {} nodes {}", r.events, r.node_count()),
                    Err(e) => format!("ERR FACTS {e}"),
                };
                self.record = Some(record);
                reply
            }
            "PIN" => {
                let mut words = rest.split_whitespace();
                let (Some(name), Some(Ok(ms))) = (words.next(), words.next().map(str::parse::<u64>)) else {
                    return format!("ERR PIN wants a contender name and milliseconds, got {rest:?}");
                };
                let label = words.next().unwrap_or("pinned").to_string();
                self.pins.insert(name.to_string(), (ms, label));
                "OK".to_string()
            }
            "UNPIN" => if self.pins.remove(rest.trim()).is_some() { "UNPIN cleared" } else { "UNPIN none" }.to_string(),
            "PINNED" => {
                let mut names: Vec<&str> = self
                    .holds
                    .values()
                    .filter(|h| h.open && h.pin.is_some() && self.conns[&h.conn].alive)
                    .map(|h| h.name.as_str())
                    .collect();
                names.sort_unstable();
                names.dedup();
                format!("PINNED {}", names.join(" ")).trim_end().to_string()
            }
            "STOP" => {
                if !self.frozen {
                    let open: Vec<HoldId> = self.holds.iter().filter(|(_, h)| h.open).map(|(&id, _)| id).collect();
                    for hold in open {
                        self.judge_end(hold);
                        let h = &self.holds[&hold];
                        if let Some((label, _)) = h.pin.clone() {
                            let lang = h.lang.clone();
                            self.count_pinned(&label, &lang, "open_at_stop");
                        }
                    }
                    self.frozen = true;
                }
                "OK".to_string()
            }
            "REPORT" => {
                let report = self.report().to_string();
                if let Some(log) = &mut self.log {
                    let _ = log.flush();
                }
                report
            }
            _ => format!(
                "ERR unknown command {cmd:?} (MARK, NOTE, HOLDERS, COUNT, PIN, UNPIN, PINNED, OPDELETE, OPDELETE-DONE, \
                 STOP, FACTS, REPORT)"
            ),
        }
    }

    fn report(&self) -> Value {
        let lang_of = |c: &Conn| c.lang.clone().unwrap_or_else(|| "unknown".to_string());
        let mut outcomes: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut errors: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut lost: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut waits: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut stale_rejected: BTreeMap<String, u64> = BTreeMap::new();
        let mut stale_reads_rejected: BTreeMap<String, u64> = BTreeMap::new();
        let mut stale_attempted: BTreeMap<String, u64> = BTreeMap::new();
        let mut downgrades: BTreeMap<String, u64> = BTreeMap::new();
        let mut zombie_writes: BTreeMap<String, u64> = BTreeMap::new();
        let mut zombie_rejected: BTreeMap<String, u64> = BTreeMap::new();
        let mut accepted: BTreeMap<String, u64> = BTreeMap::new();
        for c in self.conns.values() {
            let said_nothing = c.outcomes.is_empty()
                && c.errors.is_empty()
                && c.accepted + c.stale_writes_rejected + c.stale_reads_rejected == 0;
            if c.lang.is_none() && said_nothing {
                continue;
            }
            let lang = lang_of(c);
            merge(outcomes.entry(lang.clone()).or_default(), &c.outcomes);
            merge(errors.entry(lang.clone()).or_default(), &c.errors);
            merge(lost.entry(lang.clone()).or_default(), &c.lost);
            waits.entry(lang.clone()).or_default().extend(&c.waits_ms);
            *stale_rejected.entry(lang.clone()).or_default() += c.stale_writes_rejected;
            *stale_reads_rejected.entry(lang.clone()).or_default() += c.stale_reads_rejected;
            *stale_attempted.entry(lang.clone()).or_default() += c.stale_writes_attempted;
            *downgrades.entry(lang.clone()).or_default() += c.downgrades;
            *zombie_writes.entry(lang.clone()).or_default() += c.zombie_writes;
            *zombie_rejected.entry(lang.clone()).or_default() += c.zombie_writes_rejected;
            *accepted.entry(lang).or_default() += c.accepted;
        }
        let all: Vec<f64> = waits.values().flatten().copied().collect();
        let mut wait_ms = Map::new();
        wait_ms.insert("all".to_string(), percentiles(all));
        for (lang, w) in waits.into_iter().filter(|(_, w)| !w.is_empty()) {
            wait_ms.insert(lang, percentiles(w));
        }
        let verdicts = self.judge();
        let mut counted = self.fig.violations.clone();
        for (class, figures) in &verdicts.violations {
            for (key, n) in figures {
                *counted.entry(class.clone()).or_default().entry(key).or_default() += n;
            }
        }
        let mut violations = Map::new();
        let mut classes: Vec<&str> = vec!["zklock"];
        for lang in self.fig.handoffs.keys() {
            let class = class_of(lang);
            if !classes.contains(&class) {
                classes.push(class);
            }
        }
        for class in counted.keys() {
            if !classes.contains(&class.as_str()) {
                classes.push(class);
            }
        }
        for class in classes {
            let mut m = Map::new();
            for v in Violation::ALL {
                let n = counted.get(class).and_then(|m| m.get(v.key())).copied().unwrap_or(0);
                m.insert(v.key().to_string(), json!(n));
            }
            violations.insert(class.to_string(), Value::Object(m));
        }
        let mut unjudged = Map::new();
        for v in [Violation::Overlap, Violation::LateLoss, Violation::UnsignalledLoss] {
            unjudged.insert(v.key().to_string(), json!(verdicts.unjudged.get(v.key()).copied().unwrap_or(0)));
        }
        unjudged.insert("with_zklock".to_string(), json!(verdicts.unjudged_with_zklock));
        let server_record = match &self.record {
            None => Value::Null,
            Some(Ok(r)) => {
                let missing = self.begun.iter().filter(|(path, token)| !r.has_node(path, *token)).count();
                json!({"events": r.events, "lock_nodes": r.node_count(), "holds_without_node": missing})
            }
            Some(Err(e)) => json!({"error": e}),
        };
        let details: Vec<&String> = self.fig.details.iter().chain(&verdicts.details).take(DETAILS_KEPT).collect();
        let recoveries: Vec<Value> = self
            .fig
            .recoveries
            .iter()
            .map(|(label, at, ms)| json!({"label": label, "at_ms": round1(*at), "ms": round1(*ms)}))
            .collect();
        let unrecovered: Vec<&str> = self.fig.pending_marks.iter().map(|(l, _)| l.as_str()).collect();
        let mut victims: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let mut to_lost = Vec::new();
        for v in self.fig.victims.iter().filter(|v| v.deleted) {
            let (outcome, at) = v.outcome.unwrap_or(("open_at_stop", 0.0));
            *victims.entry(v.lang.clone()).or_default().entry(outcome.to_string()).or_default() += 1;
            if outcome.starts_with("told") {
                to_lost.push(round1(at - v.marked_ms));
            }
        }
        let operator_deletes = json!({"victims": victims, "delete_to_lost_ms": percentiles(to_lost)});
        json!({
            "operator_deletes": operator_deletes,
            "handoffs": self.fig.handoffs,
            "handoffs_total": self.fig.handoffs_total,
            "outcomes": outcomes,
            "errors": errors,
            "lost": lost,
            "wait_ms": wait_ms,
            "operations_accepted": accepted,
            "stale_writes_rejected": stale_rejected,
            "stale_reads_rejected": stale_reads_rejected,
            "stale_writes_attempted": stale_attempted,
            "downgrades": downgrades,
            "zombie_writes": zombie_writes,
            "zombie_writes_rejected": zombie_rejected,
            "zombie_writes_accepted_superseded": self.fig.zombie_accepted_superseded,
            "most_leases_holding": self.fig.most_leases_holding,
            "lease_holds": self.fig.lease_holds,
            "violations": violations,
            "violation_details": details,
            "claims": self.claims.len(),
            "claims_judged": verdicts.judged,
            "unjudged": unjudged,
            "server_record": server_record,
            "protocol_errors": self.fig.protocol_errors,
            "protocol_error_examples": self.fig.protocol_error_examples,
            "lost_after_end": self.fig.lost_after_end,
            "holds_ended_by_connection_close": self.fig.closed_holding,
            "recoveries": recoveries,
            "pinned": self.fig.pinned,
            "unrecovered_marks": unrecovered,
            "elapsed_ms": round1(self.now_ms()),
        })
    }
}

enum Reply {
    Ok,
    Stale,
    /// `OK PIN ms`: the hold just begun is pinned.
    Pin(u64),
}

fn parse_mode(mode: &str) -> Option<char> {
    match mode {
        "x" => Some('x'),
        "r" => Some('r'),
        "w" => Some('w'),
        "l" => Some('l'),
        _ => None,
    }
}

fn merge(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// count, p50, p99 and max (nearest rank).
fn percentiles(mut samples: Vec<f64>) -> Value {
    if samples.is_empty() {
        return json!({"count": 0});
    }
    samples.sort_by(|a, b| a.total_cmp(b));
    let rank = |q: f64| samples[((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1];
    json!({"count": samples.len(), "p50": rank(0.50), "p99": rank(0.99), "max": samples[samples.len() - 1]})
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn serve(state: Arc<Mutex<State>>, conn: ConnId, stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut out = match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    lock(&state).conns.insert(conn, Conn { alive: true, ..Default::default() });
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let reply = lock(&state).handle(conn, line.trim_end());
        if let Some(reply) = reply {
            if out.write_all(reply.as_bytes()).and_then(|()| out.write_all(b"\n")).is_err() {
                break;
            }
        }
    }
    lock(&state).connection_closed(conn);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let log = match args.as_slice() {
        [] => None,
        [flag, path] if flag == "--log" => {
            Some(LineWriter::new(File::create(path).unwrap_or_else(|e| panic!("chaos-resource: create {path}: {e}"))))
        }
        _ => {
            eprintln!("usage: chaos-resource [--log FILE]   (control commands on stdin)");
            std::process::exit(2);
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").expect("chaos-resource: bind 127.0.0.1:0");
    let address = listener.local_addr().expect("local_addr");
    let state = Arc::new(Mutex::new(State {
        t0: Instant::now(),
        frozen: false,
        next_hold: 0,
        next_seq: 0,
        ev: 0,
        holds: HashMap::new(),
        paths: HashMap::new(),
        conns: HashMap::new(),
        overlap_pairs: HashSet::new(),
        claims: Vec::new(),
        record: None,
        begun: Vec::new(),
        pins: HashMap::new(),
        fig: Figures::default(),
        log,
    }));
    let unix_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    lock(&state).log("ctl", &format!("START unix_ms={unix_ms} listen={address}"));
    {
        let state = state.clone();
        thread::spawn(move || {
            for (conn, stream) in (0..).zip(listener.incoming()) {
                let Ok(stream) = stream else { continue };
                let state = state.clone();
                thread::spawn(move || serve(state, conn, stream));
            }
        });
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "LISTEN {address}").and_then(|()| out.flush()).expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let reply = lock(&state).control(line);
        if writeln!(out, "{reply}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
    let mut state = lock(&state);
    if let Some(log) = &mut state.log {
        let _ = log.flush();
    }
}
