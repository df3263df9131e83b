//! Configuration of one rank, and the parsers for sizes and durations that
//! the daemon's flags share.

use crate::error::{ConfigError, Result};
use crate::tls::Security;
use pld_proto::frame::DEFAULT_MAX_PAYLOAD;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// The peer-plane transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TransportKind {
    /// QUIC over UDP (quinn + rustls), the default.
    #[default]
    Quic,
    /// Plain TCP with length-prefixed frames.
    Tcp,
}

impl FromStr for TransportKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "quic" => Ok(TransportKind::Quic),
            "tcp" => Ok(TransportKind::Tcp),
            _ => Err(format!("unknown transport '{s}': expected quic or tcp")),
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransportKind::Quic => "quic",
            TransportKind::Tcp => "tcp",
        })
    }
}

/// How a rank waits for the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Progress {
    /// Sleep until the kernel reports data: kind to shared hosts, but every
    /// wake-up costs a thread wake (docs/PERFORMANCE.md).
    #[default]
    Sleep,
    /// Busy-poll the transport while there was traffic within `idle`, then
    /// back off to sleeping until the next byte.
    Spin {
        /// How long after the last traffic to keep polling.
        idle: Duration,
        /// More ranks run on this host than it has cores. A polling thread
        /// then sleeps after a few empty polls in a row instead of after
        /// `idle`: the peer it waits for needs the very core it would
        /// spin on. `Rank::start` turns it on when the peer list says so
        /// ([`Config::ranks_on_this_host`]); set, it stays on.
        oversubscribed: bool,
    },
}

impl Progress {
    /// The spin idle time when none is given.
    pub const DEFAULT_SPIN_IDLE: Duration = Duration::from_millis(20);

    /// Busy-polling that backs off after `idle` without traffic.
    pub fn spin(idle: Duration) -> Progress {
        Progress::Spin {
            idle,
            oversubscribed: false,
        }
    }

    /// This mode with the spin idle time `idle` (sleep stays sleep): what
    /// `--spin-idle` makes of `--progress`.
    pub fn with_spin_idle(self, idle: Duration) -> Progress {
        match self {
            Progress::Spin { oversubscribed, .. } => Progress::Spin {
                idle,
                oversubscribed,
            },
            Progress::Sleep => Progress::Sleep,
        }
    }

    /// Whether this is spinning on an oversubscribed host.
    pub fn oversubscribed(&self) -> bool {
        matches!(
            self,
            Progress::Spin {
                oversubscribed: true,
                ..
            }
        )
    }

    /// This mode on a host where `ranks` ranks share `cores` cores: spin
    /// turns oversubscribed when the ranks outnumber the cores.
    pub fn on_host(self, ranks: usize, cores: usize) -> Progress {
        match self {
            Progress::Spin {
                idle,
                oversubscribed,
            } => Progress::Spin {
                idle,
                oversubscribed: oversubscribed || ranks > cores,
            },
            Progress::Sleep => Progress::Sleep,
        }
    }
}

impl FromStr for Progress {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "sleep" => Ok(Progress::Sleep),
            "spin" => Ok(Progress::spin(Progress::DEFAULT_SPIN_IDLE)),
            _ => Err(format!(
                "unknown progress mode '{s}': expected spin or sleep"
            )),
        }
    }
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Progress::Sleep => "sleep",
            Progress::Spin { .. } => "spin",
        })
    }
}

/// One window: a name and a size in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowConfig {
    /// The name clients address it by.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
}

impl FromStr for WindowConfig {
    type Err = String;
    /// Parses `NAME=SIZE`, for example `data=64MiB`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (name, size) = s
            .split_once('=')
            .ok_or_else(|| format!("window '{s}' must be NAME=SIZE, for example data=64MiB"))?;
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
        {
            return Err(format!(
                "window name '{name}' must be non-empty letters, digits, '_', '-' or '.'"
            ));
        }
        Ok(WindowConfig {
            name: name.to_string(),
            size: parse_size(size.trim())?,
        })
    }
}

