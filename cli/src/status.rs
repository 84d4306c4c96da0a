//! `zklock status PATH`: who holds the lock at PATH and who waits, in queue order.

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use serde::Serialize;
use zklock::Participant;

use crate::codes;
use crate::human::{duration, now_ms, printable};

const EXIT_CODES: &str = "\
Works on a mutex and on a read/write lock (zklock's in any language, or Curator's), and on a
counting semaphore (zklock's, or Curator's InterProcessSemaphoreV2): its leases held, the leases
the acquirer at the head of the queue has made but that do not fit yet (\"acquiring\"), and the
acquirers queued at its internal mutex. The max is not stored at the path: it is not shown.

QUEUED FOR is the time since each node was made (the server's clock against this host's). A
holder has held the lock since that moment or later: ZooKeeper does not record when it got it.

Exit status:
  0   the lock is held (a semaphore: a lease is held)
  3   the lock is free: nobody holds it (also when PATH has no node: ZooKeeper removes an
      unused lock's node by itself, so a free lock's path may well be gone)
  64  bad usage: an unknown option, a missing argument, an invalid PATH
  65  PATH is not a lock: it has children, and none of them is a lock node
  69  ZooKeeper could not be reached, or no session could be established
  70  any other failure (such as ZooKeeper refusing the listing)

Examples:
  zklock status --zk zk1:2181,zk2:2181 /locks/deploy
  zklock status --json /locks/report | jq '.holders[0].identity'
  if zklock status /locks/report >/dev/null; then echo busy; fi";

/// Show who holds the lock at PATH and who waits, in queue order
#[derive(clap::Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub connection: crate::connection::Connection,
    /// Print one JSON document {path, kind, held, holders, queue} instead of a table
    #[arg(long)]
    pub json: bool,
    /// Show it again every SECS (default 2) until interrupted, on a terminal in place (with
    /// --json, one document a line)
    #[arg(long, value_name = "SECS", num_args = 0..=1, default_missing_value = "2")]
    pub watch: Option<f64>,
    /// The lock path (relative to the chroot of --zk, if any)
    pub path: String,
}

pub fn run(args: Args) -> i32 {
    // Bad input is told before any network traffic.
    if let Err(err) = zklock::check_lock_path(&args.path) {
        return fail(codes::USAGE, &format!("PATH: {err}"));
    }
    let interval = match args.watch.map(Duration::try_from_secs_f64) {
        None => None,
        Some(Ok(interval)) if !interval.is_zero() => Some(interval),
        Some(_) => {
            return fail(codes::USAGE, &format!("--watch {}: a positive number of seconds", args.watch.unwrap_or(0.0)))
        }
    };
    let args = &args;
    let shown = args.connection.with_client(|client| async move {
        let lock = client.lock(&args.path).map_err(|err| failure_of(&err))?;
        show_until_done(args, &lock, interval).await
    });
    match shown {
        Ok(code) => code,
        Err((code, message)) => fail(code, &message),
    }
}

/// Shows the status once, or with an interval again and again (until an error, or a signal ends
/// the process); the exit code of the last one shown.
async fn show_until_done(args: &Args, lock: &zklock::Lock, interval: Option<Duration>) -> Result<i32, (i32, String)> {
    loop {
        let (contenders, holders) = match snapshot(lock).await {
            Ok(snapshot) => snapshot,
            // Watching: a lost connection or session is told, and looked through again (the core
            // makes a new session), as `watch` would go on.
            Err(err) if interval.is_some() && passing(&err) => {
                crate::say!("zklock status: {}; trying again", printable(&failure_of(&err).1));
                tokio::time::sleep(interval.unwrap_or_default()).await;
                continue;
            }
            Err(err) => return Err(failure_of(&err)),
        };
        let (text, code) = if zklock::PathRecipe::of(&contenders) == zklock::PathRecipe::Semaphore {
            let status = semaphore_status(&lock.client(), &args.path).await?;
            (render(args, interval, &status, || status.table()), if status.held { 0 } else { codes::FREE })
        } else {
            if !contenders.is_empty() && contenders.iter().all(|p| p.mode.is_none()) {
                let names: Vec<String> = contenders.iter().take(3).map(|p| printable(&p.node)).collect();
                let more = if contenders.len() > names.len() { ", ..." } else { "" };
                let message = format!(
                    "{} is not a lock: none of its children is a lock node ({}{more})",
                    printable(&args.path),
                    names.join(", ")
                );
                return Err((codes::NOT_A_LOCK, message));
            }
            let status = Status::new(&args.path, contenders, holders, now_ms());
            (render(args, interval, &status, || status.table()), status_code(&status))
        };
        let mut stdout = std::io::stdout().lock();
        match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
            // A reader that has seen enough (`| head -1`) is not a failure.
            Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => return Ok(code),
            Err(err) => return Err((codes::SOFTWARE, format!("cannot write the status: {err}"))),
            Ok(()) => {}
        }
        drop(stdout);
        let Some(interval) = interval else { return Ok(code) };
        tokio::time::sleep(interval).await;
    }
}

