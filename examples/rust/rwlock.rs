//! Recipes, the read/write lock: shared reads, exclusive writes, a safe downgrade.
use std::error::Error;

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = zklock::Client::connect(&hosts).await?;
    let me = zklock::Owner::unique();
    // ANCHOR: main
    let rw = client.read_write_lock("/locks/catalog")?; // rw.read() and rw.write() are Locks
    let reading = rw.read().acquire(&me).await?; // shared with other readers
    reading.release().await?;

    let writing = rw.write().acquire(&me).await?; // alone: no reader, no other writer
    let reading = rw.read().acquire(&me).await?; // downgrade: a read in the write's place ...
    writing.release().await?; // ... and go on reading
    println!("{} holding", rw.holders().await?.len());
    reading.release().await?;

    // Upgrade is refused at once (Curator would wait for itself forever):
    let reading = rw.read().acquire(&me).await?;
    let upgrade = rw.write().acquire(&me).await;
    assert_eq!(upgrade.err().map(|e| e.kind()), Some(zklock::ErrorKind::Deadlock));
    reading.release().await?;
    // ANCHOR_END: main
    client.close().await;
    Ok(())
}
