//! How a PE learns its place in the job: from the environment, as a
//! `pld-daemon` reads its flags' variables (`PLD_RANK`, `PLD_PEERS`,
//! `PLD_TLS_DIR`, ...) — `pld-oshrun` sets them, and across hosts each PE
//! is started with them by hand or by a scheduler. With none set, the
//! program runs as a single PE. Pure: the lookup is passed in.

use pld_proto::units::{parse_duration, parse_size};
use std::path::PathBuf;
use std::time::Duration;

/// The symmetric heap's size when `SHMEM_SYMMETRIC_SIZE` is not set.
pub const DEFAULT_SYMMETRIC_SIZE: u64 = 256 << 20;

/// Where a PE's settings went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value}: {reason}")]
pub struct EnvError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

/// How peers authenticate each other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// Mutual TLS with the certificates in this directory (`PLD_TLS_DIR`).
    Tls(PathBuf),
    /// None (`PLD_INSECURE=1`, or a single PE, which has no peers).
    Insecure,
}

/// A PE's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// This PE's number (`PLD_RANK`).
    pub rank: u32,
    /// Every PE's `HOST:PORT` (`PLD_PEERS`), its own included.
    pub peers: Vec<String>,
    /// `quic` or `tcp` (`PLD_TRANSPORT`).
    pub transport: pld_server::TransportKind,
    /// Peer authentication.
    pub auth: Auth,
    /// The symmetric heap's size (`SHMEM_SYMMETRIC_SIZE`).
    pub heap_size: u64,
    /// How long a barrier or a wait may take (`PLD_SYNC_TIMEOUT`).
    pub sync_timeout: Duration,
    /// How long startup waits for the other PEs (`PLD_CONNECT_TIMEOUT`).
    pub connect_timeout: Duration,
    /// How long an op waits for its reply (`PLD_OP_TIMEOUT`).
    pub op_timeout: Duration,
    /// The race detector (`PLD_CHECKED`: off, on, strict).
    pub checked: pld_server::CheckedMode,
    /// Where to write this PE's timeline at `shmem_finalize` (`PLD_TRACE`).
    pub trace: Option<std::path::PathBuf>,
    /// Sleep or spin (`PLD_PROGRESS`).
    pub progress: pld_server::Progress,
    /// The cluster's name (`PLD_CLUSTER_ID`).
    pub cluster_id: String,
    /// The launcher's control pipe (`PLD_SHMEM_CONTROL`: a file descriptor).
    pub control: Option<i32>,
    /// Whether PEs of one host may share their heaps' memory
    /// (`PLD_SHMEM_SHARED_MEMORY`: on, the default, or off).
    pub shared_memory: bool,
    /// Whether the program's thread is bound to one core, the PE's index
    /// among this host's PEs modulo the cores it may use (`PLD_BIND`:
    /// `core`, or `none`, the default; pld-oshrun says `core`).
    pub bind_to_core: bool,
}

/// A heap size: room for pld's own cells at the heap's start
/// ([`crate::layout::RESERVED`]) and at least one allocation after them.
fn heap_size(v: &str) -> Result<u64, String> {
    let size = parse_size(v)?;
    let least = crate::layout::RESERVED + crate::heap::MIN_ALIGN;
    if size < least {
        return Err(format!(
            "smaller than the {} bytes pld keeps at the heap's start for its own cells, plus one allocation: at least {least} bytes (e.g. 2M)",
            crate::layout::RESERVED
        ));
    }
    Ok(size)
}

