//! The README's Rust example: take a lock, use its fencing token, release it.
use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    // ANCHOR: main
    let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = zklock::Client::connect(&hosts).await?;
    let lock = client.lock("/locks/nightly-report")?;
    let me = zklock::Owner::unique(); // who holds it, for re-entry

    let guard = lock.acquire(&me).await?; // or acquire_timeout / try_acquire
    println!("holding, fencing token {}", guard.fencing_token());
    // ... work, passing the token to what you write ...
    guard.release().await?; // returns once the server confirmed the delete
    client.close().await; // ends the session: its locks go at once

    // ANCHOR_END: main
    Ok(())
}
