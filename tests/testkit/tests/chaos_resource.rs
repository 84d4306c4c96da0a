//! The chaos soak's fenced resource (`chaos-resource`) judges what it is told: scripted holders
//! that overlap, write with a stale token, say LOST late or never, and get killed, must show up
//! in exactly the figures that name them, attributed to the right party.

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
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(g.request("BEGIN /chaos/mutex x 10 rust g"), "OK");
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "OK");
    assert_eq!(h.request("BEGIN /chaos/mutex x 11 node h"), "OK");
    assert_eq!(h.request("WRITE /chaos/mutex 11"), "OK"); // g still open: overlap
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "STALE"); // fenced: not a stale accept
    assert_eq!(g.request("LOST /chaos/mutex 10 SessionExpired"), "OK"); // after h acted: late
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "late_lost_signals"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "stale_writes_accepted"), 0, "{report}");
    assert_eq!(report["stale_writes_rejected"]["rust"], 1, "{report}");
    assert_eq!(report["lost"]["rust"]["SessionExpired"], 1, "{report}");
    assert!(report["violation_details"][0].as_str().unwrap().contains("offender g (rust)"), "{report}");
}

#[test]
fn a_write_after_a_later_reader_began_is_fenced_and_an_end_never_told_lost_is_counted() {
    let mut resource = Resource::start();
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(g.request("BEGIN /chaos/rw w 30 python g"), "OK");
    assert_eq!(g.request("WRITE /chaos/rw 30"), "OK");
    assert_eq!(h.request("BEGIN /chaos/rw r 31 rust h"), "OK");
    assert_eq!(h.request("READ /chaos/rw 31"), "OK");
    // The fence learns every BEGIN's token, a reader's too: g's write is refused.
    assert_eq!(g.request("WRITE /chaos/rw 30"), "STALE");
    assert_eq!(g.request("END /chaos/rw 30"), "OK");
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
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(g.request("BEGIN /chaos/mutex x 10 curator g"), "OK");
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "OK");
    assert_eq!(h.request("BEGIN /chaos/mutex x 11 rust h"), "OK");
    assert_eq!(h.request("WRITE /chaos/mutex 11"), "OK");
    assert_eq!(g.request("LOST /chaos/mutex 10 SUSPENDED"), "OK");
    assert_eq!(h.request("END /chaos/mutex 11"), "OK");
    // k holds and is killed; the next holder is no overlap
    assert_eq!(k.request("BEGIN /chaos/mutex x 12 c k"), "OK");
    assert_eq!(k.request("WRITE /chaos/mutex 12"), "OK");
    drop(k);
    let mut next = Holder::connect(&resource);
    // the resource notices the close before the next holder's operation
    while resource.command("HOLDERS") != "HOLDERS" {
        std::thread::yield_now();
    }
    assert_eq!(next.request("BEGIN /chaos/mutex x 13 node n"), "OK");
    assert_eq!(next.request("WRITE /chaos/mutex 13"), "OK");
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
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(g.request("BEGIN /chaos/rw w 40 rust g"), "OK");
    assert_eq!(g.request("WRITE /chaos/rw 40"), "OK");
    assert_eq!(g.request("DOWNGRADE /chaos/rw 40"), "OK");
    assert_eq!(g.request("READ /chaos/rw 40"), "OK");
    assert_eq!(h.request("BEGIN /chaos/rw r 41 node h"), "OK");
    assert_eq!(h.request("READ /chaos/rw 41"), "OK");
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "overlaps"), 0, "readers share with a downgraded read: {report}");
    assert_eq!(report["downgrades"]["rust"], 1, "{report}");
    // A writer that acts while the downgraded read is open overlaps it.
    assert_eq!(k.request("BEGIN /chaos/rw w 42 python k"), "OK");
    assert_eq!(k.request("WRITE /chaos/rw 42"), "OK");
    assert_eq!(figure(&resource.report(), "zklock", "overlaps"), 2, "g's and h's reads were open");
    // g, told lost, writes anyway with its old token: the fence refuses it.
    assert_eq!(g.request("LOST /chaos/rw 40 SessionExpired"), "OK");
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
    let (mut g, mut h, mut k) = (Holder::connect(&resource), Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(resource.command("OPDELETE /chaos/mutex 10"), "OPDELETE none", "no such hold open");
    assert_eq!(g.request("BEGIN /chaos/mutex x 10 rust g"), "OK");
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "OK");
    assert_eq!(resource.command("OPDELETE /chaos/mutex 10"), "OPDELETE g");
    assert_eq!(resource.command("OPDELETE-DONE /chaos/mutex 10 deleted"), "OK");
    // The next holder acts before the victim hears: its write is fenced, its overlap and late
    // LOST are the operator's doing.
    assert_eq!(h.request("BEGIN /chaos/mutex x 11 rust h"), "OK");
    assert_eq!(h.request("WRITE /chaos/mutex 11"), "OK");
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "STALE");
    assert_eq!(g.request("LOST /chaos/mutex 10 NodeDeleted"), "OK");
    // Told in time: LOST before anyone else acted.
    assert_eq!(resource.command("OPDELETE /chaos/mutex 11"), "OPDELETE h");
    assert_eq!(resource.command("OPDELETE-DONE /chaos/mutex 11 deleted"), "OK");
    assert_eq!(h.request("LOST /chaos/mutex 11 NodeDeleted"), "OK");
    assert_eq!(k.request("BEGIN /chaos/mutex x 12 rust k"), "OK");
    assert_eq!(k.request("WRITE /chaos/mutex 12"), "OK");
    // A delete that found no node marks nothing: k's late END is k's own.
    assert_eq!(resource.command("OPDELETE /chaos/mutex 12"), "OPDELETE k");
    assert_eq!(resource.command("OPDELETE-DONE /chaos/mutex 12 nonode"), "OK");
    assert_eq!(g.request("BEGIN /chaos/mutex x 13 rust g"), "OK");
    assert_eq!(g.request("WRITE /chaos/mutex 13"), "OK");
    assert_eq!(k.request("END /chaos/mutex 12"), "OK");

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
    let (mut g, mut h) = (Holder::connect(&resource), Holder::connect(&resource));
    assert_eq!(g.request("BEGIN /chaos/mutex x 10 rust g"), "OK");
    assert_eq!(g.request("WRITE /chaos/mutex 10"), "OK");
    assert_eq!(h.request("BEGIN /chaos/mutex x 11 rust h"), "OK");
    assert_eq!(h.request("WRITE /chaos/mutex 11"), "OK"); // overlap, before any delete
    assert_eq!(resource.command("OPDELETE /chaos/mutex 10"), "OPDELETE g");
    assert_eq!(resource.command("OPDELETE-DONE /chaos/mutex 10 deleted"), "OK");
    assert_eq!(g.request("LOST /chaos/mutex 10 NodeDeleted"), "OK");
    let report = resource.report();
    assert_eq!(figure(&report, "zklock", "overlaps"), 1, "{report}");
    assert_eq!(figure(&report, "zklock", "late_lost_signals"), 1, "h acted before the delete: {report}");
    assert_eq!(report["violations"].get("operator_delete"), None, "{report}");
    assert_eq!(report["operator_deletes"]["victims"]["rust"]["told_late"], 1, "{report}");
}
