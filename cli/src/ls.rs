//! `zklock ls PREFIX`: the locks at and under PREFIX, each with its holder and how many wait.

use std::io::Write;

use crate::codes;
use crate::human::now_ms;
use crate::status::{failure_of, semaphore_status, snapshot, Entry, SemaphoreStatus, Status};

const EXIT_CODES: &str = "\
A lock is any node whose children include lock nodes (zklock's in any language, Curator's or
kazoo's); a semaphore's path (zklock's or Curator's InterProcessSemaphoreV2) is listed as one, its
MODE \"semaphore\", its HOLDERS the leases held. Every node under PREFIX is listed once to find them: keep PREFIX narrow on a big tree.

Exit status:
  0   listed (also when there is no lock under PREFIX)
  64  bad usage: an unknown option, a missing argument, an invalid PREFIX
  69  ZooKeeper could not be reached, or no session could be established
  70  any other failure (such as ZooKeeper refusing a listing)

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
    let locks = match args.connection.with_client(|client| async move { list(&client, prefix).await }) {
        Ok(locks) => locks,
        Err((code, message)) => return fail(code, &message),
    };
    let text = if args.json {
        serde_json::to_string_pretty(&locks).expect("the locks serialize") + "\n"
    } else {
        table(&args.prefix, &locks)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Err(err) if err.kind() != std::io::ErrorKind::BrokenPipe => {
            fail(codes::SOFTWARE, &format!("cannot write the list: {err}"))
        }
        _ => 0,
    }
}

/// A lock or a semaphore, as `zklock status` shows it.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum Listed {
    Lock(Status),
    Semaphore(SemaphoreStatus),
}

impl Listed {
    fn path(&self) -> &str {
        match self {
            Listed::Lock(lock) => &lock.path,
            Listed::Semaphore(semaphore) => &semaphore.path,
        }
    }

    fn held(&self) -> bool {
        match self {
            Listed::Lock(lock) => lock.held,
            Listed::Semaphore(semaphore) => semaphore.held,
        }
    }

    fn holders(&self) -> &[Entry] {
        match self {
            Listed::Lock(lock) => &lock.holders,
            Listed::Semaphore(semaphore) => &semaphore.holders,
        }
    }

    /// Those queued (a semaphore's acquirers at its mutex).
    fn waiting(&self) -> usize {
        match self {
            Listed::Lock(lock) => lock.queue.len(),
            Listed::Semaphore(semaphore) => semaphore.queue.len(),
        }
    }

    fn mode(&self) -> &str {
        match self {
            Listed::Lock(lock) => lock.holders.first().and_then(|entry| entry.mode).unwrap_or("-"),
            Listed::Semaphore(_) => "semaphore",
        }
    }
}

/// Each lock under `prefix`, as `zklock status` sees it; one gone since the walk is left out, and
/// a semaphore nobody holds or waits for (its parts stay a while after its last user).
async fn list(client: &zklock::Client, prefix: &str) -> Result<Vec<Listed>, (i32, String)> {
    let paths = client.locks_under(prefix).await.map_err(|err| failure_of(&err))?;
    let mut locks = Vec::with_capacity(paths.len());
    for path in paths {
        let lock = client.lock(&path).map_err(|err| failure_of(&err))?;
        let (contenders, holders) = snapshot(&lock).await.map_err(|err| failure_of(&err))?;
        if zklock::PathRecipe::of(&contenders) == zklock::PathRecipe::Semaphore {
            let semaphore = semaphore_status(client, &path).await?;
            if semaphore.held || !semaphore.queue.is_empty() || !semaphore.acquiring.is_empty() {
                locks.push(Listed::Semaphore(semaphore));
            }
        } else if !contenders.is_empty() {
            locks.push(Listed::Lock(Status::new(&path, contenders, holders, now_ms())));
        }
    }
    Ok(locks)
}

/// One row a lock: its path, held or free, the mode and owner of its first holder, how many
/// hold and how many wait.
fn table(prefix: &str, locks: &[Listed]) -> String {
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
    eprintln!("zklock ls: {message}");
    code
}
