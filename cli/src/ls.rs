//! `zklock ls PREFIX`: the locks at and under PREFIX, each with its holder and how many wait.

use std::io::Write;

use crate::codes;
use crate::human::now_ms;
use crate::status::{failure_of, snapshot, Status};

const EXIT_CODES: &str = "\
A lock is any node whose children include lock nodes (zklock's in any language, Curator's or
kazoo's). Every node under PREFIX is listed once to find them: keep PREFIX narrow on a big tree.

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
    /// Print one JSON array of the documents `zklock status --json` prints, one a lock
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

/// Each lock under `prefix`, as `zklock status` sees it; one gone since the walk is left out.
async fn list(client: &zklock::Client, prefix: &str) -> Result<Vec<Status>, (i32, String)> {
    let paths = client.locks_under(prefix).await.map_err(|err| failure_of(&err))?;
    let mut locks = Vec::with_capacity(paths.len());
    for path in paths {
        let lock = client.lock(&path).map_err(|err| failure_of(&err))?;
        let (contenders, holders) = snapshot(&lock).await.map_err(|err| failure_of(&err))?;
        if !contenders.is_empty() {
            locks.push(Status::new(&path, contenders, holders, now_ms()));
        }
    }
    Ok(locks)
}

/// One row a lock: its path, held or free, the mode and owner of its first holder, how many
/// hold and how many wait.
fn table(prefix: &str, locks: &[Status]) -> String {
    if locks.is_empty() {
        return format!("no locks under {}\n", crate::human::printable(prefix));
    }
    let header = ["PATH", "STATE", "MODE", "HOLDERS", "WAITING", "FIRST HOLDER"].map(str::to_owned);
    let rows: Vec<[String; 6]> = std::iter::once(header)
        .chain(locks.iter().map(|lock| {
            let first = lock.holders.first();
            [
                crate::human::printable(&lock.path),
                if lock.held { "held" } else { "free" }.to_owned(),
                first.and_then(|entry| entry.mode).unwrap_or("-").to_owned(),
                lock.holders.len().to_string(),
                lock.queue.len().to_string(),
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