/// A status as the options say: JSON (one line a document with --watch) or the table (in place
/// on a terminal with --watch).
fn render(args: &Args, interval: Option<Duration>, status: &impl Serialize, table: impl FnOnce() -> String) -> String {
    match (args.json, interval.is_some()) {
        (true, false) => serde_json::to_string_pretty(status).expect("the status serializes") + "\n",
        (true, true) => serde_json::to_string(status).expect("the status serializes") + "\n",
        // SAFETY: isatty only inspects the descriptor.
        (false, true) if unsafe { libc::isatty(1) } == 1 => format!("\x1b[H\x1b[2J{}", table()),
        (false, true) => table() + "\n",
        (false, false) => table(),
    }
}

fn status_code(status: &Status) -> i32 {
    if status.held {
        0
    } else {
        codes::FREE
    }
}

/// An error that a later look may not meet: the connection or the session, not the path.
fn passing(err: &zklock::Error) -> bool {
    use zklock::ErrorKind::*;
    matches!(err.kind(), ConnectionLoss | SessionExpired | Timeout)
}

pub(crate) fn failure_of(err: &zklock::Error) -> (i32, String) {
    let code = codes::of_error(err);
    let cannot_reach = if code == codes::UNAVAILABLE { "cannot reach ZooKeeper: " } else { "" };
    (code, format!("{cannot_reach}{err}"))
}

fn fail(code: i32, message: &str) -> i32 {
    // The core's messages name paths and nodes as the server has them.
    crate::say!("zklock status: {}", printable(message));
    code
}

/// Every participant in queue order, and the holders among them, from one listing.
pub(crate) async fn snapshot(lock: &zklock::Lock) -> zklock::Result<(Vec<Participant>, Vec<Participant>)> {
    let queue = lock.contenders().await?;
    let holders = Participant::holders_in(&queue).into_iter().map(|i| queue[i].clone()).collect();
    Ok((queue, holders))
}

/// A semaphore's leases and queue, from the core's one listing of each of its parts.
pub(crate) async fn semaphore_status(client: &zklock::Client, path: &str) -> Result<SemaphoreStatus, (i32, String)> {
    // The max is not stored at the path (Curator stores it nowhere): with max 1 the core counts
    // as acquiring the leases the acquirer at the head of the mutex queue made since it queued,
    // while there are two or more. That is what they are, but for the moment between their
    // fitting and its releasing the mutex.
    let semaphore = client.semaphore(path, 1).map_err(|err| failure_of(&err))?;
    let view = semaphore.participants().await.map_err(|err| failure_of(&err))?;
    Ok(SemaphoreStatus::new(path, view, now_ms()))
}

/// A semaphore's status, as `--json` prints it: field names are stable.
#[derive(Serialize, Debug)]
pub(crate) struct SemaphoreStatus {
    pub(crate) path: String,
    /// Always "semaphore" (a lock's is "lock").
    kind: &'static str,
    /// Whether any lease is held.
    pub(crate) held: bool,
    /// The leases held, oldest first (mode "lease").
    pub(crate) holders: Vec<Entry>,
    /// The lease nodes of the acquirer at the head of `queue`, made but not fitting yet.
    pub(crate) acquiring: Vec<Entry>,
    /// The acquirers at the semaphore's internal mutex, in order (mode "exclusive").
    pub(crate) queue: Vec<Entry>,
}

