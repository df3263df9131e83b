//! Joining the cluster: dial a peer (retrying until the connect timeout),
//! exchange [`Hello`]s, and check that both sides agree.
//!
//! The dialing side sends the preamble and its Hello; the accepting side
//! answers with its own Hello, or with a `HANDSHAKE_REFUSED` error naming the
//! mismatch and closes. Both sides run [`pld_proto::handshake::check`].

use super::{FrameReader, RankState, ReadError, Refusal, write_frame};
use crate::error::{Error, Result};
use crate::transport::{Connection, Endpoint, PeerWriter};
use pld_proto::frame::{Decoder, HANDSHAKE_MAX_PAYLOAD, PREAMBLE, error_header};
use pld_proto::handshake::{Proof, Refused, Verdict, admit, check};
use pld_proto::v1::{ErrorCode, Header, Hello, header::Body};
use prost::Message;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::time::{Instant, timeout, timeout_at};

/// How long an accepted connection may take to send its Hello.
pub(crate) const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the first dial attempt may take before it is retried (QUIC to
/// a port nobody listens on yet gets no answer at all). Each attempt that
/// gets no answer doubles it, up to `ATTEMPT_TIMEOUT_MAX`: with dozens of
/// ranks forming a cluster on two cores a QUIC handshake can take longer
/// than a second, and a retry that abandons it only adds to the load.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(1);
const ATTEMPT_TIMEOUT_MAX: Duration = Duration::from_secs(8);

/// A handshaken connection to a peer.
#[derive(Debug)]
pub(crate) struct Established {
    pub reader: FrameReader,
    pub writer: PeerWriter,
    pub peer: Hello,
    pub remote: SocketAddr,
    pub quic: Option<quinn::Connection>,
}

fn hello_header(hello: &Hello) -> Header {
    Header {
        id: 0,
        body: Some(Body::Hello(hello.clone())),
        checked: None,
    }
}

/// Why one attempt failed: worth retrying (the dial got no answer in
/// time, or failed otherwise), or final.
enum Attempt {
    NoAnswer(String),
    Retry(String),
    Fatal(Error),
}

/// Dials rank `peer` until it answers or `deadline` passes.
pub(crate) async fn dial(
    state: &RankState,
    endpoint: &Endpoint,
    peer: u32,
    deadline: Instant,
) -> Result<Established> {
    let addr_text = state.config().peers[peer as usize].clone();
    let mut backoff = Duration::from_millis(20);
    let mut patience = ATTEMPT_TIMEOUT;
    loop {
        let tried = attempt(state, endpoint, peer, &addr_text, deadline, patience, true).await;
        let last_error = match tried {
            Ok(e) => return Ok(e),
            Err(Attempt::Fatal(e)) => return Err(e),
            Err(Attempt::NoAnswer(why)) => {
                patience = (patience * 2).min(ATTEMPT_TIMEOUT_MAX);
                why
            }
            Err(Attempt::Retry(why)) => why,
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::ConnectTimeout {
                peer,
                addr: addr_text,
                timeout: state.config().connect_timeout,
                last_error,
            });
        }
        tracing::debug!(peer, addr = %addr_text, error = %last_error, "peer not reachable yet; retrying");
        // A retry delay, not synchronisation: the peer may simply not be up yet.
        tokio::time::sleep(backoff.min(deadline - now)).await;
        backoff = (backoff * 2).min(Duration::from_millis(500));
    }
}

