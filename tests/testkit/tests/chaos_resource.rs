//! The chaos soak's fenced resource (`chaos-resource`) judges what it is told: scripted holders
//! that overlap, write with a stale token, say LOST late or never, and get killed, must show up
//! in exactly the figures that name them, charged to the party the server's record (`FACTS`, a
//! scripted [`ServerLog`] here) says held without the right.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

struct Resource {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    address: String,
}

impl Resource {
    fn start() -> Resource {
        let mut child = Command::new(env!("CARGO_BIN_EXE_chaos-resource"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start chaos-resource");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let address = line.trim().strip_prefix("LISTEN ").expect("LISTEN line").to_string();
        Resource { child, stdin, stdout, address }
    }

    fn command(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
        let mut reply = String::new();
        self.stdout.read_line(&mut reply).unwrap();
        reply.trim_end().to_string()
    }

    fn report(&mut self) -> Value {
        serde_json::from_str(&self.command("REPORT")).expect("JSON report")
    }
}

impl Drop for Resource {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Holder {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Holder {
    fn connect(resource: &Resource) -> Holder {
        let stream = TcpStream::connect(&resource.address).unwrap();
        stream.set_nodelay(true).unwrap();
        Holder { reader: BufReader::new(stream.try_clone().unwrap()), writer: stream }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.writer, "{line}").unwrap();
    }

    fn request(&mut self, line: &str) -> String {
        self.send(line);
        let mut reply = String::new();
        self.reader.read_line(&mut reply).unwrap();
        reply.trim_end().to_string()
    }
}

fn figure(report: &Value, class: &str, key: &str) -> u64 {
    report["violations"][class][key].as_u64().unwrap()
}

/// The server's side of a scripted story, as the orchestrator reads it from the ensemble's
/// transaction logs after a soak: each lock node's create and delete and each session's end,
/// with its zxid and the leader's clock (whole milliseconds) when it is told, for `FACTS`. Each
/// event is kept a few milliseconds clear of the holders' messages on either side, so that the
/// judge can tell which came first.
struct ServerLog {
    lines: Vec<String>,
    zxid: i64,
}

impl ServerLog {
    fn new() -> ServerLog {
        ServerLog { lines: Vec::new(), zxid: 0x1_0000_0000 }
    }

    fn stamp(&mut self) -> (i64, u128) {
        std::thread::sleep(std::time::Duration::from_millis(3));
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis();
        std::thread::sleep(std::time::Duration::from_millis(3));
        self.zxid += 1;
        (self.zxid, now)
    }

    /// An ephemeral lock node made by `session`; returns its czxid, its holder's fencing token.
    fn create(&mut self, session: i64, path: &str) -> i64 {
        let (zxid, ms) = self.stamp();
        self.lines.push(format!("{zxid:#x} {ms} {session:#x} create {path} ephemeral"));
        zxid
    }

    fn delete(&mut self, session: i64, path: &str) {
        let (zxid, ms) = self.stamp();
        self.lines.push(format!("{zxid:#x} {ms} {session:#x} delete {path}"));
    }

    /// The session ends (closed, or expired): its ephemeral nodes go with it.
    fn close(&mut self, session: i64) {
        let (zxid, ms) = self.stamp();
        self.lines.push(format!("{zxid:#x} {ms} {session:#x} close"));
    }

    /// Gives the resource this record (`FACTS file`).
    fn tell(&self, resource: &mut Resource) {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let file = std::env::temp_dir().join(format!("chaos-resource-facts-{}-{n}.txt", std::process::id()));
        std::fs::write(&file, self.lines.join("\n") + "\n").unwrap();
        let reply = resource.command(&format!("FACTS {}", file.display()));
        let _ = std::fs::remove_file(&file);
        assert!(reply.starts_with("FACTS events "), "{reply}");
    }
}

#[test]
fn a_clean_handoff_has_no_violation_and_a_recovery_time() {
    let mut resource = Resource::start();
    let (mut a, mut b) = (Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(resource.command("MARK leader_kill"), "OK");
    a.send("WAIT /chaos/mutex x 12 held");
    assert_eq!(a.request("BEGIN /chaos/mutex x 10 rust a"), "OK");
    assert_eq!(resource.command("HOLDERS"), "HOLDERS a");
    assert_eq!(a.request("WRITE /chaos/mutex 10"), "OK");
    assert_eq!(a.request("END /chaos/mutex 10"), "OK");
    assert_eq!(b.request("BEGIN /chaos/mutex x 11 c b"), "OK");
    assert_eq!(b.request("WRITE /chaos/mutex 11"), "OK");
    // readers share
    assert_eq!(a.request("BEGIN /chaos/rw r 20 rust a"), "OK");
    assert_eq!(b.request("BEGIN /chaos/rw r 21 c b"), "OK");
    assert_eq!(a.request("READ /chaos/rw 20"), "OK");
    assert_eq!(b.request("READ /chaos/rw 21"), "OK");
    assert_eq!(resource.command("COUNT"), "COUNT 4");
    let report = resource.report();
    // zklock's languages only: no peer's figures.
    assert_eq!(report["violations"].as_object().unwrap().keys().collect::<Vec<_>>(), ["zklock"], "{report}");
    for key in ["overlaps", "stale_writes_accepted", "late_lost_signals", "unsignalled_losses"] {
        assert_eq!(figure(&report, "zklock", key), 0, "{key}: {report}");
    }
    assert_eq!(report["protocol_errors"], 0, "{report}");
    assert_eq!(report["handoffs"]["rust"], 2);
    assert_eq!(report["recoveries"].as_array().unwrap().len(), 1, "{report}");
    assert_eq!(report["wait_ms"]["rust"]["p50"], 12.0);
}

#[test]
fn an_overlap_a_fenced_write_and_a_late_lost_signal_are_counted() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    let g_token = zk.create(0x1, "/chaos/mutex/_c_g-lock-0000000001");
    assert_eq!(g.request(&format!("BEGIN /chaos/mutex x {g_token} rust g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "OK");
    zk.close(0x1); // g's session expires, unknown to g
    let h_token = zk.create(0x2, "/chaos/mutex/_c_h-lock-0000000002");
    assert_eq!(h.request(&format!("BEGIN /chaos/mutex x {h_token} node h")), "OK");
    assert_eq!(h.request(&format!("WRITE /chaos/mutex {h_token}")), "OK"); // g still open: overlap
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "STALE"); // fenced: not a stale accept
    assert_eq!(g.request(&format!("LOST /chaos/mutex {g_token} SessionExpired")), "OK"); // after h acted: late
    let report = resource.report();
    assert_eq!(report["unjudged"]["overlaps"], 1, "no record given yet: {report}");
    assert_eq!(report["unjudged"]["with_zklock"], 2, "{report}");
    assert_eq!(figure(&report, "zklock", "overlaps"), 0, "{report}");
    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "late_lost_signals"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "stale_writes_accepted"), 0, "{report}");
    assert_eq!(report["unjudged"]["with_zklock"], 0, "{report}");
    assert_eq!(report["claims_judged"], 2, "{report}");
    assert_eq!(report["stale_writes_rejected"]["rust"], 1, "{report}");
    assert_eq!(report["lost"]["rust"]["SessionExpired"], 1, "{report}");
    let detail = report["violation_details"][0].as_str().unwrap();
    assert!(detail.contains("offender g (rust)") && detail.contains("its session ended"), "{report}");
}

#[test]
fn a_write_after_a_later_reader_began_is_fenced_and_an_end_never_told_lost_is_counted() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    let g_token = zk.create(0x1, "/chaos/rw/_c_g-__WRIT__0000000001");
    assert_eq!(g.request(&format!("BEGIN /chaos/rw w {g_token} python g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/rw {g_token}")), "OK");
    zk.close(0x1);
    let h_token = zk.create(0x2, "/chaos/rw/_c_h-__READ__0000000002");
    assert_eq!(h.request(&format!("BEGIN /chaos/rw r {h_token} rust h")), "OK");
    assert_eq!(h.request(&format!("READ /chaos/rw {h_token}")), "OK");
    // The fence learns every BEGIN's token, a reader's too: g's write is refused.
    assert_eq!(g.request(&format!("WRITE /chaos/rw {g_token}")), "STALE");
    assert_eq!(g.request(&format!("END /chaos/rw {g_token}")), "OK");
    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "stale_writes_accepted"), 0, "{report}");
    assert_eq!(report["stale_writes_attempted"]["python"], 1, "{report}");
    assert_eq!(report["stale_writes_rejected"]["python"], 1, "{report}");
    assert_eq!(figure(&report, "zklock", "unsignalled_losses"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "overlaps"), 1, "{report}");
}