/// The windows a daemon has unless told otherwise: `data` (64 MiB),
/// `signal` (64 KiB) and `collective` (16 MiB, the gRPC collectives'
/// scratch).
pub fn default_windows() -> Vec<WindowConfig> {
    vec![
        WindowConfig {
            name: "data".into(),
            size: 64 << 20,
        },
        WindowConfig {
            name: "signal".into(),
            size: 64 << 10,
        },
        // The scratch of the gRPC collectives (AllReduce, ...).
        WindowConfig {
            name: "collective".into(),
            size: 16 << 20,
        },
    ]
}

/// Everything one rank needs to join its cluster.
#[derive(Debug, Clone)]
pub struct Config {
    /// This rank's id.
    pub rank: u32,
    /// `HOST:PORT` of every rank, in rank order, this rank's own included.
    pub peers: Vec<String>,
    /// Where to listen; defaults to this rank's own entry in `peers`.
    pub listen: Option<String>,
    /// The peer-plane transport.
    pub transport: TransportKind,
    /// The windows this rank owns, the same on every rank.
    pub windows: Vec<WindowConfig>,
    /// Ranks of different clusters refuse each other.
    pub cluster_id: String,
    /// How long startup keeps retrying unreachable peers.
    pub connect_timeout: Duration,
    /// How long an op waits for its reply.
    pub op_timeout: Duration,
    /// How long a barrier or a wait may take unless the call says otherwise.
    pub sync_timeout: Duration,
    /// The largest payload in one frame; bigger transfers are split.
    pub max_payload: usize,
    /// Sleep or busy-poll.
    pub progress: Progress,
    /// Mutual TLS under the cluster CA, or explicitly none. Left
    /// [`Security::Unset`], the rank refuses to start.
    pub security: Security,
    /// The race detector (`--checked[=strict]`); every rank must agree.
    pub checked: crate::CheckedMode,
    /// Record a timeline of this rank's ops, barriers, waits and races
    /// (`--trace`, [`crate::Trace`]); off costs one branch per op.
    pub trace: bool,
    /// Windows over memory the process already owns (an OpenSHMEM
    /// program's data segment), served beside `windows`.
    pub lent: Vec<std::sync::Arc<crate::lent::ForeignMemory>>,
}

/// The range every timeout may take: longer ones are typos, and would
/// overflow the clock (`Instant + d`) or QUIC's idle timeout.
pub const TIMEOUT_RANGE: std::ops::RangeInclusive<Duration> =
    Duration::from_millis(1)..=Duration::from_secs(24 * 3600);
/// The longest `--spin-idle`.
pub const MAX_SPIN_IDLE: Duration = Duration::from_secs(60);
/// The range of `--max-frame`.
pub const FRAME_RANGE: std::ops::RangeInclusive<usize> = 4096..=(256 << 20);
/// The largest window.
pub const MAX_WINDOW: u64 = 1 << 40;

impl Config {
    /// A configuration with the defaults: QUIC, windows `data` and `signal`,
    /// cluster id `pld`, 30 s connect timeout, 10 s op timeout, 60 s
    /// barrier and wait timeout.
    pub fn new(rank: u32, peers: Vec<String>) -> Self {
        Config {
            rank,
            peers,
            listen: None,
            transport: TransportKind::Quic,
            windows: default_windows(),
            cluster_id: "pld".into(),
            connect_timeout: Duration::from_secs(30),
            op_timeout: Duration::from_secs(10),
            sync_timeout: Duration::from_secs(60),
            max_payload: DEFAULT_MAX_PAYLOAD,
            progress: Progress::Sleep,
            security: Security::Unset,
            checked: crate::CheckedMode::Off,
            trace: false,
            lent: Vec::new(),
        }
    }

    /// The number of ranks.
    pub fn nranks(&self) -> u32 {
        self.peers.len() as u32
    }

