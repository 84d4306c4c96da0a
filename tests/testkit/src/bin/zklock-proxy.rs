//! The testkit's fault proxy as a program, for the C, Python and Node tests: one TCP proxy in
//! front of one ZooKeeper server, driven by lines on stdin.
//!
//!   zklock-proxy UPSTREAM            (e.g. `zklock-proxy 127.0.0.1:2181`)
//!
//! It prints `LISTEN 127.0.0.1:PORT` once it accepts connections, then reads one command per
//! line and answers `OK <command>` once the command has taken effect:
//! * `pass`  forward in both directions (the start mode; delivers anything held by a stall);
//! * `stall` forward nothing, keep connections open: the client's session times out and the
//!   server expires it, which is how tests make a real expiry;
//! * `cut`   reset every connection and refuse new ones until `pass` or `stall`;
//! * `stall-upstream`    one-way loss: hold what clients send, forward what the server sends
//!   (the server expires the session while its notifications still reach the client);
//! * `stall-downstream`  the other way: hold what the server sends, forward what clients send;
//! * `cut-after-connect-response`  arm a one-shot trigger: the next new connection gets its
//!   ConnectResponse through, then every connection is reset and new ones refused (as `cut`)
//!   until `pass`. `OK` once armed, not once fired.
//! * `wait-connect-cut`  `OK` once the armed `cut-after-connect-response` has fired and the
//!   connection it let the response through is closed (at once if none is armed), `ERR` if that
//!   takes over a minute; the other commands wait meanwhile.
//!
//! (The modes are the testkit's `Proxy` methods of the same names; see its documentation.)
//!
//! It exits when stdin reaches end of file, so it never outlives the test that started it.

use std::io::{BufRead, Write};
use std::time::Duration;

use zklock_testkit::Proxy;

const COMMANDS: &str =
    "pass, stall, cut, stall-upstream, stall-downstream, cut-after-connect-response, wait-connect-cut";

fn main() {
    let upstream = match std::env::args().nth(1) {
        Some(upstream) if std::env::args().len() == 2 => upstream,
        _ => {
            eprintln!("usage: zklock-proxy UPSTREAM_HOST:PORT  (commands on stdin: {COMMANDS})");
            std::process::exit(2);
        }
    };
    let proxy = Proxy::start(&upstream);
    let mut out = std::io::stdout().lock();
    writeln!(out, "LISTEN {}", proxy.address()).and_then(|()| out.flush()).expect("stdout");
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        let command = line.trim();
        match command {
            "pass" => proxy.pass(),
            "stall" => proxy.stall(),
            "cut" => proxy.cut(),
            "stall-upstream" => proxy.stall_upstream(),
            "stall-downstream" => proxy.stall_downstream(),
            "cut-after-connect-response" => proxy.cut_after_next_connect_response(),
            "wait-connect-cut" => {
                if !proxy.wait_connect_cut(Duration::from_secs(60)) {
                    writeln!(out, "ERR {command}: the armed cut did not fire within 60 s")
                        .and_then(|()| out.flush())
                        .ok();
                    continue;
                }
            }
            "" => continue,
            other => {
                writeln!(out, "ERR unknown command {other:?} ({COMMANDS})").and_then(|()| out.flush()).ok();
                continue;
            }
        }
        writeln!(out, "OK {command}").and_then(|()| out.flush()).expect("stdout");
    }
}