#[test]
fn a_curator_offender_is_a_peer_figure_and_a_killed_holder_ends_its_hold() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    // Curator's session ends while it holds; zklock's holder gets in rightly, Curator hears late.
    let g_token = zk.create(0x1, "/chaos/mutex/_c_g-lock-0000000001");
    assert_eq!(g.request(&format!("BEGIN /chaos/mutex x {g_token} curator g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "OK");
    zk.close(0x1);
    let h_token = zk.create(0x2, "/chaos/mutex/_c_h-lock-0000000002");
    assert_eq!(h.request(&format!("BEGIN /chaos/mutex x {h_token} rust h")), "OK");
    assert_eq!(h.request(&format!("WRITE /chaos/mutex {h_token}")), "OK");
    assert_eq!(g.request(&format!("LOST /chaos/mutex {g_token} SUSPENDED")), "OK");
    assert_eq!(h.request(&format!("END /chaos/mutex {h_token}")), "OK");
    zk.delete(0x2, "/chaos/mutex/_c_h-lock-0000000002");
    // k holds and is killed; the next holder is no overlap
    let k_token = zk.create(0x3, "/chaos/mutex/_c_k-lock-0000000003");
    assert_eq!(k.request(&format!("BEGIN /chaos/mutex x {k_token} c k")), "OK");
    assert_eq!(k.request(&format!("WRITE /chaos/mutex {k_token}")), "OK");
    drop(k);
    let mut next = Holder::connect(&resource);
    // the resource notices the close before the next holder's operation
    while resource.command("HOLDERS") != "HOLDERS" {
        std::thread::yield_now();
    }
    zk.close(0x3);
    let n_token = zk.create(0x4, "/chaos/mutex/_c_n-lock-0000000004");
    assert_eq!(next.request(&format!("BEGIN /chaos/mutex x {n_token} node n")), "OK");
    assert_eq!(next.request(&format!("WRITE /chaos/mutex {n_token}")), "OK");
    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(figure(&report, "curator", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "curator", "late_lost_signals"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "overlaps"), 0, "{report}");
    assert_eq!(figure(&report, "zklock", "late_lost_signals"), 0, "{report}");
    assert_eq!(report["holds_ended_by_connection_close"], 1, "{report}");
}

#[test]
fn messages_outside_the_protocol_are_protocol_errors() {
    let mut resource = Resource::start();
    let mut a = Holder::connect(&resource);
    assert_eq!(a.request("WRITE /chaos/mutex 5"), "OK"); // no BEGIN
    assert_eq!(a.request("END /chaos/mutex 5"), "OK");
    a.send("HELLO");
    assert_eq!(a.request("BEGIN /chaos/mutex x 6 rust a"), "OK");
    assert_eq!(a.request("READ /chaos/mutex 6"), "OK"); // READ by a mode x hold
    let report = resource.report();
    assert_eq!(report["protocol_errors"], 4, "{report}");
}

#[test]
fn a_pin_is_given_to_the_next_begin_of_that_contender_once_and_its_end_is_counted() {
    let mut resource = Resource::start();
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(resource.command("PIN g 60000 stall_short"), "OK");
    assert_eq!(resource.command("PINNED"), "PINNED");
    // another contender's BEGIN does not take g's pin
    assert_eq!(h.request("BEGIN /chaos/rw r 5 rust h"), "OK");
    assert_eq!(h.request("END /chaos/rw 5"), "OK");
    assert_eq!(g.request("BEGIN /chaos/mutex x 10 rust g"), "OK PIN 60000");
    assert_eq!(resource.command("PINNED"), "PINNED g");
    assert_eq!(resource.command("HOLDERS"), "HOLDERS g");
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "OK");
    assert_eq!(g.request("END /chaos/mutex 10"), "OK");
    assert_eq!(resource.command("PINNED"), "PINNED");
    // the pin was used up
    assert_eq!(g.request("BEGIN /chaos/mutex x 11 rust g"), "OK");
    assert_eq!(resource.command("PINNED"), "PINNED");
    assert_eq!(g.request("END /chaos/mutex 11"), "OK");
    // a pin not given yet can be dropped
    assert_eq!(resource.command("PIN k 1000"), "OK");
    assert_eq!(resource.command("UNPIN k"), "UNPIN cleared");
    assert_eq!(resource.command("UNPIN k"), "UNPIN none");
    assert_eq!(k.request("BEGIN /chaos/rw w 12 c k"), "OK");
    assert_eq!(k.request("END /chaos/rw 12"), "OK");
    assert!(resource.command("PIN k").starts_with("ERR "));
    let report = resource.report();
    assert_eq!(report["pinned"]["stall_short"]["rust"]["ended"], 1, "{report}");
    assert_eq!(report["pinned"].as_object().unwrap().len(), 1, "{report}");
    assert_eq!(report["protocol_errors"], 0, "{report}");
}

#[test]
fn a_pinned_hold_lost_and_taken_over_in_time_is_no_violation_and_is_counted() {
    let mut resource = Resource::start();
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(resource.command("PIN g 60000 stall_long"), "OK");
    assert_eq!(g.request("BEGIN /chaos/mutex x 10 node g"), "OK PIN 60000");
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "OK");
    assert_eq!(g.request("LOST /chaos/mutex 10 SessionExpired"), "OK");
    assert_eq!(resource.command("PINNED"), "PINNED");
    // a reader on the other path is no take-over; the next mutex holder is
    assert_eq!(k.request("BEGIN /chaos/rw r 11 c k"), "OK");
    assert_eq!(k.request("READ /chaos/rw 11"), "OK");
    assert_eq!(h.request("BEGIN /chaos/mutex x 12 rust h"), "OK");
    assert_eq!(h.request("WRITE /chaos/mutex 12"), "OK");
    assert_eq!(h.request("WRITE /chaos/mutex 12"), "OK");
    // a pinned hold still open at STOP, and one ended by a killed connection
    assert_eq!(resource.command("PIN h 60000 stall_long"), "OK");
    assert_eq!(h.request("END /chaos/mutex 12"), "OK");
    assert_eq!(h.request("BEGIN /chaos/mutex x 13 rust h"), "OK PIN 60000");
    assert_eq!(resource.command("PIN k 60000 cut_long"), "OK");
    assert_eq!(k.request("BEGIN /chaos/rw w 14 c k"), "OK PIN 60000");
    assert_eq!(resource.command("PINNED"), "PINNED h k");
    drop(k);
    while resource.command("PINNED") != "PINNED h" {
        std::thread::yield_now();
    }
    assert_eq!(resource.command("STOP"), "OK");
    let report = resource.report();
    let long = &report["pinned"]["stall_long"];
    assert_eq!(long["node"]["lost"], 1, "{report}");
    assert_eq!(long["node"]["taken_over"], 1, "{report}");
    assert_eq!(long["rust"]["open_at_stop"], 1, "{report}");
    assert_eq!(report["pinned"]["cut_long"]["c"]["killed"], 1, "{report}");
    for key in ["overlaps", "stale_writes_accepted", "late_lost_signals", "unsignalled_losses"] {
        assert_eq!(figure(&report, "zklock", key), 0, "{key}: {report}");
    }
    assert_eq!(report["protocol_errors"], 0, "{report}");
}

