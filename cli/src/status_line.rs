//! The status line `zklock exec` draws on a terminal while it waits: how many are ahead, and who
//! holds the lock for how long.

use std::collections::HashMap;
use std::io::{self, Write};
use std::time::Duration;

use zklock::{Client, Lock, Participant, Semaphore};

use crate::human::{duration, now_ms, printable};

/// An uncontended acquisition is usually done by then: no status line flashes by.
pub(crate) const STATUS_LINE_DELAY: Duration = Duration::from_millis(250);
pub(crate) const STATUS_LINE_INTERVAL: Duration = Duration::from_secs(1);

/// Draws the status line while waiting, about once a second; never returns.
pub(crate) async fn show_status(lock: &Lock, client: &Client, enabled: bool) {
    if !enabled {
        return std::future::pending().await;
    }
    tokio::time::sleep(STATUS_LINE_DELAY).await;
    let mut queue_line = QueueLine::default();
    loop {
        if let (Ok(queue), Ok(holders)) = (lock.contenders().await, lock.holders().await) {
            let line = queue_line.describe(lock.path(), client.session_id(), &queue, &holders, now_ms());
            draw(&line);
        }
        tokio::time::sleep(STATUS_LINE_INTERVAL).await;
    }
}

/// The semaphore's status line while waiting for a lease, about once a second; never returns.
pub(crate) async fn show_semaphore_status(semaphore: &Semaphore, client: &Client, enabled: bool) {
    if !enabled {
        return std::future::pending().await;
    }
    tokio::time::sleep(STATUS_LINE_DELAY).await;
    loop {
        if let Ok(view) = semaphore.participants().await {
            let session = client.session_id();
            let ahead = view.queue.iter().position(|p| Some(p.session_id) == session).unwrap_or(view.queue.len());
            let holders = view.holders();
            let mut line = format!(
                "zklock: waiting for a lease of {}: {ahead} ahead; {} of {} held",
                semaphore.path(),
                holders.len(),
                view.max_leases
            );
            if let Some(oldest) = holders.iter().min_by_key(|p| p.created_ms) {
                line +=
                    &format!(", the oldest by {} for {}", who(oldest), duration((now_ms() - oldest.created_ms).max(0)));
            }
            draw(&line);
        }
        tokio::time::sleep(STATUS_LINE_INTERVAL).await;
    }
}

/// Draws the line in place, only while zklock is in the foreground of the terminal (a background
/// zklock does not draw over the prompt); a failed write is ignored.
fn draw(line: &str) {
    if crate::child::foreground_on_stderr() {
        let mut stderr = io::stderr();
        let _ = write!(stderr, "\r\x1b[K{}", fit_terminal(line));
        let _ = stderr.flush();
    }
}

/// Clears the status line, if zklock is in the foreground (where it was drawn).
pub(crate) fn clear_status() {
    if crate::child::foreground_on_stderr() {
        let mut stderr = io::stderr();
        let _ = write!(stderr, "\r\x1b[K");
        let _ = stderr.flush();
    }
}

/// What the status line says, and what it remembers between two looks at the queue.
#[derive(Default)]
pub(crate) struct QueueLine {
    /// Each node seen waiting, then holding: when we first saw it hold (ms since the epoch).
    /// ZooKeeper records when a node was made, not when it came to hold.
    holding_since: HashMap<String, i64>,
    seen_waiting: std::collections::HashSet<String>,
}

impl QueueLine {
    fn describe(
        &mut self,
        path: &str,
        session: Option<i64>,
        queue: &[Participant],
        holders: &[Participant],
        now_ms: i64,
    ) -> String {
        let ahead = queue.iter().position(|p| Some(p.session_id) == session).unwrap_or(queue.len());
        for p in queue {
            let holding = holders.iter().any(|h| h.node == p.node);
            if !holding {
                self.seen_waiting.insert(p.node.clone());
            } else if !self.holding_since.contains_key(&p.node) {
                let since = if self.seen_waiting.contains(&p.node) { now_ms } else { p.created_ms };
                self.holding_since.insert(p.node.clone(), since);
            }
        }
        let mut line = format!("zklock: waiting for {path}: {ahead} ahead");
        let held = |p: &Participant| {
            let since = self.holding_since.get(&p.node).copied().unwrap_or(p.created_ms);
            format!("{} for {}", who(p), duration((now_ms - since).max(0)))
        };
        match holders {
            [] => {}
            [holder] => line += &format!("; held by {}", held(holder)),
            [first, rest @ ..] => {
                line += &format!("; held by {} readers: {} and {} more", holders.len(), held(first), rest.len())
            }
        }
        line
    }
}

/// A participant as people would name it: label, pid and host, or what its node says.
pub(crate) fn who(p: &Participant) -> String {
    match &p.identity {
        Some(identity) => {
            format!("{} (pid {} on {})", printable(&identity.owner), identity.pid, printable(&identity.host))
        }
        None => match std::str::from_utf8(&p.data) {
            // Curator writes the client's address.
            Ok(data) if !data.is_empty() && data.len() <= 64 => {
                format!("session 0x{:x} ({})", p.session_id, printable(data))
            }
            _ => format!("session 0x{:x}", p.session_id),
        },
    }
}

/// The line cut to the terminal's width: a line that wraps cannot be redrawn in place.
pub(crate) fn fit_terminal(line: &str) -> String {
    // SAFETY: TIOCGWINSZ fills a winsize.
    let columns = unsafe {
        let mut size = std::mem::zeroed::<libc::winsize>();
        if libc::ioctl(2, libc::TIOCGWINSZ, &mut size) == 0 {
            usize::from(size.ws_col)
        } else {
            0
        }
    };
    match columns {
        0 => line.to_owned(),
        columns => line.chars().take(columns - 1).collect(),
    }
}
