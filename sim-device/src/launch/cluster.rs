//! The ranks a run uses: embedded ranks started on free loopback ports
//! (mutual TLS under a throwaway CA), or the clients of running daemons
//! (`--daemons`), whose windows are cleared for the program first.

use super::Args;
use crate::device::{Device, Symmetry};
use crate::error::{Error, Result};
use crate::tensor::Profile;
use pld_proto::Rma;
use pld_server::{CheckedMode, Config, Rank, TransportKind, WindowConfig};
use std::sync::Arc;
use std::time::Duration;

/// Each device id names one rank: a duplicate is an error naming it.
pub fn check_devices(ids: &[u32]) -> Result<()> {
    for (i, id) in ids.iter().enumerate() {
        if let Some(j) = ids[..i].iter().position(|d| d == id) {
            return Err(Error::Usage(format!(
                "-d lists device {id} twice (positions {j} and {i}); each rank needs its own device id"
            )));
        }
    }
    Ok(())
}

/// Starts `n` embedded ranks on free loopback ports, connected to each other.
pub async fn start_ranks(
    n: u32,
    transport: TransportKind,
    windows: &[(String, u64)],
    sync_timeout: Duration,
) -> Result<Vec<Rank>> {
    start_ranks_with(n, transport, windows, sync_timeout, RankOptions::default()).await
}

/// What every rank of a launch runs with beyond its windows.
#[derive(Debug, Clone, Copy, Default)]
pub struct RankOptions {
    /// The race detector.
    pub checked: CheckedMode,
    /// Record a timeline (`--trace`).
    pub trace: bool,
}

/// [`start_ranks`] with `opts` on every rank.
pub async fn start_ranks_with(
    n: u32,
    transport: TransportKind,
    windows: &[(String, u64)],
    sync_timeout: Duration,
    opts: RankOptions,
) -> Result<Vec<Rank>> {
    if n == 0 {
        return Err(Error::Usage("-d names no device".into()));
    }
    let mut peers = Vec::new();
    for _ in 0..n {
        let port = pld_server::transport::free_loopback_port()
            .map_err(|e| Error::Usage(format!("no free loopback port: {e}")))?;
        peers.push(format!("127.0.0.1:{port}"));
    }
    // The ranks authenticate each other under a CA that lives as long as
    // this launch.
    let security = pld_server::tls::ClusterCa::throwaway(n).map_err(|e| Error::Rma {
        rank: 0,
        reason: pld_proto::rma::Reason::reason(&e).into(),
        message: format!("cannot make the cluster's TLS material: {e}"),
    })?;
    let mut set = tokio::task::JoinSet::new();
    for (r, security) in (0..n).zip(security) {
        let mut c = Config::new(r, peers.clone());
        c.security = security;
        c.transport = transport;
        c.windows = windows
            .iter()
            .map(|(name, size)| WindowConfig {
                name: name.clone(),
                size: *size,
            })
            .collect();
        c.sync_timeout = sync_timeout;
        c.connect_timeout = Duration::from_secs(20);
        c.checked = opts.checked;
        c.trace = opts.trace;
        set.spawn(async move { (r, Rank::start(c).await) });
    }
    let mut ranks: Vec<Option<Rank>> = (0..n).map(|_| None).collect();
    while let Some(j) = set.join_next().await {
        let (r, rank) = j.map_err(|e| Error::Usage(format!("a rank failed to start: {e}")))?;
        ranks[r as usize] = Some(rank.map_err(|e| Error::Rma {
            rank: r,
            reason: pld_proto::rma::Reason::reason(&e).into(),
            message: format!("cannot start: {e}"),
        })?);
    }
    Ok(ranks.into_iter().flatten().collect())
}

/// Zeroes the program's part of every daemon's windows, each rank its
/// own, then waits for all: a kernel sees zeroed windows, as it does on
/// fresh in-process ranks, whatever earlier runs left in the daemons.
pub async fn clear<R: Rma + 'static>(
    devices: &[Arc<Device<R>>],
    windows: &[(String, u64)],
) -> Result<()> {
    let mut set = tokio::task::JoinSet::new();
    for dev in devices {
        let (dev, windows) = (dev.clone(), windows.to_vec());
        set.spawn(async move {
            let rma = dev.rma();
            let err = |e: R::Error| Error::Rma {
                rank: rma.rank(),
                reason: pld_proto::rma::Reason::reason(&e).into(),
                message: format!("clearing the windows: {e}"),
            };
            for (name, bytes) in &windows {
                let win = rma.window(name).map_err(err)?;
                rma.put(rma.rank(), win, 0, &vec![0u8; *bytes as usize])
                    .await
                    .map_err(err)?;
            }
            rma.barrier().await.map_err(err)
        });
    }
    while let Some(j) = set.join_next().await {
        j.map_err(|e| Error::Usage(format!("clearing the windows failed: {e}")))??;
    }
    Ok(())
}

/// Connects to `args.daemons` (in rank order) and makes a device of each,
/// with the program's windows (`needs`).
pub async fn connect(
    args: &Args,
    profile: Profile,
    needs: &[(String, u64)],
    symmetry: &Arc<Symmetry>,
) -> Result<Vec<Arc<Device<pld_client::Client>>>> {
    let mut out = Vec::new();
    for (i, addr) in args.daemons.iter().enumerate() {
        let opts = pld_client::ClientOptions {
            token: args.token.clone(),
            ..Default::default()
        };
        let c = pld_client::Client::connect_with(addr, opts)
            .await
            .map_err(|e| Error::Rma {
                rank: i as u32,
                reason: pld_proto::rma::Reason::reason(&e).into(),
                message: e.to_string(),
            })?;
        if c.rank() != i as u32 || c.nranks() != args.daemons.len() as u32 {
            return Err(Error::Usage(format!(
                "--daemons lists {addr} as rank {i} of {}, but it is rank {} of {}; list the daemons in rank order",
                args.daemons.len(),
                c.rank(),
                c.nranks()
            )));
        }
        // The program gets the part of each window it asked for.
        let mut windows = Vec::new();
        for (name, need) in needs {
            let have = c.info().windows.iter().find(|w| &w.name == name);
            match have {
                Some(w) if w.size >= *need => windows.push((name.clone(), *need)),
                _ => {
                    return Err(Error::Usage(format!(
                        "the daemon at {addr} has {}; this program needs window '{name}' of {need} bytes \
                         (pld-daemon --window {name}=SIZE)",
                        have.map_or("no such window".to_string(), |w| format!(
                            "'{name}' of {} bytes",
                            w.size
                        ))
                    )));
                }
            }
        }
        let dev = Device::new(Arc::new(c), profile, windows).with_symmetry(symmetry.clone());
        out.push(Arc::new(dev));
    }
    Ok(out)
}
