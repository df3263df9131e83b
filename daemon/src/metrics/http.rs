//! The metrics port's HTTP/1.1: one request head, one answer, close.
//!
//! The port has no authentication, so what a stranger can hold there is
//! bounded, as on the gRPC port (`grpc/incoming.rs`):
//! - at most [`MAX_CONNECTIONS`] connections at once. When they are all
//!   held, a newcomer takes the slot of the oldest connection that has
//!   held one for [`EVICT_AFTER`] (a scrape is answered in milliseconds:
//!   such a connection is idle), which is closed; if there is none, the
//!   newcomer is closed at once. So idle connections cannot lock a scraper
//!   out, nor take the file descriptors the peer and client planes need.
//! - each connection has [`ANSWER_WITHIN`] to send its head and take the
//!   answer.
//! - `accept` failing for want of file descriptors or memory backs off
//!   (10 ms doubling to 1 s) instead of spinning, and says so,
//!   rate-limited.

use super::{Sources, render};
use pld_proto::lock::Locked;
use pld_server::ratelog::RateLimited;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Connections the metrics port holds at once (a scraper needs one).
pub const MAX_CONNECTIONS: usize = 32;

/// How long a connection keeps its slot for sure.
const EVICT_AFTER: Duration = Duration::from_secs(1);

/// How long a connection has to send its request and take the answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);

/// The connections being answered, oldest first.
#[derive(Debug, Default)]
struct Open {
    next: u64,
    held: VecDeque<(u64, Instant, tokio::task::AbortHandle)>,
}

/// Gives a connection's slot back when its task ends (or is aborted).
struct Release(Arc<Mutex<Open>>, u64);

impl Drop for Release {
    fn drop(&mut self) {
        let id = self.1;
        self.0.locked().held.retain(|(h, _, _)| *h != id);
    }
}

/// Binds `addr` and serves `/metrics` until the task is dropped.
pub async fn serve(
    addr: SocketAddr,
    sources: Arc<Sources>,
) -> pld_server::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| pld_server::Error::io(format!("cannot bind the metrics port {addr}"), e))?;
    let local = listener
        .local_addr()
        .map_err(|e| pld_server::Error::io("metrics local address", e))?;
    let rank = sources.rank_id;
    let task = tokio::spawn(async move {
        let open = Arc::new(Mutex::new(Open::default()));
        let starved = RateLimited::every(Duration::from_secs(1));
        let refused = RateLimited::every(Duration::from_secs(1));
        let mut backoff = Duration::from_millis(10);
        loop {
            let (conn, remote) = match listener.accept().await {
                Ok(a) => a,
                Err(e) if crate::grpc::exhausted(&e) => {
                    if let Some(more) = starved.admit() {
                        tracing::warn!(
                            rank,
                            "cannot accept metrics connections: {e}{more}; retrying in {backoff:?}"
                        );
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    continue;
                }
                // A connection reset before it was accepted, and the like.
                Err(_) => continue,
            };
            backoff = Duration::from_millis(10);
            let mut held = open.locked();
            if held.held.len() >= MAX_CONNECTIONS {
                let oldest_idle = held
                    .held
                    .front()
                    .is_some_and(|(_, since, _)| since.elapsed() >= EVICT_AFTER);
                if !oldest_idle {
                    drop(held);
                    drop(conn);
                    if let Some(more) = refused.admit() {
                        tracing::warn!(rank, %remote, "refused a metrics connection: {MAX_CONNECTIONS} are open and none has been idle for {EVICT_AFTER:?}{more}");
                    }
                    continue;
                }
                if let Some((_, _, task)) = held.held.pop_front() {
                    task.abort();
                }
            }
            let id = held.next;
            held.next += 1;
            let sources = sources.clone();
            let release = Release(open.clone(), id);
            // Spawned under the lock: the task's Release, which takes it,
            // cannot run before its entry is in the list.
            let task = tokio::spawn(async move {
                let _release = release;
                let _ = tokio::time::timeout(ANSWER_WITHIN, answer(conn, &sources)).await;
            });
            held.held
                .push_back((id, Instant::now(), task.abort_handle()));
        }
    });
    Ok((local, task))
}

/// Reads one request head (at most 8 KiB) and answers it.
async fn answer(mut conn: tokio::net::TcpStream, sources: &Sources) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > 8192 {
            return respond(
                &mut conn,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )
            .await;
        }
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics" | "/") => {
            let body = render(sources);
            respond(&mut conn, "200 OK", "text/plain; version=0.0.4", &body).await
        }
        ("GET", _) => respond(&mut conn, "404 Not Found", "text/plain", "try /metrics\n").await,
        _ => {
            respond(
                &mut conn,
                "405 Method Not Allowed",
                "text/plain",
                "GET only\n",
            )
            .await
        }
    }
}

async fn respond(
    conn: &mut tokio::net::TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).await?;
    conn.write_all(body.as_bytes()).await?;
    conn.shutdown().await
}
