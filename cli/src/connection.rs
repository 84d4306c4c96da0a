//! How both commands reach ZooKeeper.

use std::future::Future;
use std::time::Duration;

use crate::codes;

/// Connection options shared by every command.
#[derive(clap::Args, Debug, Clone)]
pub struct Connection {
    /// ZooKeeper servers: host:port[,host:port...][/chroot]
    #[arg(long = "zk", env = "ZK_CONNECT", value_name = "CONNECT")]
    pub connect: String,
    /// Session timeout in seconds: a holder cut off this long loses the lock
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub session_timeout: f64,
    /// How long to try for a session before giving up (exit 69), in seconds
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub connect_timeout: f64,
}

impl Connection {
    /// Client options from the command line; an error names the bad value.
    pub fn options(&self) -> Result<zklock::ClientOptions, String> {
        let session_timeout = Duration::try_from_secs_f64(self.session_timeout)
            .ok()
            .filter(|timeout| !timeout.is_zero())
            .ok_or_else(|| format!("--session-timeout {}: a positive number of seconds", self.session_timeout))?;
        let connect_timeout = Duration::try_from_secs_f64(self.connect_timeout)
            .ok()
            .filter(|timeout| !timeout.is_zero())
            .ok_or_else(|| format!("--connect-timeout {}: a positive number of seconds", self.connect_timeout))?;
        Ok(zklock::ClientOptions { session_timeout, connect_timeout, ..Default::default() })
    }

    /// Connects (as the `cli` language, on a runtime of this thread), runs `work` with the
    /// client and closes it: `work`'s outcome, or the exit code and message of what failed first
    /// (a bad option, no session).
    pub fn with_client<T, Work>(&self, work: impl FnOnce(zklock::Client) -> Work) -> Result<T, (i32, String)>
    where
        Work: Future<Output = Result<T, (i32, String)>>,
    {
        let mut options = self.options().map_err(|message| (codes::USAGE, message))?;
        options.language = "cli".into();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| (codes::SOFTWARE, format!("cannot start the async runtime: {err}")))?;
        runtime.block_on(async {
            let client = zklock::Client::connect_with(&self.connect, options)
                .await
                .map_err(|err| codes::connect_failure(&err))?;
            let outcome = work(client.clone()).await;
            client.close().await;
            outcome
        })
    }
}
