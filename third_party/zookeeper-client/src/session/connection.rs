use std::io::{Error, ErrorKind, IoSlice, Result};
#[cfg(feature = "tokio")]
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::timer::Timer;
#[cfg(not(feature = "tokio"))]
use async_net::TcpStream;
/// With tokio, sockets live on tokio's own I/O driver: readiness then reaches the session task
/// directly, instead of through async-io's reactor thread and a cross-thread wake per packet.
#[cfg(feature = "tokio")]
type TcpStream = tokio_util::compat::Compat<tokio::net::TcpStream>;
use asyncs::select;
use bytes::buf::BufMut;
use futures::io::BufReader;
use futures::prelude::*;
use futures_lite::AsyncReadExt;
#[cfg(feature = "tls")]
pub use futures_rustls::client::TlsStream;
use ignore_result::Ignore;
use tracing::{debug, trace};

use crate::deadline::Deadline;
use crate::endpoint::{EndpointRef, IterableEndpoints};
#[cfg(feature = "tls")]
use crate::tls::TlsClient;

/// What TLS runs over. With tokio, our own socket on tokio's I/O driver, whose writes are
/// `sendmsg(MSG_NOSIGNAL)` like the plaintext ones: rustls writes its records through it.
#[cfg(all(feature = "tls", feature = "tokio"))]
pub type TlsTransport = NoSignalStream;
#[cfg(all(feature = "tls", not(feature = "tokio")))]
pub type TlsTransport = async_net::TcpStream;

#[derive(Debug)]
pub enum Connection {
    Raw(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream<TlsTransport>>),
}

/// A tokio socket as a futures stream whose writes never raise SIGPIPE (see `nosignal`) and
/// whose vectored writes send every buffer. TLS records go through it.
#[cfg(feature = "tokio")]
#[derive(Debug)]
pub struct NoSignalStream(TcpStream);

#[cfg(feature = "tokio")]
impl NoSignalStream {
    /// Connects to `host:port` with TCP_NODELAY, as the Java client does: a request must not wait
    /// for the previous one's ACK. Every address the host name resolves to is tried (see
    /// `connect_any`), the one the latest connection to `host:port` went to last.
    async fn connect(host: &str, port: u16) -> Result<Self> {
        use tokio_util::compat::TokioAsyncReadCompatExt;
        let mut addresses = resolve(host, port).await?;
        RecentAddresses::last(host, port, &mut addresses);
        let (stream, address) = connect_any(addresses).await?;
        RecentAddresses::remember(host, port, address);
        stream.set_nodelay(true)?;
        Ok(Self(stream.compat()))
    }
}

/// Overrides name resolution, for tests (a zklock patch, not part of the API): given a host and
/// a port, the addresses to connect to, or `None` for the system's resolver. One for the process.
#[cfg(feature = "tokio")]
#[doc(hidden)]
pub type Resolver = std::sync::Arc<dyn Fn(&str, u16) -> Option<Result<Vec<SocketAddr>>> + Send + Sync>;

#[cfg(feature = "tokio")]
static RESOLVER: std::sync::RwLock<Option<Resolver>> = std::sync::RwLock::new(None);

/// Sets (or, with `None`, removes) the process's [`Resolver`] override. For tests: a name that
/// resolves to a silent address before a healthy one, without DNS or `/etc/hosts`.
#[cfg(feature = "tokio")]
#[doc(hidden)]
pub fn set_resolver(resolver: Option<Resolver>) {
    *RESOLVER.write().unwrap_or_else(|err| err.into_inner()) = resolver;
}

/// The addresses of `host:port`, in the resolver's order (an address literal is its own).
#[cfg(feature = "tokio")]
async fn resolve(host: &str, port: u16) -> Result<Vec<SocketAddr>> {
    let resolver = RESOLVER.read().unwrap_or_else(|err| err.into_inner()).clone();
    let addresses = match resolver.and_then(|resolver| resolver(host, port)) {
        Some(addresses) => addresses?,
        None => tokio::net::lookup_host((host, port)).await?.collect(),
    };
    if addresses.is_empty() {
        // Worded as the system's failures are, which the connect observer names.
        let message = format!("failed to lookup address information: no address for {host}");
        return Err(Error::new(ErrorKind::NotFound, message));
    }
    Ok(addresses)
}

/// How long an attempt to connect to one address of a host name goes on alone before the next
/// address is tried beside it (RFC 8305's Connection Attempt Delay).
#[cfg(feature = "tokio")]
const ATTEMPT_DELAY: Duration = Duration::from_millis(250);