/// One dial of `peer`: connect, exchange Hellos, check. `join`: note the
/// peer's epochs (a probe of who answers at an address does not).
async fn attempt(
    state: &RankState,
    endpoint: &Endpoint,
    peer: u32,
    addr_text: &str,
    deadline: Instant,
    patience: Duration,
    join: bool,
) -> Result<Established, Attempt> {
    let retry = |what: &str, e: &dyn std::fmt::Display| Attempt::Retry(format!("{what}: {e}"));
    let addr = resolve(addr_text)
        .await
        .map_err(|e| retry("cannot resolve", &e))?;
    let attempt_deadline = deadline.min(Instant::now() + patience);
    let auth = |e: &std::io::Error| {
        crate::tls::auth_failure(e).map(|reason| {
            Attempt::Fatal(Error::Authentication {
                peer,
                addr: addr_text.to_string(),
                reason,
            })
        })
    };
    let conn = timeout_at(attempt_deadline, endpoint.dial(addr, peer))
        .await
        .map_err(|_| Attempt::NoAnswer(format!("no answer from {addr}")))?
        .map_err(|e| auth(&e).unwrap_or_else(|| retry("connect", &e)))?;
    let Connection {
        reader,
        mut writer,
        remote,
        quic,
        peer_cert: _,
    } = conn;
    writer
        .write_all(&PREAMBLE)
        .await
        .map_err(|e| retry("send preamble", &e))?;
    let n = write_frame(&mut writer, &hello_header(&state.hello_now()), &[])
        .await
        .map_err(|e| retry("send hello", &e))?;
    state
        .stats()
        .sent(pld_proto::MsgKind::Hello, n + PREAMBLE.len());
    // Small until the peer's Hello passed, whatever --max-frame says.
    let mut reader = FrameReader::new(reader, Decoder::new(HANDSHAKE_MAX_PAYLOAD));
    let reply = timeout_at(
        deadline.max(Instant::now() + Duration::from_millis(100)),
        reader.next(),
    )
    .await
    .map_err(|_| Attempt::Retry(format!("{addr} accepted but did not answer the hello")))?
    .map_err(|e| match e {
        ReadError::Frame(f) => Attempt::Fatal(Error::Protocol {
            rank: peer,
            reason: format!("handshake reply: {f}"),
        }),
        ReadError::Io(e) => auth(&e).unwrap_or_else(|| retry("handshake", &e)),
        other => retry("handshake", &other),
    })?;
    state
        .stats()
        .received(pld_proto::MsgKind::of(&reply.header), reply.payload.len());
    let addr_s = addr_text.to_string();
    match reply.header.body {
        Some(Body::Hello(h)) => {
            check(state.hello(), &h, Some(peer)).map_err(|mismatch| {
                Attempt::Fatal(Error::Mismatch {
                    peer,
                    addr: addr_s.clone(),
                    mismatch,
                })
            })?;
            if join {
                state.peer_joined(&h, false);
            }
            reader.set_max_payload(state.config().max_payload);
            Ok(Established {
                reader,
                writer,
                peer: h,
                remote,
                quic,
            })
        }
        // A refusal carries the refuser's Hello: name the mismatch from
        // this side when it decodes.
        Some(Body::Error(e)) => {
            // (An empty payload would decode as an all-default Hello.)
            let theirs = (!reply.payload.is_empty())
                .then(|| Hello::decode(reply.payload.as_ref()).ok())
                .flatten();
            match theirs.map(|h| check(state.hello(), &h, Some(peer))) {
                Some(Err(mismatch)) => Err(Attempt::Fatal(Error::Mismatch {
                    peer,
                    addr: addr_s,
                    mismatch,
                })),
                _ => Err(Attempt::Fatal(Error::Refused {
                    peer,
                    addr: addr_s,
                    message: e.message,
                })),
            }
        }
        _ => Err(Attempt::Fatal(Error::Protocol {
            rank: peer,
            reason: "answered the hello with something other than a hello".into(),
        })),
    }
}

/// Why an accepted connection did not become a link.
#[derive(Debug, thiserror::Error)]
pub(crate) enum AcceptError {
    /// Nothing arrived in time.
    #[error("no hello within {0:?}")]
    NoHello(Duration),
    /// The stream failed before a Hello.
    #[error("{0}")]
    Read(ReadError),
    /// Not pld's framing.
    #[error("not a pld frame: {0}")]
    NotAFrame(pld_proto::FrameError),
    /// A frame, but not a Hello.
    #[error("the first frame on a connection must be a hello")]
    NotAHello,
    /// A stranger: refused, and nothing held against the rank it claimed.
    #[error("a peer claiming rank {claimed} from {remote}: {why}")]
    Stranger {
        claimed: u32,
        remote: SocketAddr,
        why: Refused,
    },
    /// A rank of this cluster, proven by its certificate, configured
    /// differently.
    #[error("rank {rank} from {remote}: {mismatch}")]
    Misconfigured {
        rank: u32,
        remote: SocketAddr,
        mismatch: pld_proto::handshake::Mismatch,
    },
    /// A second live instance of a known rank.
    #[error("{0}")]
    SecondInstance(String),
    /// Answering the Hello failed.
    #[error("send hello: {0}")]
    SendHello(std::io::Error),
}

