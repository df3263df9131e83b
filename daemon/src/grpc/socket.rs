//! The options every accepted client connection gets: no Nagle (a reply
//! in two segments would wait for the peer's delayed ACK) and TCP
//! keep-alive, so that a client whose host vanished without closing is
//! found even when it never answered an HTTP/2 ping.

use std::time::Duration;
use tokio::net::TcpStream;

/// Idle time before the first keep-alive probe.
pub(crate) const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
/// Between unanswered probes (the kernel gives up after its probe count).
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// Sets `TCP_NODELAY` and TCP keep-alive on `tcp`.
pub(crate) fn tune(tcp: &TcpStream) -> std::io::Result<()> {
    tcp.set_nodelay(true)?;
    socket2::SockRef::from(tcp).set_tcp_keepalive(
        &socket2::TcpKeepalive::new()
            .with_time(KEEPALIVE_IDLE)
            .with_interval(KEEPALIVE_INTERVAL),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// An integer socket option of `tcp`, as the kernel reports it.
    fn option(tcp: &TcpStream, level: i32, name: i32) -> i32 {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: reads one c_int option into `v`, whose size `len` says.
        let r = unsafe {
            libc::getsockopt(
                tcp.as_raw_fd(),
                level,
                name,
                (&raw mut v).cast(),
                &raw mut len,
            )
        };
        assert_eq!(r, 0, "getsockopt: {}", std::io::Error::last_os_error());
        v
    }

    #[tokio::test]
    async fn an_accepted_connection_gets_nodelay_and_keepalive_30_s_then_10_s() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let _client = TcpStream::connect(addr).await.unwrap();
        let (served, _) = listener.accept().await.unwrap();
        assert_eq!(option(&served, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 0);
        tune(&served).unwrap();
        assert_eq!(option(&served, libc::IPPROTO_TCP, libc::TCP_NODELAY), 1);
        assert_eq!(option(&served, libc::SOL_SOCKET, libc::SO_KEEPALIVE), 1);
        assert_eq!(option(&served, libc::IPPROTO_TCP, libc::TCP_KEEPIDLE), 30);
        assert_eq!(option(&served, libc::IPPROTO_TCP, libc::TCP_KEEPINTVL), 10);
    }
}