    /// Checks what can be checked without the network.
    pub fn validate(&self) -> Result<()> {
        use ConfigError as E;
        let nranks = self.nranks();
        if self.peers.is_empty() {
            return Err(E::NoPeers.into());
        }
        if self.rank >= nranks {
            let rank = self.rank;
            return Err(E::RankNotInPeers { rank, nranks }.into());
        }
        if let Some((index, peer)) =
            (self.peers.iter().enumerate()).find(|(_, p)| split_host_port(p).is_none())
        {
            let peer = peer.clone();
            return Err(E::BadPeer { index, peer }.into());
        }
        if self.windows.is_empty() && self.lent.is_empty() {
            return Err(E::NoWindows.into());
        }
        let lent = self.lent.iter().map(|m| m.name());
        let mut names: Vec<&str> = self.windows.iter().map(|w| w.name.as_str()).collect();
        names.extend(lent);
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            let name = w[0].to_string();
            return Err(E::DuplicateWindow { name }.into());
        }
        if let Some(w) = self.windows.iter().find(|w| w.size == 0) {
            let name = w.name.clone();
            return Err(E::EmptyWindow { name }.into());
        }
        match &self.security {
            Security::Unset => return Err(crate::tls::unset()),
            Security::Tls(id) if id.rank() != self.rank => {
                let (identity, rank) = (id.rank(), self.rank);
                return Err(E::IdentityOfOtherRank { identity, rank }.into());
            }
            _ => {}
        }
        if self.cluster_id.is_empty() {
            return Err(E::EmptyClusterId.into());
        }
        let out_of_range = |what, flag, got: String, range: &str| {
            let range = range.to_string();
            Err(E::OutOfRange {
                what,
                flag,
                got,
                range,
            }
            .into())
        };
        for (what, flag, d) in [
            ("a connect timeout", "connect-timeout", self.connect_timeout),
            ("an op timeout", "op-timeout", self.op_timeout),
            ("a sync timeout", "sync-timeout", self.sync_timeout),
        ] {
            if !TIMEOUT_RANGE.contains(&d) {
                return out_of_range(what, flag, format!("{d:?}"), "1ms to 24h");
            }
        }
        if let Progress::Spin { idle, .. } = self.progress
            && idle > MAX_SPIN_IDLE
        {
            let got = format!("{idle:?}");
            return out_of_range("a spin idle time", "spin-idle", got, "0 to 1m");
        }
        if !FRAME_RANGE.contains(&self.max_payload) {
            let got = format!("{} bytes", self.max_payload);
            let what = "a frame payload limit";
            return out_of_range(what, "max-frame", got, "4 KiB to 256 MiB");
        }
        if let Some(w) = self.windows.iter().find(|w| w.size > MAX_WINDOW) {
            let (name, size, max) = (w.name.clone(), w.size, MAX_WINDOW);
            return Err(E::WindowTooLarge { name, size, max }.into());
        }
        Ok(())
    }

    /// The address this rank listens on.
    pub fn listen_addr(&self) -> &str {
        self.listen
            .as_deref()
            .unwrap_or(&self.peers[self.rank as usize])
    }

    /// How many ranks of the peer list, this one included, run on this
    /// rank's host, as far as the list says without asking DNS: those with
    /// the same host as this rank's entry, and, where that is a loopback
    /// host, every loopback host.
    pub fn ranks_on_this_host(&self) -> usize {
        self.ranks_here().len()
    }

    /// The ranks whose peer address names this rank's host (loopback
    /// addresses are all one host), this rank included, in rank order:
    /// OpenSHMEM's `SHMEM_TEAM_SHARED`.
    pub fn ranks_here(&self) -> Vec<u32> {
        let host = |s: &str| split_host_port(s).map(|(h, _)| h.to_ascii_lowercase());
        let loopback = |h: &str| {
            h == "localhost"
                || h.parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        };
        let Some(mine) = self.peers.get(self.rank as usize).and_then(|p| host(p)) else {
            return vec![self.rank];
        };
        let here = |h: &str| h == mine || (loopback(&mine) && loopback(h));
        (0..self.peers.len() as u32)
            .filter(|r| *r == self.rank || host(&self.peers[*r as usize]).is_some_and(|h| here(&h)))
            .collect()
    }
}

/// Splits `HOST:PORT` (`[v6]:PORT` too) into host and port.
pub fn split_host_port(s: &str) -> Option<(&str, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host, port.parse().ok()?))
}

pub use pld_proto::units::{parse_duration, parse_size};

#[cfg(test)]
mod tests;