/// Connects to one of `addresses`, happy-eyeballs style (RFC 8305): in their order, each
/// attempt started when the one before it failed or [`ATTEMPT_DELAY`] after it started; the first
/// connection made wins, the other attempts are dropped. Upstream (tokio's `connect` to a host
/// name) tried them one after the other with no bound of their own: an address that never
/// answered took the whole of every attempt, and the next ones were never reached. The bound of
/// the whole is the caller's (the connection and handshake timeouts).
#[cfg(feature = "tokio")]
async fn connect_any(addresses: Vec<SocketAddr>) -> Result<(tokio::net::TcpStream, SocketAddr)> {
    use futures::stream::FuturesUnordered;
    let connect = |address: SocketAddr| async move { (tokio::net::TcpStream::connect(address).await, address) };
    let mut addresses = addresses.into_iter();
    let mut attempts = FuturesUnordered::new();
    let mut last_error = None;
    loop {
        if attempts.is_empty() {
            match addresses.next() {
                Some(address) => attempts.push(connect(address)),
                None => {
                    return Err(last_error
                        .unwrap_or_else(|| Error::new(ErrorKind::NotFound, "failed to lookup address information")))
                },
            }
        }
        let more = addresses.len() != 0;
        select! {
            Some((result, address)) = attempts.next() => match result {
                Ok(stream) => return Ok((stream, address)),
                Err(err) => {
                    debug!("fails to connect to {address}: {err}");
                    last_error = Some(err);
                    if let Some(address) = addresses.next() {
                        attempts.push(connect(address));
                    }
                },
            },
            _ = Timer::after(ATTEMPT_DELAY), if more => {
                if let Some(address) = addresses.next() {
                    attempts.push(connect(address));
                }
            },
        }
    }
}

/// The addresses of each host name that connections to it went to, in the process, in the order
/// of their latest use (a zklock patch): the next connection to that host tries the name's
/// addresses never used first, then the others from the least recently used. The session
/// handshake may fail on an address that accepts connections and never answers (a hung server,
/// a half-dead proxy in front of it), which racing connections cannot tell: the next attempts go
/// to each other address in turn, however many are silent, as the Java client tries each
/// resolved address as an endpoint of its own. Process-wide, since zklock makes a new client
/// for each connect round and each new session.
#[cfg(feature = "tokio")]
static RECENT: std::sync::Mutex<Vec<(String, u16, Vec<SocketAddr>)>> = std::sync::Mutex::new(Vec::new());

/// Host names remembered in [`RECENT`] at most, the oldest forgotten first; and addresses per name.
#[cfg(feature = "tokio")]
const RECENT_HOSTS: usize = 64;
#[cfg(feature = "tokio")]
const RECENT_ADDRESSES: usize = 32;

#[cfg(feature = "tokio")]
struct RecentAddresses;

#[cfg(feature = "tokio")]
impl RecentAddresses {
    /// Orders `addresses`: those `host:port` never went to first (as resolved), then the others
    /// from the least recently used to the most.
    fn last(host: &str, port: u16, addresses: &mut [SocketAddr]) {
        let recent = RECENT.lock().unwrap_or_else(|err| err.into_inner());
        let Some((_, _, used)) = recent.iter().find(|(h, p, _)| h == host && *p == port) else { return };
        // A stable sort: never used (None) before used, the used by the order of their last use.
        addresses.sort_by_key(|a| used.iter().position(|u| u == a));
    }

    fn remember(host: &str, port: u16, address: SocketAddr) {
        let mut recent = RECENT.lock().unwrap_or_else(|err| err.into_inner());
        let mut used = match recent.iter().position(|(h, p, _)| h == host && *p == port) {
            Some(i) => recent.remove(i).2,
            None => Vec::new(),
        };
        used.retain(|a| *a != address);
        if used.len() >= RECENT_ADDRESSES {
            used.remove(0);
        }
        used.push(address);
        if recent.len() >= RECENT_HOSTS {
            recent.remove(0);
        }
        recent.push((host.to_owned(), port, used));
    }
}

#[cfg(feature = "tokio")]
impl AsyncRead for NoSignalStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

