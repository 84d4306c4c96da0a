//! Concepts, hold state: stop working the moment the lock is lost.
use std::error::Error;
use std::time::Duration;

async fn do_the_work() -> Result<(), Box<dyn Error>> {
    tokio::time::sleep(Duration::from_millis(50)).await;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = zklock::Client::connect(&hosts).await?;
    let lock = client.lock("/locks/hold-state")?;
    let me = zklock::Owner::unique();
    // ANCHOR: main
    let guard = lock.acquire(&me).await?;
    assert_eq!(guard.hold().state(), zklock::HoldState::Held);
    let hold = guard.hold().clone();
    tokio::select! {
        result = do_the_work() => result?,
        reason = hold.lost() => return Err(format!("lock lost: {reason:?}").into()),
    }
    guard.release().await?;
    // ANCHOR_END: main
    client.close().await;
    Ok(())
}
