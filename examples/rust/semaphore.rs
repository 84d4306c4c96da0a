//! Recipes, the semaphore: at most N leases at once.
use std::error::Error;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = zklock::Client::connect(&hosts).await?;
    // ANCHOR: main
    let semaphore = client.semaphore("/jobs/nightly", 3)?; // at most 3 leases at once
    let leases = semaphore.acquire(1).await?; // or acquire_timeout / try_acquire
    let token = leases.leases()[0].fencing_token(); // each lease: a node, a token, a hold
    println!("lease with fencing token {token}");
    leases.release().await?; // every lease, confirmed by the server

    // The max from a shared count, as Curator's SharedCount stores it (a 4-byte int): change it
    // at run time (Curator's setCount, or `set_shared_count`) and waiters follow.
    let options = zklock::SemaphoreOptions::new(zklock::MaxLeases::SharedCount {
        path: "/jobs/nightly-max".into(),
        seed: 3, // written if the node is missing, as SharedCount.start does
    });
    let shared = client.semaphore_with("/jobs/nightly-shared", options)?;
    let two = shared.acquire_timeout(2, Duration::from_secs(30)).await?; // both, or neither
    println!("{} leases held", shared.participants().await?.holders().len());
    two.release().await?;
    // ANCHOR_END: main
    client.close().await;
    Ok(())
}
