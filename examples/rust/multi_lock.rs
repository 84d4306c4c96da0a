//! Recipes, the multi-lock: several locks and leases, all or none, in one canonical order.
use std::error::Error;
use std::time::Duration;

async fn work() {
    tokio::time::sleep(Duration::from_millis(20)).await;
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = zklock::Client::connect(&hosts).await?;
    // ANCHOR: main
    let from = client.lock("/accounts/alice")?;
    let to = client.lock("/accounts/bob")?;
    let pool = client.semaphore("/backends/ledger", 4)?;
    let multi = client.multi_lock([from.into(), to.into(), zklock::Member::leases(&pool, 1)])?;
    let me = zklock::Owner::unique();
    let guard = multi.acquire_timeout(&me, Duration::from_secs(10)).await?; // all, or none
    for (member, tokens) in guard.fencing_tokens() {
        println!("{} {:?}: {tokens:?}", member.path(), member.kind());
    }
    tokio::select! {
        lost = guard.lost() => eprintln!("{} lost: {}", lost.path, lost.reason.describe()),
        _ = work() => {}
    }
    guard.release().await?; // in reverse order; a lost member is reported (LockLost)

    // ANCHOR_END: main
    client.close().await;
    Ok(())
}