#[cfg(feature = "tokio")]
impl AsyncWrite for NoSignalStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize>> {
        nosignal::poll_send(self.get_mut().0.get_mut(), cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<Result<usize>> {
        nosignal::poll_send(self.get_mut().0.get_mut(), cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_close(cx)
    }
}

pub trait AsyncReadToBuf: AsyncReadExt {
    async fn read_to_buf(&mut self, buf: &mut impl BufMut) -> Result<usize>
    where
        Self: Unpin,
    {
        let chunk = buf.chunk_mut();
        let read_to =
            unsafe { std::mem::transmute::<&mut [std::mem::MaybeUninit<u8>], &mut [u8]>(chunk.as_uninit_slice_mut()) };
        let n = self.read(read_to).await?;
        if n != 0 {
            unsafe {
                buf.advance_mut(n);
            }
        }
        Ok(n)
    }
}

impl<T> AsyncReadToBuf for T where T: AsyncReadExt {}

impl AsyncRead for Connection {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize>> {
        match self.get_mut() {
            Self::Raw(stream) => Pin::new(stream).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Self::Tls(stream) => Pin::new(stream).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize>> {
        match self.get_mut() {
            #[cfg(not(feature = "tokio"))]
            Self::Raw(stream) => Pin::new(stream).poll_write(cx, buf),
            #[cfg(feature = "tokio")]
            Self::Raw(stream) => nosignal::poll_send(stream.get_mut(), cx, &[IoSlice::new(buf)]),
            #[cfg(feature = "tls")]
            Self::Tls(stream) => Pin::new(stream).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<Result<usize>> {
        match self.get_mut() {
            #[cfg(not(feature = "tokio"))]
            Self::Raw(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            // `Compat` does not forward vectored writes (it writes the first buffer only): send
            // them all at once, so that queued requests leave in one sendmsg, as with async-net.
            #[cfg(feature = "tokio")]
            Self::Raw(stream) => nosignal::poll_send(stream.get_mut(), cx, bufs),
            #[cfg(feature = "tls")]
            Self::Tls(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match self.get_mut() {
            Self::Raw(stream) => Pin::new(stream).poll_flush(cx),
            #[cfg(feature = "tls")]
            Self::Tls(stream) => Pin::new(stream).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match self.get_mut() {
            Self::Raw(stream) => Pin::new(stream).poll_close(cx),
            #[cfg(feature = "tls")]
            Self::Tls(stream) => Pin::new(stream).poll_close(cx),
        }
    }
}

/// Writes that never raise SIGPIPE. A write to a socket the server closed raises SIGPIPE in the
/// writing thread, and a host program that has not ignored it (a C program, by default) dies.
/// Blocking the signal per thread would not cover the caller's own thread, which writes during
/// the session handshake, so every write is a `sendmsg` with `MSG_NOSIGNAL`: EPIPE instead.
#[cfg(feature = "tokio")]
mod nosignal {
    use std::io::{IoSlice, Result};
    use std::task::{Context, Poll};

    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub fn poll_send(
        stream: &mut tokio::net::TcpStream,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<Result<usize>> {
        use std::os::fd::AsRawFd;
        loop {
            std::task::ready!(stream.poll_write_ready(cx))?;
            let send = || {
                // IoSlice is guaranteed ABI-compatible with iovec on Unix.
                let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
                message.msg_iov = bufs.as_ptr() as *mut libc::iovec;
                message.msg_iovlen = bufs.len().min(1024) as _;
                let sent = unsafe { libc::sendmsg(stream.as_raw_fd(), &message, libc::MSG_NOSIGNAL) };
                if sent < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(sent as usize)
            };
            match stream.try_io(tokio::io::Interest::WRITABLE, send) {
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => continue,
                result => return Poll::Ready(result),
            }
        }
    }

    /// Without MSG_NOSIGNAL the host must ignore SIGPIPE itself.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    pub fn poll_send(
        stream: &mut tokio::net::TcpStream,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<Result<usize>> {
        tokio::io::AsyncWrite::poll_write_vectored(std::pin::Pin::new(stream), cx, bufs)
    }
}

pub struct ConnReader<'a> {
    conn: &'a mut Connection,
}

impl AsyncRead for ConnReader<'_> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_read(cx, buf)
    }
}

pub struct ConnWriter<'a> {
    conn: &'a mut Connection,
}

impl AsyncWrite for ConnWriter<'_> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write(cx, buf)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<Result<usize>> {
        Pin::new(&mut self.get_mut().conn).poll_write_vectored(cx, bufs)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        Pin::new(&mut self.get_mut().conn).poll_close(cx)
    }
}

impl Connection {
    pub fn new_raw(stream: TcpStream) -> Self {
        Self::Raw(stream)
    }

    pub fn split(&mut self) -> (ConnReader<'_>, ConnWriter<'_>) {
        let reader = ConnReader { conn: self };
        let writer = ConnWriter { conn: unsafe { std::ptr::read(&reader.conn) } };
        (reader, writer)
    }

    #[cfg(feature = "tls")]
    pub fn new_tls(stream: TlsStream<TlsTransport>) -> Self {
        Self::Tls(stream.into())
    }

    pub async fn command(mut self, cmd: &str) -> Result<String> {
        // let mut stream = BufStream::new(self);
        self.write_all(cmd.as_bytes()).await?;
        self.flush().await?;
        let mut line = String::new();
        let mut reader = BufReader::new(self);
        reader.read_line(&mut line).await?;
        reader.close().await.ignore();
        Ok(line)
    }

    pub async fn command_isro(self) -> Result<bool> {
        let r = self.command("isro").await?;
        if r == "rw" {
            Ok(true)
        } else {
            Ok(false)
        }
    }
}

#[derive(Clone)]
pub struct Connector {
    #[cfg(feature = "tls")]
    tls: Option<TlsClient>,
    timeout: Duration,
}

impl Connector {
    pub fn new() -> Self {
        Self {
            #[cfg(feature = "tls")]
            tls: None,
            timeout: Duration::from_secs(10),
        }
    }

    #[cfg(feature = "tls")]
    pub fn with_tls(client: TlsClient) -> Self {
        Self { tls: Some(client), timeout: Duration::from_secs(10) }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether TLS connections present a client certificate (a zklock patch, for the causes).
    #[cfg(feature = "tls")]
    pub fn has_client_cert(&self) -> bool {
        self.tls.as_ref().is_some_and(TlsClient::has_client_cert)
    }

    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    async fn connect_endpoint(&self, endpoint: EndpointRef<'_>) -> Result<Connection> {
        if endpoint.tls {
            #[cfg(feature = "tls")]
            return match self.tls.as_ref() {
                None => return Err(Error::new(ErrorKind::Unsupported, "tls not configured")),
                #[cfg(not(feature = "tokio"))]
                Some(client) => client.connect(endpoint.host, endpoint.port).await.map(Connection::new_tls),
                #[cfg(feature = "tokio")]
                Some(client) => {
                    let stream = NoSignalStream::connect(endpoint.host, endpoint.port).await?;
                    // Verified against the host name, whichever of its addresses answered.
                    client.handshake(endpoint.host, stream).await.map(Connection::new_tls)
                },
            };
            #[cfg(not(feature = "tls"))]
            return Err(Error::new(ErrorKind::Unsupported, "tls not supported"));
        }
        #[cfg(not(feature = "tokio"))]
        return TcpStream::connect((endpoint.host, endpoint.port)).await.map(Connection::new_raw);
        #[cfg(feature = "tokio")]
        NoSignalStream::connect(endpoint.host, endpoint.port).await.map(|stream| Connection::new_raw(stream.0))
    }

    pub async fn connect(&self, endpoint: EndpointRef<'_>, deadline: &mut Deadline) -> Result<Connection> {
        select! {
            biased;
            r = self.connect_endpoint(endpoint) => r,
            _ = unsafe { Pin::new_unchecked(deadline) } => Err(Error::new(ErrorKind::TimedOut, "deadline exceed")),
            _ = Timer::after(self.timeout) => Err(Error::new(ErrorKind::TimedOut, format!("connection timeout{:?} exceed", self.timeout))),
        }
    }

    pub async fn seek_for_writable(self, endpoints: &mut IterableEndpoints) -> Option<EndpointRef<'_>> {
        let n = endpoints.len();
        let max_timeout = Duration::from_secs(60);
        let mut i = 0;
        let mut timeout = Duration::from_millis(100);
        let mut deadline = Deadline::never();
        while let Some(endpoint) = endpoints.peek() {
            i += 1;
            match self.connect(endpoint, &mut deadline).await {
                Ok(conn) => match conn.command_isro().await {
                    // Safety: https://github.com/rust-lang/rust/issues/74068
                    Ok(true) => {
                        return Some(unsafe { std::mem::transmute::<EndpointRef<'_>, EndpointRef<'_>>(endpoint) })
                    },
                    Ok(false) => trace!("succeeds to contact readonly {}", endpoint),
                    Err(err) => trace!(%err, r#"fails to complete "isro" to {}"#, endpoint),
                },
                Err(err) => trace!(%err, "fails to contact {}", endpoint),
            }
            endpoints.step();
            if i % n == 0 {
                debug!(
                    sleep = timeout.as_millis(),
                    "fails to contact writable server from endpoints {:?}",
                    endpoints.endpoints()
                );
                Timer::after(timeout).await;
                timeout = max_timeout.min(timeout * 2);
            } else {
                Timer::after(Duration::from_millis(5)).await;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;

    use super::Connector;
    use crate::deadline::Deadline;
    use crate::endpoint::EndpointRef;

    #[asyncs::test]
    async fn raw() {
        let connector = Connector::new();
        let endpoint = EndpointRef::new("host1", 2181, true);
        let err = connector.connect(endpoint, &mut Deadline::never()).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
    }
}