impl AcceptError {
    /// The kind of refusal, for rate-limiting its log lines (the text
    /// names the remote address, which differs on every connection).
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            AcceptError::NoHello(_) => "no hello",
            AcceptError::Read(_) => "read",
            AcceptError::NotAFrame(_) => "not a frame",
            AcceptError::NotAHello => "not a hello",
            AcceptError::Stranger { .. } => "stranger",
            AcceptError::Misconfigured { .. } => "misconfigured",
            AcceptError::SecondInstance(_) => "second instance",
            AcceptError::SendHello(_) => "send hello",
        }
    }
}

/// How long the accepting side waits for the rank at a peer's configured
/// address to answer, when a Hello shows that peer under a new epoch.
const INCUMBENT_PROBE: Duration = Duration::from_secs(2);

/// Whether `h` is a second live instance of a rank this rank already
/// knows: it shows a new epoch, yet the rank at the peer's configured
/// address answers under another one. A restarted rank answers there
/// itself (it listens before it dials), so it passes; a second one started
/// with another `--listen` is refused, naming both addresses. Returns the
/// refusal's message.
async fn second(
    state: &RankState,
    endpoint: &Endpoint,
    h: &Hello,
    remote: SocketAddr,
) -> Option<String> {
    let known = state
        .members()
        .known_epoch(h.rank)
        .filter(|e| *e != 0 && *e != h.epoch)?;
    let addr = state.config().peers.get(h.rank as usize)?;
    let deadline = Instant::now() + INCUMBENT_PROBE;
    let answer = attempt(
        state,
        endpoint,
        h.rank,
        addr,
        deadline,
        ATTEMPT_TIMEOUT,
        false,
    )
    .await;
    let Ok(incumbent) = answer else {
        return None;
    };
    let mut writer = incumbent.writer;
    super::finish(&mut writer).await;
    if let Some(q) = &incumbent.quic {
        q.close(0u32.into(), b"probe");
    }
    (incumbent.peer.epoch != h.epoch).then(|| {
        format!(
            "rank {} is already running at {addr} (epoch {}, known here as epoch {known}); \
             refusing a second rank {} listening at {} (from {remote}, epoch {})",
            h.rank,
            incumbent.peer.epoch,
            h.rank,
            // The sender's own words: shown, never interpreted.
            h.listen
                .chars()
                .take(100)
                .collect::<String>()
                .escape_debug(),
            h.epoch
        )
    })
}

/// Resolves `HOST:PORT` to one address, also in a static binary with no
/// NSS (the container image).
pub(crate) async fn resolve(addr: &str) -> std::io::Result<SocketAddr> {
    pld_resolve::resolve(addr).await
}