impl SemaphoreStatus {
    pub(crate) fn new(path: &str, view: zklock::SemaphoreParticipants, now_ms: i64) -> SemaphoreStatus {
        let held = view.holders().len();
        let lease = |p: Participant| Entry { mode: Some("lease"), ..Entry::new(p, now_ms) };
        let mut leases = view.leases.into_iter();
        let holders: Vec<Entry> = leases.by_ref().take(held).map(lease).collect();
        SemaphoreStatus {
            path: path.to_owned(),
            kind: "semaphore",
            held: !holders.is_empty(),
            holders,
            acquiring: leases.map(lease).collect(),
            queue: view.queue.into_iter().map(|p| Entry::new(p, now_ms)).collect(),
        }
    }

    fn summary(&self) -> String {
        let waiting = match self.queue.len() {
            0 => "nobody waits".to_owned(),
            n => format!("{n} waiting"),
        };
        format!("{}: semaphore, {} leases held; {waiting}", printable(&self.path), self.holders.len())
    }

    /// A summary line, then the leases held, those being acquired, and the acquirers queued.
    fn table(&self) -> String {
        let rows = (self.holders.iter().map(|entry| ("holding", entry)))
            .chain(self.acquiring.iter().map(|entry| ("acquiring", entry)))
            .chain(self.queue.iter().map(|entry| ("waiting", entry)));
        self.summary() + "\n" + &entry_rows(rows.collect())
    }
}

/// The whole answer, as `--json` prints it: field names are stable.
#[derive(Serialize, Debug)]
pub(crate) struct Status {
    pub(crate) path: String,
    /// Always "lock" (a semaphore's is "semaphore"), whichever lock recipe.
    kind: &'static str,
    pub(crate) held: bool,
    pub(crate) holders: Vec<Entry>,
    pub(crate) queue: Vec<Entry>,
}

/// One participant.
#[derive(Serialize, Debug)]
pub(crate) struct Entry {
    /// "exclusive", "read", "write", or null for a node of no known lock.
    pub(crate) mode: Option<&'static str>,
    node: String,
    sequence: Option<i64>,
    fencing_token: i64,
    session_id: i64,
    /// As ZooKeeper's own tools print session ids.
    session_id_hex: String,
    /// When the node was made: the server's clock, milliseconds since the Unix epoch.
    created_ms: i64,
    /// This host's clock minus `created_ms`, at least 0: how long it has queued (and a holder
    /// has held for at most this long).
    queued_for_ms: i64,
    pub(crate) identity: Identity,
}

/// Who made the node, as its data says.
#[derive(Serialize, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(crate) enum Identity {
    /// zklock, in any language.
    Zklock { host: String, pid: u32, label: String, language: String, identifier: Option<String> },
    /// Curator, which writes the client's IP address.
    Curator { address: String },
    /// kazoo, which writes the contender's identifier.
    Kazoo { identifier: String },
    /// Anything else: the node's data, as text.
    Unknown { data: String },
    /// Data that was not read: too large (another client's), or not readable by this client.
    Unread { data_length: usize },
}

impl Identity {
    fn of(participant: &Participant) -> Identity {
        if let Some(id) = &participant.identity {
            return Identity::Zklock {
                host: id.host.clone(),
                pid: id.pid,
                label: id.owner.clone(),
                language: id.lang.clone(),
                identifier: id.identifier.clone(),
            };
        }
        if !participant.data_was_read() {
            return Identity::Unread { data_length: participant.data_length };
        }
        let data = String::from_utf8_lossy(&participant.data).into_owned();
        if participant.is_kazoos() {
            return Identity::Kazoo { identifier: data };
        }
        match data.trim().parse::<IpAddr>() {
            Ok(address) => Identity::Curator { address: address.to_string() },
            Err(_) => Identity::Unknown { data },
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Identity::Zklock { host, pid, label, language, identifier } => {
                let identifier =
                    identifier.as_ref().map(|id| format!(", identifier {}", printable(id))).unwrap_or_default();
                let (label, host, language) = (printable(label), printable(host), printable(language));
                format!("{label} (host {host}, pid {pid}, {language}{identifier})")
            }
            Identity::Curator { address } => format!("Curator at {address}"),
            Identity::Kazoo { identifier } if identifier.is_empty() => "kazoo (no identifier)".to_owned(),
            Identity::Kazoo { identifier } => {
                let shown: String = identifier.chars().take(40).collect();
                let cut = if shown.len() < identifier.len() { "..." } else { "" };
                format!("kazoo ({shown:?}{cut})")
            }
            Identity::Unknown { data } if data.is_empty() => "unknown (no data)".to_owned(),
            Identity::Unknown { data } => {
                let shown: String = data.chars().take(40).collect();
                let cut = if shown.len() < data.len() { "..." } else { "" };
                format!("unknown (data {:?}{cut})", shown)
            }
            Identity::Unread { data_length } => format!("not read ({data_length} bytes of data)"),
        }
    }
}