impl Settings {
    /// Reads the settings through `var` (`std::env::var` in a program).
    pub fn from(var: impl Fn(&str) -> Option<String>) -> Result<Settings, EnvError> {
        fn parse<T>(
            var: &impl Fn(&str) -> Option<String>,
            name: &'static str,
            default: T,
            f: impl Fn(&str) -> Result<T, String>,
        ) -> Result<T, EnvError> {
            match var(name) {
                None => Ok(default),
                Some(v) if v.trim().is_empty() => Ok(default),
                Some(v) => f(&v).map_err(|reason| EnvError {
                    var: name,
                    value: v.clone(),
                    reason,
                }),
            }
        }
        let peers: Vec<String> = parse(&var, "PLD_PEERS", Vec::new(), |v| {
            Ok(v.split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect())
        })?;
        let rank = parse(&var, "PLD_RANK", None, |v| {
            v.trim()
                .parse::<u32>()
                .map(Some)
                .map_err(|e| format!("not a PE number: {e}"))
        })?;
        let (rank, peers) = match (rank, peers.is_empty()) {
            // A single PE: no launcher, no peers.
            (None, true) => (0, vec!["127.0.0.1:0".to_string()]),
            (Some(r), false) => (r, peers),
            (None, false) => {
                return Err(EnvError {
                    var: "PLD_RANK",
                    value: String::new(),
                    reason: "PLD_PEERS is set, so PLD_RANK must say which of them this PE is"
                        .into(),
                });
            }
            (Some(r), true) => {
                return Err(EnvError {
                    var: "PLD_PEERS",
                    value: String::new(),
                    reason: format!(
                        "PLD_RANK={r} is set, so PLD_PEERS must list every PE's HOST:PORT"
                    ),
                });
            }
        };
        let insecure = parse(&var, "PLD_INSECURE", false, |v| {
            Ok(matches!(v.trim(), "1" | "true" | "yes" | "on"))
        })?;
        let auth = match var("PLD_TLS_DIR").filter(|d| !d.trim().is_empty()) {
            Some(dir) => Auth::Tls(PathBuf::from(dir)),
            None if insecure || peers.len() == 1 => Auth::Insecure,
            None => {
                return Err(EnvError {
                    var: "PLD_TLS_DIR",
                    value: String::new(),
                    reason: "several PEs need certificates (pld-daemon certs --ranks N --out DIR), or PLD_INSECURE=1 to run without authentication".into(),
                });
            }
        };
        Ok(Settings {
            rank,
            peers,
            transport: parse(
                &var,
                "PLD_TRANSPORT",
                pld_server::TransportKind::Quic,
                |v| v.parse(),
            )?,
            auth,
            heap_size: parse(
                &var,
                "SHMEM_SYMMETRIC_SIZE",
                DEFAULT_SYMMETRIC_SIZE,
                heap_size,
            )?,
            sync_timeout: parse(
                &var,
                "PLD_SYNC_TIMEOUT",
                Duration::from_secs(60),
                parse_duration,
            )?,
            connect_timeout: parse(
                &var,
                "PLD_CONNECT_TIMEOUT",
                Duration::from_secs(30),
                parse_duration,
            )?,
            op_timeout: parse(
                &var,
                "PLD_OP_TIMEOUT",
                Duration::from_secs(10),
                parse_duration,
            )?,
            checked: parse(&var, "PLD_CHECKED", pld_server::CheckedMode::Off, |v| {
                v.parse()
            })?,
            trace: parse(&var, "PLD_TRACE", None, |v| {
                Ok(Some(std::path::PathBuf::from(v)))
            })?,
            progress: parse(&var, "PLD_PROGRESS", pld_server::Progress::Sleep, |v| {
                v.parse()
            })?,
            cluster_id: parse(&var, "PLD_CLUSTER_ID", "pld".to_string(), |v| {
                Ok(v.to_string())
            })?,
            control: parse(&var, "PLD_SHMEM_CONTROL", None, |v| {
                v.trim()
                    .parse()
                    .map(Some)
                    .map_err(|e| format!("not a file descriptor: {e}"))
            })?,
            shared_memory: parse(&var, "PLD_SHMEM_SHARED_MEMORY", true, |v| {
                match v.trim().to_ascii_lowercase().as_str() {
                    "1" | "on" | "true" | "yes" => Ok(true),
                    "0" | "off" | "false" | "no" => Ok(false),
                    _ => Err("expected on or off".into()),
                }
            })?,
            bind_to_core: parse(&var, "PLD_BIND", false, |v| {
                match v.trim().to_ascii_lowercase().as_str() {
                    "core" => Ok(true),
                    "none" => Ok(false),
                    _ => Err("expected core or none".into()),
                }
            })?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn from(pairs: &[(&str, &str)]) -> Result<Settings, EnvError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from(|k| map.get(k).cloned())
    }

    #[test]
    fn nothing_set_is_a_single_pe() {
        let s = from(&[]).expect("a single PE");
        assert_eq!((s.rank, s.peers.len(), s.auth), (0, 1, Auth::Insecure));
        assert_eq!(s.heap_size, DEFAULT_SYMMETRIC_SIZE);
    }

    #[test]
    fn a_launched_pe_reads_its_rank_peers_and_certificates() {
        let s = from(&[
            ("PLD_RANK", "1"),
            ("PLD_PEERS", "127.0.0.1:7000,127.0.0.1:7001"),
            ("PLD_TLS_DIR", "/tmp/certs"),
            ("PLD_TRANSPORT", "tcp"),
            ("SHMEM_SYMMETRIC_SIZE", "64M"),
            ("PLD_SYNC_TIMEOUT", "5s"),
        ])
        .expect("valid");
        assert_eq!(s.rank, 1);
        assert_eq!(s.peers.len(), 2);
        assert_eq!(s.auth, Auth::Tls("/tmp/certs".into()));
        assert_eq!(s.transport, pld_server::TransportKind::Tcp);
        assert_eq!(s.heap_size, 64 << 20);
        assert_eq!(s.sync_timeout, Duration::from_secs(5));
    }

    #[test]
    fn several_pes_without_certificates_are_refused_by_variable() {
        let e = from(&[("PLD_RANK", "0"), ("PLD_PEERS", "a:1,b:2")]).expect_err("no TLS");
        assert_eq!(e.var, "PLD_TLS_DIR");
    }

    #[test]
    fn a_bad_value_names_its_variable() {
        let e = from(&[("SHMEM_SYMMETRIC_SIZE", "lots")]).expect_err("bad size");
        assert_eq!(e.var, "SHMEM_SYMMETRIC_SIZE");
        let e = from(&[("SHMEM_SYMMETRIC_SIZE", "64K")]).expect_err("below the reserve");
        assert!(
            e.to_string().contains("pld keeps at the heap's start"),
            "{e}"
        );
        let e = from(&[("PLD_PEERS", "a:1,b:2")]).expect_err("no rank");
        assert_eq!(e.var, "PLD_RANK");
    }

    #[test]
    fn shared_memory_is_on_unless_turned_off() {
        assert!(from(&[]).expect("default").shared_memory);
        let off = from(&[("PLD_SHMEM_SHARED_MEMORY", "off")]).expect("off");
        assert!(!off.shared_memory);
        let e = from(&[("PLD_SHMEM_SHARED_MEMORY", "maybe")]).expect_err("bad");
        assert_eq!(e.var, "PLD_SHMEM_SHARED_MEMORY");
    }

    #[test]
    fn binding_is_off_unless_asked_for_by_core() {
        assert!(!from(&[]).expect("default").bind_to_core);
        assert!(from(&[("PLD_BIND", "core")]).expect("core").bind_to_core);
        assert!(!from(&[("PLD_BIND", "none")]).expect("none").bind_to_core);
        let e = from(&[("PLD_BIND", "socket")]).expect_err("bad");
        assert_eq!(e.var, "PLD_BIND");
    }
}
