//! Concepts, fencing tokens: a resource that refuses writes from a holder whose lock has passed
//! on. Here the resource is a map in memory; in real life, a database row with a `token` column.
use std::collections::HashMap;
use std::error::Error;
use std::sync::Mutex;

// ANCHOR: resource
/// A store that keeps, per key, the highest fencing token it has accepted, and refuses any write
/// that carries a lower one: a holder that paused past its session's expiry (and whose lock the
/// next holder now has) cannot overwrite the newer holder's data.
#[derive(Default)]
struct FencedStore {
    rows: Mutex<HashMap<String, (i64, String)>>, // key -> (token, value)
}

impl FencedStore {
    fn write(&self, key: &str, token: i64, value: &str) -> Result<(), String> {
        let mut rows = self.rows.lock().unwrap();
        if let Some((highest, _)) = rows.get(key) {
            if token < *highest {
                return Err(format!("stale token {token}: {highest} already wrote {key}"));
            }
        }
        rows.insert(key.to_owned(), (token, value.to_owned()));
        Ok(())
    }
}
// ANCHOR_END: resource

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = zklock::Client::connect(&hosts).await?;
    let lock = client.lock("/locks/report-row")?;
    let store = FencedStore::default();
    // ANCHOR: main
    let me = zklock::Owner::unique();
    let first = lock.acquire(&me).await?;
    let old_token = first.fencing_token();
    store.write("report", old_token, "written by the first holder")?;
    first.release().await?;

    let second = lock.acquire(&me).await?; // the next holder gets a higher token
    assert!(second.fencing_token() > old_token);
    store.write("report", second.fencing_token(), "written by the second holder")?;

    // A holder that woke up late, still carrying the old token, is refused by the store:
    assert!(store.write("report", old_token, "a stale write").is_err());
    second.release().await?;
    // ANCHOR_END: main
    client.close().await;
    Ok(())
}