/// A downgrade's hold is judged as a read from its DOWNGRADE on: a reader beside it is no
/// overlap, a writer is. A zombie's write after its own LOST is refused once another hold began,
/// and counted apart from the violations.
#[test]
fn a_downgraded_hold_is_a_read_and_a_zombies_write_is_fenced() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    let g_token = zk.create(0x1, "/chaos/rw/_c_g-__WRIT__0000000001");
    assert_eq!(g.request(&format!("BEGIN /chaos/rw w {g_token} rust g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/rw {g_token}")), "OK");
    zk.create(0x1, "/chaos/rw/_c_g-__READ__0000000001"); // the downgrade's read node
    assert_eq!(g.request(&format!("DOWNGRADE /chaos/rw {g_token}")), "OK");
    zk.delete(0x1, "/chaos/rw/_c_g-__WRIT__0000000001");
    assert_eq!(g.request(&format!("READ /chaos/rw {g_token}")), "OK");
    let h_token = zk.create(0x2, "/chaos/rw/_c_h-__READ__0000000002");
    assert_eq!(h.request(&format!("BEGIN /chaos/rw r {h_token} node h")), "OK");
    assert_eq!(h.request(&format!("READ /chaos/rw {h_token}")), "OK");
    let report = resource.report();
    assert_eq!(report["claims"], 0, "readers share with a downgraded read: {report}");
    assert_eq!(report["downgrades"]["rust"], 1, "{report}");
    // A writer that acts while the downgraded read is open overlaps it: the writer's fault.
    let k_token = zk.create(0x3, "/chaos/rw/_c_k-__WRIT__0000000003");
    assert_eq!(k.request(&format!("BEGIN /chaos/rw w {k_token} python k")), "OK");
    assert_eq!(k.request(&format!("WRITE /chaos/rw {k_token}")), "OK");
    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "overlaps"), 2, "g's and h's reads were open: {report}");
    let details = report["violation_details"].as_array().unwrap();
    assert!(details.iter().all(|d| d.as_str().unwrap().contains("offender k (python)")), "{report}");
    assert!(details[0].as_str().unwrap().contains("g held rightly"), "{report}");
    // g, told lost, writes anyway with its old token: the fence refuses it.
    assert_eq!(g.request(&format!("LOST /chaos/rw {g_token} SessionExpired")), "OK");
    let mut z = Holder::connect(&resource);
    assert_eq!(z.request("BEGIN /chaos/mutex x 50 rust z"), "OK");
    assert_eq!(z.request("WRITE /chaos/mutex 50"), "OK");
    assert_eq!(z.request("LOST /chaos/mutex 50 SessionExpired"), "OK");
    assert_eq!(h.request("BEGIN /chaos/mutex x 51 node h2"), "OK");
    assert_eq!(z.request("ZOMBIE-WRITE /chaos/mutex 50"), "STALE");
    let report = resource.report();
    assert_eq!(report["zombie_writes"]["rust"], 1, "{report}");
    assert_eq!(report["zombie_writes_rejected"]["rust"], 1, "{report}");
    assert_eq!(report["zombie_writes_accepted_superseded"], 0, "{report}");
    assert_eq!(report["protocol_errors"], 0, "{report}");
}

