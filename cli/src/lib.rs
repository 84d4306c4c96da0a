//! `zklock`: run a command under a ZooKeeper lock (`zklock exec`), and see who holds and who
//! waits (`zklock status`). Built on the zklock core, so it queues fairly with zklock in any
//! language and with Curator.
//!
//! A library so that the command has one implementation wherever it is installed from: the
//! `zklock` binary (`make install`) and the Python package's `zklock` console script (the wheel's
//! native module links this crate) both run [`main`].

/// Writes a line to stderr. A failed write (a full disk, a closed pipe) is ignored: no message
/// may stand between zklock and what it must do next, and the command never panics over one.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(crate) use say;

mod child;
mod codes;
mod connection;
mod exec;
mod human;
mod ls;
mod status;
mod status_line;
mod watchdog;

use std::ffi::OsString;
use std::io::Write;

use clap::{Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  # A cron job that must never run twice at once across machines (skips if already running):
  */5 * * * * zklock exec -n --zk zk1:2181,zk2:2181 /locks/report -- /usr/local/bin/report

  # A deploy script that waits up to 10 minutes for the previous deploy:
  zklock exec -w 600 --label deploy-$USER /locks/deploy -- ./deploy.sh production

  # At most 3 nightly jobs at once, across machines (a semaphore; the others wait their turn):
  zklock exec --max 3 --zk zk1:2181 /semaphores/backend -- ./nightly-job.sh

  # A shell script that locks its own remainder:
  coproc LOCK { zklock hold --zk zk1:2181 /locks/deploy; }
  read -r NODE TOKEN <&\"${LOCK[0]}\"   # held from here; closing its stdin releases it

  # Who holds it, and who waits:
  zklock status --zk zk1:2181 /locks/deploy

  # Every lock under /locks, with its holder and how many wait:
  zklock ls --zk zk1:2181 /locks

Run `zklock exec --help`, `zklock status --help` and `zklock ls --help` for the exit codes.";

#[derive(Parser)]
#[command(name = "zklock", version, about = "Run a command under a ZooKeeper lock, and see who holds and who waits", after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Exec(exec::Args),
    /// Take the lock, print its node and fencing token, and hold it until stdin closes
    #[command(after_help = exec::hold_after_help())]
    Hold(exec::HoldArgs),
    Status(status::Args),
    Ls(ls::Args),
}

/// Runs the command line `args` (the program name first) and returns the exit status; the
/// caller exits with it. It owns the process while it runs, as a program's main does: `exec` and
/// `hold` block SIGINT, SIGTERM and SIGHUP in the calling thread (before starting threads of their
/// own, which inherit that), start COMMAND as a child whose parent-death signal is tied to the
/// calling thread, and stop the process with COMMAND on Ctrl-Z. So it is called on the main
/// thread, before any other thread is started, with SIGINT at its default.
/// `run`'s exit code, or EX_SOFTWARE (70) if it panicked (the panic's message is printed):
/// Rust's 101 is not among the codes the command documents.
fn software_on_panic(run: impl FnOnce() -> i32) -> i32 {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or(codes::SOFTWARE)
}

pub fn main(args: impl IntoIterator<Item = OsString>) -> i32 {
    use clap::{CommandFactory, FromArgMatches};
    let parsed = Cli::command().try_get_matches_from(args).and_then(|matches| {
        let cli = Cli::from_arg_matches(&matches)?;
        Ok((cli, matches))
    });
    let (mut cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(err) => {
            let _ = err.print();
            return if err.use_stderr() { codes::USAGE } else { 0 };
        }
    };
    // Which options the environment gave: flags override it, never conflict with it.
    if let Some((_, sub)) = matches.subcommand() {
        let from_env: Vec<&'static str> = connection::ENV_IDS
            .into_iter()
            .filter(|id| sub.value_source(id) == Some(clap::parser::ValueSource::EnvVariable))
            .collect();
        match &mut cli.command {
            Command::Exec(args) => args.connection.from_env = from_env,
            Command::Hold(args) => args.connection.from_env = from_env,
            Command::Status(args) => args.connection.from_env = from_env,
            Command::Ls(args) => args.connection.from_env = from_env,
        }
    }
    let code = match cli.command {
        // A panic ends zklock (the watchdog then ends the job) with a documented code.
        Command::Exec(args) => software_on_panic(|| exec::run(args)),
        Command::Hold(args) => software_on_panic(|| exec::hold(args)),
        // Never a code a script could read as "free" (3) or "held" (0), whatever went wrong.
        Command::Status(args) => software_on_panic(|| status::run(args)),
        Command::Ls(args) => software_on_panic(|| ls::run(args)),
    };
    // What is buffered goes out before the caller exits (std::process::exit flushes stdout only
    // when called from a Rust program's own main).
    let _ = std::io::stdout().flush();
    code
}
