//! `zklock ls PREFIX`: the locks at and under PREFIX, each with its holder and how many wait.

use std::io::Write;

use crate::codes;
use crate::human::now_ms;
use crate::status::{failure_of, snapshot, Entry, SemaphoreStatus, Status};

const EXIT_CODES: &str = "\
A lock is any node whose children include lock nodes (zklock's in any language, Curator's or
kazoo's); a semaphore's path (zklock's or Curator's InterProcessSemaphoreV2) is listed as one, its
MODE \"semaphore\", its HOLDERS the leases held. Every node under PREFIX is listed once to find them: keep PREFIX narrow on a big tree.

A node under PREFIX whose ACL denies this client READ is not a failure: the rest is listed, and
each such path is named on stderr (\"cannot read PATH: ...\") and, with --json, is an element
{\"path\", \"kind\": \"unreadable\", \"error\": {\"kind\", \"message\"}} in path order among the locks.

Exit status:
  0   listed (also when there is no lock under PREFIX)
  64  bad usage: an unknown option, a missing argument, an invalid PREFIX
  69  ZooKeeper could not be reached, or no session could be established
  70  any other failure (such as ZooKeeper failing a listing)
  77  listed, but some paths under PREFIX could not be read (ZooKeeper refused this client
      READ): the listing may be missing locks under them

Examples:
  zklock ls --zk zk1:2181 /locks
  zklock ls --json / | jq -r '.[] | select(.held) | .path'";

/// List the locks at and under PREFIX, each with its holder and how many wait
#[derive(clap::Args, Debug)]
#[command(after_help = EXIT_CODES)]
pub struct Args {
    #[command(flatten)]
    pub connection: crate::connection::Connection,
    /// Print one JSON array of the documents `zklock status --json` prints, one a lock (or
    /// semaphore)
    #[arg(long)]
    pub json: bool,
    /// Where to look (relative to the chroot of --zk, if any); `/` for everywhere
    #[arg(default_value = "/")]
    pub prefix: String,
}

pub fn run(args: Args) -> i32 {
    // Bad input is told before any network traffic.
    if let Err(err) = zklock::check_prefix(&args.prefix) {
        return fail(codes::USAGE, &format!("PREFIX: {err}"));
    }
    let prefix = &args.prefix;
    let listed = match args.connection.with_client(|client| async move { list(&client, prefix).await }) {
        Ok(listed) => listed,
        Err((code, message)) => return fail(code, &message),
    };
    let text = if args.json {
        serde_json::to_string_pretty(&listed).expect("the locks serialize") + "\n"
    } else {
        table(&args.prefix, &listed)
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        if err.kind() != std::io::ErrorKind::BrokenPipe {
            return fail(codes::SOFTWARE, &format!("cannot write the list: {err}"));
        }
    }
    drop(stdout);
    let unreadable: Vec<&Unreadable> = listed.iter().filter_map(Listed::unreadable).collect();
    for path in &unreadable {
        fail(codes::PARTIAL, &format!("cannot read {}: {}", path.path, path.error.message));
    }
    if unreadable.is_empty() {
        0
    } else {
        codes::PARTIAL
    }
}

/// A lock or a semaphore, as `zklock status` shows it; or a path that could not be read.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Listed {
    Lock(Status),
    Semaphore(SemaphoreStatus),
    Unreadable(Unreadable),
}

/// A path under the prefix whose nodes this client may not read, as `--json` shows it among the
/// locks: field names are stable.
#[derive(serde::Serialize)]
struct Unreadable {
    path: String,
    /// Always "unreadable" (a lock's document has kind "lock", a semaphore's "semaphore").
    kind: &'static str,
    error: ErrorDocument,
}

#[derive(serde::Serialize)]
struct ErrorDocument {
    /// The core's kind ("permission denied").
    kind: &'static str,
    message: String,
}

impl Listed {
    /// `err` refused this client a listing or a node's data, at its path (else `path`).
    fn unreadable_at(path: &str, err: &zklock::Error) -> Listed {
        Listed::Unreadable(Unreadable {
            path: err.path().unwrap_or(path).to_owned(),
            kind: "unreadable",
            error: ErrorDocument { kind: err.kind().as_str(), message: err.message().to_owned() },
        })
    }

    fn unreadable(&self) -> Option<&Unreadable> {
        match self {
            Listed::Unreadable(unreadable) => Some(unreadable),
            _ => None,
        }
    }

    fn path(&self) -> &str {
        match self {
            Listed::Lock(lock) => &lock.path,
            Listed::Semaphore(semaphore) => &semaphore.path,
            Listed::Unreadable(unreadable) => &unreadable.path,
        }
    }

    fn held(&self) -> bool {
        match self {
            Listed::Lock(lock) => lock.held,
            Listed::Semaphore(semaphore) => semaphore.held,
            Listed::Unreadable(_) => false,
        }
    }

    fn holders(&self) -> &[Entry] {
        match self {
            Listed::Lock(lock) => &lock.holders,
            Listed::Semaphore(semaphore) => &semaphore.holders,
            Listed::Unreadable(_) => &[],
        }
    }

    /// Those queued (a semaphore's acquirers at its mutex).
    fn waiting(&self) -> usize {
        match self {
            Listed::Lock(lock) => lock.queue.len(),
            Listed::Semaphore(semaphore) => semaphore.queue.len(),
            Listed::Unreadable(_) => 0,
        }
    }

    fn mode(&self) -> &str {
        match self {
            Listed::Lock(lock) => lock.holders.first().and_then(|entry| entry.mode).unwrap_or("-"),
            Listed::Semaphore(_) => "semaphore",
            Listed::Unreadable(_) => "-",
        }
    }
}

/// Each lock under `prefix`, as `zklock status` sees it; one gone since the walk is left out, and
/// a semaphore nobody holds or waits for (its parts stay a while after its last user). A path
/// whose nodes this client may not read is listed as such, in path order: anyone may set the ACL
/// of the open containers zklock makes, so one such path must not hide the rest.
async fn list(client: &zklock::Client, prefix: &str) -> Result<Vec<Listed>, (i32, String)> {
    let found = client.readable_locks_under(prefix).await.map_err(|err| failure_of(&err))?;
    let mut listed: Vec<Listed> = found.unreadable.iter().map(|err| Listed::unreadable_at(prefix, err)).collect();
    for path in found.locks {
        match look_at(client, &path).await {
            Ok(Some(lock)) => listed.push(lock),
            Ok(None) => {}
            Err(err) if err.kind() == zklock::ErrorKind::PermissionDenied => {
                listed.push(Listed::unreadable_at(&path, &err))
            }
            Err(err) => return Err(failure_of(&err)),
        }
    }
    listed.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(listed)
}

/// The lock or semaphore at `path`, if it is in use.
async fn look_at(client: &zklock::Client, path: &str) -> zklock::Result<Option<Listed>> {
    let (contenders, holders) = snapshot(&client.lock(path)?).await?;
    if zklock::PathRecipe::of(&contenders) == zklock::PathRecipe::Semaphore {
        // As `zklock status` reads it (the max is not stored at the path).
        let view = client.semaphore(path, 1)?.participants().await?;
        let semaphore = SemaphoreStatus::new(path, view, now_ms());
        let in_use = semaphore.held || !semaphore.queue.is_empty() || !semaphore.acquiring.is_empty();
        return Ok(in_use.then_some(Listed::Semaphore(semaphore)));
    }
    Ok((!contenders.is_empty()).then(|| Listed::Lock(Status::new(path, contenders, holders, now_ms()))))
}

/// One row a lock: its path, held or free, the mode and owner of its first holder, how many
/// hold and how many wait.
fn table(prefix: &str, listed: &[Listed]) -> String {
    let locks: Vec<&Listed> = listed.iter().filter(|listed| listed.unreadable().is_none()).collect();
    if locks.is_empty() {
        return format!("no locks under {}\n", crate::human::printable(prefix));
    }
    let header = ["PATH", "STATE", "MODE", "HOLDERS", "WAITING", "FIRST HOLDER"].map(str::to_owned);
    let rows: Vec<[String; 6]> = std::iter::once(header)
        .chain(locks.iter().map(|lock| {
            let first = lock.holders().first();
            [
                crate::human::printable(lock.path()),
                if lock.held() { "held" } else { "free" }.to_owned(),
                lock.mode().to_owned(),
                lock.holders().len().to_string(),
                lock.waiting().to_string(),
                first.map_or("-".to_owned(), |entry| entry.identity.describe()),
            ]
        }))
        .collect();
    crate::status::columns(&rows)
}

fn fail(code: i32, message: &str) -> i32 {
    // The core's messages name paths as the server has them.
    crate::say!("zklock ls: {}", crate::human::printable(message));
    code
}