impl Entry {
    fn new(participant: Participant, now_ms: i64) -> Entry {
        Entry {
            mode: participant.mode.map(|mode| mode.as_str()),
            identity: Identity::of(&participant),
            sequence: participant.sequence,
            fencing_token: participant.fencing_token,
            session_id: participant.session_id,
            session_id_hex: format!("{:#x}", participant.session_id),
            created_ms: participant.created_ms,
            queued_for_ms: (now_ms - participant.created_ms).max(0),
            node: participant.node,
        }
    }
}

impl Status {
    pub(crate) fn new(path: &str, contenders: Vec<Participant>, holders: Vec<Participant>, now_ms: i64) -> Status {
        let holding = |p: &Participant| holders.iter().any(|h| h.node == p.node);
        let (held_now, waiting): (Vec<Participant>, Vec<Participant>) = contenders.into_iter().partition(holding);
        Status {
            path: path.to_owned(),
            kind: "lock",
            held: !held_now.is_empty(),
            holders: held_now.into_iter().map(|p| Entry::new(p, now_ms)).collect(),
            queue: waiting.into_iter().map(|p| Entry::new(p, now_ms)).collect(),
        }
    }

    fn summary(&self) -> String {
        let waiting = match self.queue.len() {
            0 => "nobody waits".to_owned(),
            n => format!("{n} waiting"),
        };
        match self.holders.first() {
            None => format!("{}: free; {waiting}", printable(&self.path)),
            Some(first) => {
                let mode = first.mode.unwrap_or("unknown");
                format!("{}: held ({mode}) by {}; {waiting}", printable(&self.path), self.holders.len())
            }
        }
    }

    /// The human-readable form: a summary line, then one row per participant in queue order.
    fn table(&self) -> String {
        let rows = (self.holders.iter().map(|entry| ("holding", entry)))
            .chain(self.queue.iter().map(|entry| ("waiting", entry)));
        self.summary() + "\n" + &entry_rows(rows.collect())
    }
}

/// One aligned row per entry, with its state, under a header; nothing if there are none.
fn entry_rows(entries: Vec<(&str, &Entry)>) -> String {
    if entries.is_empty() {
        return String::new();
    }
    let header = ["STATE", "MODE", "SEQUENCE", "FENCING TOKEN", "SESSION", "QUEUED FOR", "OWNER", "NODE"];
    let row = |(state, entry): (&str, &Entry)| {
        [
            state.to_owned(),
            entry.mode.unwrap_or("?").to_owned(),
            entry.sequence.map_or("-".to_owned(), |seq| seq.to_string()),
            entry.fencing_token.to_string(),
            entry.session_id_hex.clone(),
            duration(entry.queued_for_ms),
            entry.identity.describe(),
            // Another client's choice, as its label is.
            printable(&entry.node),
        ]
    };
    let rows: Vec<[String; 8]> =
        std::iter::once(header.map(str::to_owned)).chain(entries.into_iter().map(row)).collect();
    columns(&rows)
}

/// The most characters of a cell the table shows: the cells come from other clients' node data,
/// which may be megabytes (`--json` shows them whole).
const CELL_MAX: usize = 200;

/// A cell cut to [`CELL_MAX`] characters, with an ellipsis if it was longer.
fn cut(cell: &str) -> std::borrow::Cow<'_, str> {
    match cell.char_indices().nth(CELL_MAX) {
        None => cell.into(),
        Some((end, _)) => format!("{}…", &cell[..end]).into(),
    }
}

/// Rows as aligned columns, the last one left ragged; long cells cut (see [`CELL_MAX`]).
pub(crate) fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let rows: Vec<Vec<std::borrow::Cow<'_, str>>> =
        rows.iter().map(|row| row.iter().map(|c| cut(c)).collect()).collect();
    let mut widths = [0; N];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                // Padded by hand: `format!`'s width panics past 65,535.
                line.push_str(&" ".repeat(width - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
