//! TCP_NODELAY on the ZooKeeper client's connections.
//!
//! The `zookeeper-client` crate leaves Nagle's algorithm on (the Java client turns it off). With
//! Nagle, a small request written while the previous one is unacknowledged waits for that ACK,
//! which the server sends with its reply: the listing pipelined behind a create then costs a
//! second round trip, and an uncontended acquire drops from ~95% to ~75% of the raw
//! create+delete rate on loopback. The crate gives no hook on its sockets, so after each
//! (re)connect we find them among the process's descriptors, by their peer address, and set the
//! option. Setting TCP_NODELAY on a socket is harmless to its owner.

use std::net::SocketAddr;

/// Sets TCP_NODELAY on every TCP socket of this process connected to one of `servers`.
#[cfg(target_os = "linux")]
pub(crate) fn apply(servers: &[SocketAddr]) {
    use std::os::fd::RawFd;

    if servers.is_empty() {
        return;
    }
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return };
    for entry in entries.flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<RawFd>() else { continue };
        if peer(fd).is_some_and(|peer| servers.contains(&peer)) {
            let one: libc::c_int = 1;
            // SAFETY: setsockopt on a descriptor number; a stale or foreign one fails harmlessly.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::IPPROTO_TCP,
                    libc::TCP_NODELAY,
                    &one as *const libc::c_int as *const libc::c_void,
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn apply(_servers: &[SocketAddr]) {}

/// The peer of a connected TCP socket, if `fd` is one.
#[cfg(target_os = "linux")]
fn peer(fd: std::os::fd::RawFd) -> Option<SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};

    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername writes at most `len` bytes into `storage`.
    let rc = unsafe { libc::getpeername(fd, &mut storage as *mut _ as *mut libc::sockaddr, &mut len) };
    if rc != 0 {
        return None;
    }
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says this is a sockaddr_in.
            let addr: &libc::sockaddr_in = unsafe { &*(&storage as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(addr.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(addr.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this is a sockaddr_in6.
            let addr: &libc::sockaddr_in6 = unsafe { &*(&storage as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(addr.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(addr.sin6_port), 0, addr.sin6_scope_id)))
        }
        _ => None,
    }
}

/// The socket addresses of the servers in a connect string (`host:port,...[/chroot]`).
pub(crate) async fn resolve(connect_string: &str) -> Vec<SocketAddr> {
    let hosts = connect_string.split('/').next().unwrap_or_default();
    let mut servers = Vec::new();
    for host in hosts.split(',') {
        let host = host.trim_start_matches("tcp://");
        let with_port = if host.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok()) {
            host.to_owned()
        } else {
            format!("{host}:2181")
        };
        if let Ok(addresses) = tokio::net::lookup_host(with_port).await {
            servers.extend(addresses);
        }
    }
    servers
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    use super::*;

    fn nodelay(stream: &TcpStream) -> bool {
        stream.nodelay().unwrap()
    }

    #[test]
    fn sets_nodelay_only_on_sockets_to_the_servers() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let to_server = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let to_other = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!nodelay(&to_server) && !nodelay(&to_other));
        assert_eq!(peer(to_server.as_raw_fd()), Some(server.local_addr().unwrap()));
        apply(&[server.local_addr().unwrap()]);
        assert!(nodelay(&to_server));
        assert!(!nodelay(&to_other), "other connections are left alone");
    }

    #[tokio::test]
    async fn resolves_connect_strings() {
        let servers = resolve("127.0.0.1:2181,localhost:2182/app").await;
        assert!(servers.contains(&"127.0.0.1:2181".parse().unwrap()));
        assert!(servers.iter().any(|s| s.port() == 2182));
        assert_eq!(resolve("127.0.0.1").await, vec!["127.0.0.1:2181".parse().unwrap()]);
    }
}