#[test]
fn an_operator_deletes_victim_is_judged_apart_and_only_after_the_delete() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let operator = 0xff;
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    let g_node = "/chaos/mutex/_c_g-lock-0000000001";
    let g_token = zk.create(0x1, g_node);
    assert_eq!(resource.command(&format!("OPDELETE /chaos/mutex {g_token}")), "OPDELETE none", "no such hold open");
    assert_eq!(g.request(&format!("BEGIN /chaos/mutex x {g_token} rust g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "OK");
    assert_eq!(resource.command(&format!("OPDELETE /chaos/mutex {g_token}")), "OPDELETE g");
    zk.delete(operator, g_node);
    assert_eq!(resource.command(&format!("OPDELETE-DONE /chaos/mutex {g_token} deleted")), "OK");
    // The next holder acts before the victim hears: its write is fenced, its overlap and late
    // LOST are the operator's doing.
    let h_node = "/chaos/mutex/_c_h-lock-0000000002";
    let h_token = zk.create(0x2, h_node);
    assert_eq!(h.request(&format!("BEGIN /chaos/mutex x {h_token} rust h")), "OK");
    assert_eq!(h.request(&format!("WRITE /chaos/mutex {h_token}")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "STALE");
    assert_eq!(g.request(&format!("LOST /chaos/mutex {g_token} NodeDeleted")), "OK");
    // Told in time: LOST before anyone else acted.
    assert_eq!(resource.command(&format!("OPDELETE /chaos/mutex {h_token}")), "OPDELETE h");
    zk.delete(operator, h_node);
    assert_eq!(resource.command(&format!("OPDELETE-DONE /chaos/mutex {h_token} deleted")), "OK");
    assert_eq!(h.request(&format!("LOST /chaos/mutex {h_token} NodeDeleted")), "OK");
    let k_token = zk.create(0x3, "/chaos/mutex/_c_k-lock-0000000003");
    assert_eq!(k.request(&format!("BEGIN /chaos/mutex x {k_token} rust k")), "OK");
    assert_eq!(k.request(&format!("WRITE /chaos/mutex {k_token}")), "OK");
    // k's session expires; a delete that then finds no node marks nothing: k's late END is k's own.
    zk.close(0x3);
    assert_eq!(resource.command(&format!("OPDELETE /chaos/mutex {k_token}")), "OPDELETE k");
    assert_eq!(resource.command(&format!("OPDELETE-DONE /chaos/mutex {k_token} nonode")), "OK");
    let g2_token = zk.create(0x1, "/chaos/mutex/_c_g-lock-0000000004");
    assert_eq!(g.request(&format!("BEGIN /chaos/mutex x {g2_token} rust g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g2_token}")), "OK");
    assert_eq!(k.request(&format!("END /chaos/mutex {k_token}")), "OK");

    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(figure(&report, "operator_delete", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "operator_delete", "late_lost_signals"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "late_lost_signals"), 0, "{report}");
    assert_eq!(figure(&report, "zklock", "stale_writes_accepted"), 0, "{report}");
    assert_eq!(figure(&report, "zklock", "overlaps"), 1, "k and g: {report}");
    assert_eq!(figure(&report, "zklock", "unsignalled_losses"), 1, "k's END: {report}");
    let victims = &report["operator_deletes"]["victims"]["rust"];
    assert_eq!(victims["told_late"], 1, "{report}");
    assert_eq!(victims["told_in_time"], 1, "{report}");
    assert_eq!(victims.as_object().unwrap().len(), 2, "the undone mark is no victim: {report}");
    assert_eq!(report["operator_deletes"]["delete_to_lost_ms"]["count"], 2, "{report}");
    assert_eq!(report["protocol_errors"], 0, "{report}");
}

#[test]
fn a_victims_violation_against_a_hold_that_acted_before_the_delete_stays_zklocks() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    let g_node = "/chaos/mutex/_c_g-lock-0000000001";
    let g_token = zk.create(0x1, g_node);
    assert_eq!(g.request(&format!("BEGIN /chaos/mutex x {g_token} rust g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "OK");
    // h is let in behind g's node: an overlap before any delete, h's.
    let h_token = zk.create(0x2, "/chaos/mutex/_c_h-lock-0000000002");
    assert_eq!(h.request(&format!("BEGIN /chaos/mutex x {h_token} rust h")), "OK");
    assert_eq!(h.request(&format!("WRITE /chaos/mutex {h_token}")), "OK");
    assert_eq!(resource.command(&format!("OPDELETE /chaos/mutex {g_token}")), "OPDELETE g");
    zk.delete(0xff, g_node);
    assert_eq!(resource.command(&format!("OPDELETE-DONE /chaos/mutex {g_token} deleted")), "OK");
    assert_eq!(g.request(&format!("LOST /chaos/mutex {g_token} NodeDeleted")), "OK");
    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "late_lost_signals"), 1, "h acted before the delete: {report}");
    assert!(report["violation_details"][0].as_str().unwrap().contains("offender h (rust)"), "{report}");
    assert_eq!(report["violations"].get("operator_delete"), None, "{report}");
    assert_eq!(report["operator_deletes"]["victims"]["rust"]["told_late"], 1, "{report}");
}

/// Issue 49: a zklock holder let in while a Curator holder's node was still first in the queue,
/// its session alive, is zklock's overlap, not Curator's: the server says who held rightly.
#[test]
fn a_zklock_holder_entering_beside_a_live_curator_holder_is_charged_to_zklock() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    let (curator, rust) = (0x100, 0x200);
    let g_node = "/chaos/mutex/_c_8d1-lock-0000000001";
    let g_token = zk.create(curator, g_node);
    assert_eq!(g.request(&format!("BEGIN /chaos/mutex x {g_token} curator g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "OK");
    // zklock's node queues behind Curator's, and zklock lets its holder in anyway.
    let h_token = zk.create(rust, "/chaos/mutex/_c_3f2-lock-0000000002");
    assert_eq!(h.request(&format!("BEGIN /chaos/mutex x {h_token} rust h")), "OK");
    assert_eq!(h.request(&format!("WRITE /chaos/mutex {h_token}")), "OK");
    // Curator releases in its own time: END, then its node goes.
    assert_eq!(g.request(&format!("END /chaos/mutex {g_token}")), "OK");
    zk.delete(curator, g_node);
    assert_eq!(h.request(&format!("END /chaos/mutex {h_token}")), "OK");
    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "curator", "overlaps"), 0, "{report}");
    // Curator's END came after zklock's holder acted, untold of any loss: there was none, the
    // intruder is charged with it.
    assert_eq!(figure(&report, "curator", "unsignalled_losses"), 0, "{report}");
    assert_eq!(figure(&report, "zklock", "unsignalled_losses"), 1, "{report}");
    let detail = report["violation_details"][0].as_str().unwrap();
    assert!(detail.contains("offender h (rust)"), "{report}");
    assert!(detail.contains("g held rightly") && detail.contains("h held without the right"), "{report}");
    assert!(detail.contains("let in behind _c_8d1-lock-0000000001"), "{report}");
}

/// And the other way round: a Curator holder let in beside a live zklock holder is Curator's
/// overlap, and the zklock holder's END after it is no loss of zklock's.
#[test]
fn a_curator_holder_entering_beside_a_live_zklock_holder_is_charged_to_curator() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    let g_node = "/chaos/mutex/_c_a1-lock-0000000001";
    let g_token = zk.create(0x1, g_node);
    assert_eq!(g.request(&format!("BEGIN /chaos/mutex x {g_token} c g")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "OK");
    let h_token = zk.create(0x2, "/chaos/mutex/_c_b2-lock-0000000002");
    assert_eq!(h.request(&format!("BEGIN /chaos/mutex x {h_token} curator57 h")), "OK");
    assert_eq!(h.request(&format!("WRITE /chaos/mutex {h_token}")), "OK");
    assert_eq!(g.request(&format!("WRITE /chaos/mutex {g_token}")), "STALE");
    assert_eq!(g.request(&format!("END /chaos/mutex {g_token}")), "OK");
    zk.delete(0x1, g_node);
    zk.tell(&mut resource);
    let report = resource.report();
    for key in ["overlaps", "late_lost_signals", "unsignalled_losses"] {
        assert_eq!(figure(&report, "zklock", key), 0, "{key}: {report}");
    }
    assert_eq!(figure(&report, "curator57", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "curator57", "unsignalled_losses"), 1, "{report}");
    assert_eq!(report["unjudged"]["with_zklock"], 0, "{report}");
}

/// A claim the record cannot settle is unjudged, and fails the soak if a zklock holder is in it:
/// a hold whose token names no node, a pair the record has both holding rightly. Between peers
/// it is reported only.
#[test]
fn a_claim_the_record_cannot_settle_is_unjudged() {
    let mut resource = Resource::start();
    let mut zk = ServerLog::new();
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    // g's token is no node's czxid; h was let in first.
    let h_token = zk.create(0x2, "/chaos/mutex/_c_h-lock-0000000002");
    assert_eq!(g.request("BEGIN /chaos/mutex x 77 rust g"), "OK");
    assert_eq!(g.request("WRITE /chaos/mutex 77"), "OK");
    assert_eq!(h.request(&format!("BEGIN /chaos/mutex x {h_token} curator h")), "OK");
    assert_eq!(h.request(&format!("WRITE /chaos/mutex {h_token}")), "OK");
    assert_eq!(g.request("END /chaos/mutex 77"), "OK");
    assert_eq!(h.request(&format!("END /chaos/mutex {h_token}")), "OK");
    // Two kazoo writers whose nodes are readers' (the record has both holding rightly), and a
    // Curator holder beside them: peers only.
    let (mut k, mut c) = (Holder::connect(&resource), Holder::connect(&resource));
    let k_token = zk.create(0x3, "/chaos/rw/k__rlock__0000000003");
    let c_token = zk.create(0x4, "/chaos/rw/_c_c-__READ__0000000004");
    assert_eq!(k.request(&format!("BEGIN /chaos/rw w {k_token} kazoo k")), "OK");
    assert_eq!(k.request(&format!("WRITE /chaos/rw {k_token}")), "OK");
    assert_eq!(c.request(&format!("BEGIN /chaos/rw w {c_token} curator57 c")), "OK");
    assert_eq!(c.request(&format!("WRITE /chaos/rw {c_token}")), "OK");
    zk.tell(&mut resource);
    let report = resource.report();
    assert_eq!(report["claims"], 3, "{report}");
    assert_eq!(report["unjudged"]["overlaps"], 2, "{report}");
    assert_eq!(report["unjudged"]["unsignalled_losses"], 1, "{report}");
    assert_eq!(report["unjudged"]["with_zklock"], 2, "g's overlap and END: {report}");
    assert_eq!(report["claims_judged"], 0, "{report}");
    assert_eq!(report["server_record"]["holds_without_node"], 1, "g's: {report}");
    for key in ["overlaps", "unsignalled_losses"] {
        assert_eq!(figure(&report, "zklock", key), 0, "{key}: {report}");
        assert_eq!(figure(&report, "curator", key), 0, "{key}: {report}");
    }
    let details: Vec<&str> =
        report["violation_details"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    assert!(details.iter().all(|d| d.starts_with("[unjudged]")), "{report}");
    assert!(details[0].contains("no node of /chaos/mutex has czxid 0x4d"), "{report}");
    assert!(details[2].contains("k held rightly") && details[2].contains("c held rightly"), "{report}");
}