/// Accepts a peer on an established connection: reads its Hello, checks it,
/// answers. On refusal the error has been sent to the peer and the
/// connection closed; the returned text says why, for the log.
pub(crate) async fn accept(
    state: &RankState,
    endpoint: &Endpoint,
    conn: Connection,
) -> std::result::Result<Established, AcceptError> {
    let Connection {
        reader,
        mut writer,
        remote,
        quic,
        peer_cert,
    } = conn;
    // Small until the peer's Hello passed, whatever --max-frame says.
    let mut reader = FrameReader::new(reader, Decoder::expecting_preamble(HANDSHAKE_MAX_PAYLOAD));
    // Under mutual TLS the certificate chains to the cluster CA (rustls
    // checked); whether it names the rank the Hello claims decides whether
    // anything the Hello says is believed.
    let proof = |rank: u32| {
        if !state.config().security.is_tls() {
            Proof::Unauthenticated
        } else if peer_cert
            .as_ref()
            .is_some_and(|c| crate::tls::names_rank(c, rank))
        {
            Proof::Names
        } else {
            Proof::Other
        }
    };
    let refuse = |code: ErrorCode, msg: String, why: AcceptError| {
        (error_header(0, code, msg), why, Vec::new())
    };
    let first = timeout(HELLO_TIMEOUT, reader.next()).await;
    let mut refusal = None;
    let (reply, why, payload) = match first {
        Err(_) => return Err(AcceptError::NoHello(HELLO_TIMEOUT)),
        Ok(Err(ReadError::Frame(e))) => {
            state.stats().frame_error();
            (e.to_reply(), AcceptError::NotAFrame(e), Vec::new())
        }
        Ok(Err(e)) => return Err(AcceptError::Read(e)),
        Ok(Ok(frame)) => {
            state
                .stats()
                .received(pld_proto::MsgKind::of(&frame.header), frame.payload.len());
            match frame.header.body {
                Some(Body::Hello(h)) => match admit(state.hello(), &h, proof) {
                    Verdict::Accept
                        if let Some(msg) = second(state, endpoint, &h, remote).await =>
                    {
                        refuse(
                            ErrorCode::HandshakeRefused,
                            msg.clone(),
                            AcceptError::SecondInstance(msg),
                        )
                    }
                    Verdict::Accept => {
                        // Before answering: a restarted peer is ready only
                        // once this rank knows to reconnect to it.
                        state.peer_joined(&h, true);
                        let n = write_frame(&mut writer, &hello_header(&state.hello_now()), &[])
                            .await
                            .map_err(AcceptError::SendHello)?;
                        state.stats().sent(pld_proto::MsgKind::Hello, n);
                        reader.set_max_payload(state.config().max_payload);
                        return Ok(Established {
                            reader,
                            writer,
                            peer: h,
                            remote,
                            quic,
                        });
                    }
                    Verdict::Stranger(Refused::NotThatRank { rank }) => {
                        state.stats().auth_refused();
                        refuse(
                            ErrorCode::HandshakeRefused,
                            format!(
                                "claims rank {rank} but its certificate does not name {}",
                                crate::tls::server_name(rank)
                            ),
                            AcceptError::Stranger {
                                claimed: rank,
                                remote,
                                why: Refused::NotThatRank { rank },
                            },
                        )
                    }
                    Verdict::Stranger(Refused::Mismatch(m)) => {
                        let header = error_header(0, ErrorCode::HandshakeRefused, m.to_string());
                        let why = AcceptError::Stranger {
                            claimed: h.rank,
                            remote,
                            why: Refused::Mismatch(m),
                        };
                        (header, why, state.hello().encode_to_vec())
                    }
                    Verdict::Stranger(other) => refuse(
                        ErrorCode::HandshakeRefused,
                        format!("a peer from {remote} {other}"),
                        AcceptError::Stranger {
                            claimed: h.rank,
                            remote,
                            why: other,
                        },
                    ),
                    Verdict::Misconfigured { rank, mismatch } => {
                        refusal = Some(Refusal {
                            peer: rank,
                            addr: state
                                .config()
                                .peers
                                .get(rank as usize)
                                .cloned()
                                .unwrap_or_default(),
                            mismatch: mismatch.clone(),
                        });
                        let header =
                            error_header(0, ErrorCode::HandshakeRefused, mismatch.to_string());
                        let why = AcceptError::Misconfigured {
                            rank,
                            remote,
                            mismatch,
                        };
                        (header, why, state.hello().encode_to_vec())
                    }
                },
                _ => refuse(
                    ErrorCode::UnexpectedMessage,
                    AcceptError::NotAHello.to_string(),
                    AcceptError::NotAHello,
                ),
            }
        }
    };
    if let Ok(n) = write_frame(&mut writer, &reply, &payload).await {
        state.stats().sent(pld_proto::MsgKind::Error, n);
    }
    // Deliver the refusal before anything else happens: the peer must read
    // it (and close) before this rank may give up on the cluster and exit.
    super::finish(&mut writer).await;
    reader.drain(Duration::from_secs(1)).await;
    if let Some(r) = refusal {
        state.members().record_refusal(r);
    }
    if let Some(q) = quic {
        q.close(0u32.into(), b"refused");
    }
    Err(why)
}
