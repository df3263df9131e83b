//! `pld_pypto._native`: the pld simulated device (`pld-sim`) exposed to
//! Python, so that the `pypto` shim of `pld-pypto` keeps every device
//! rule — tile capacity and alignment, symmetric window buffers, the one
//! put message of `remote_store`, chunking, the collectives, every
//! diagnostic and its message — in Rust, written once.
//!
//! A [`Cluster`] starts one embedded rank per device (or connects to
//! daemons); [`PyRank`] is one rank's device, whose every blocking call
//! releases the GIL so that the ranks' kernels run concurrently in Python
//! threads. A failed rank cancels the others' pending calls at once.

mod convert;
mod driver;
mod dtype;
mod errors;
mod rank;
mod system;
mod tensor;
mod tile;

use pld_client::Client;
use pld_server::{CheckedMode, Rank, TransportKind};
use pld_sim::launch::{self, Args};
use pld_sim::{Device, Profile, Symmetry, WindowBuffer};
use pyo3::create_exception;
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

create_exception!(
    _native,
    PldError,
    pyo3::exceptions::PyRuntimeError,
    "A device call failed; the message says why and the fix."
);

/// A device error as a Python exception.
pub(crate) fn py_err(e: impl std::fmt::Display) -> PyErr {
    PldError::new_err(e.to_string())
}

/// One rank's device, embedded or a daemon's client.
#[derive(Debug)]
pub(crate) enum Dev {
    Rank(Arc<Device<Rank>>),
    Client(Arc<Device<Client>>),
}

/// Runs `$body` with `$d` bound to the rank's `Device<R>`, whichever `R`.
macro_rules! on_dev {
    ($dev:expr, $d:ident => $body:expr) => {
        match $dev {
            $crate::Dev::Rank($d) => $body,
            $crate::Dev::Client($d) => $body,
        }
    };
}
pub(crate) use on_dev;

/// The ranks of one run.
#[pyclass(module = "pld_pypto._native")]
#[derive(Debug)]
pub struct Cluster {
    ranks: Vec<Py<rank::PyRank>>,
    cancel: watch::Sender<Option<String>>,
    symmetry: Arc<Symmetry>,
}

fn windows(data: u64, signal: u64) -> Vec<(String, u64)> {
    vec![("data".into(), data), ("signal".into(), signal)]
}

impl Cluster {
    /// The devices of the embedded ranks (none with `daemons`).
    fn embedded(&self, py: Python<'_>) -> Vec<Arc<Device<pld_server::Rank>>> {
        self.ranks
            .iter()
            .filter_map(|r| match r.borrow(py).device() {
                Some(Dev::Rank(d)) => Some(d.clone()),
                _ => None,
            })
            .collect()
    }
}

#[pymethods]
impl Cluster {
    /// Starts `n` embedded ranks over loopback (`transport` quic or tcp,
    /// mutual TLS under a throwaway CA), or, with `daemons`, connects to
    /// running daemons' gRPC addresses in rank order.
    #[new]
    #[pyo3(signature = (n, platform="a2a3sim", transport="quic", timeout_s=30.0, daemons=Vec::new(), token=None, data_bytes=16<<20, signal_bytes=64<<10, checked="off", trace=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        n: u32,
        platform: &str,
        transport: &str,
        timeout_s: f64,
        daemons: Vec<String>,
        token: Option<String>,
        data_bytes: u64,
        signal_bytes: u64,
        checked: &str,
        trace: bool,
    ) -> PyResult<Cluster> {
        let checked: CheckedMode = checked.parse().map_err(py_err)?;
        if trace && !daemons.is_empty() {
            return Err(py_err(
                "--trace records the embedded ranks; for --daemons, start every daemon with --trace FILE",
            ));
        }
        let opts = launch::RankOptions { checked, trace };
        if checked != CheckedMode::Off && !daemons.is_empty() {
            return Err(py_err(
                "--checked runs the race detector in embedded ranks; for --daemons, start every daemon with --checked (its log and Stats `races` report)",
            ));
        }
        let profile = Profile::parse(platform).ok_or_else(|| {
            py_err(format!(
                "-p {platform} is not a device profile: a2a3sim or a5sim"
            ))
        })?;
        let kind: TransportKind = transport
            .parse()
            .map_err(|e| py_err(format!("--transport: {e}")))?;
        if !(timeout_s > 0.0 && timeout_s < 1e6) {
            return Err(py_err(format!(
                "the timeout must be positive seconds, got {timeout_s}"
            )));
        }
        let rt = Arc::new(
            driver::Driver::start()
                .map_err(|e| py_err(format!("cannot start the runtime: {e}")))?,
        );
        let wins = windows(data_bytes, signal_bytes);
        let symmetry = Symmetry::shared();
        let devs: Vec<Dev> = py
            .detach(|| {
                rt.block_on(async {
                    if daemons.is_empty() {
                        let timeout = Duration::from_secs_f64(timeout_s);
                        let ranks = launch::start_ranks_with(n, kind, &wins, timeout, opts).await?;
                        Ok::<_, pld_sim::Error>(
                            ranks
                                .into_iter()
                                .map(|r| {
                                    let trace = r.trace().cloned();
                                    let d = Device::new(Arc::new(r), profile, wins.clone())
                                        .with_trace(trace);
                                    Dev::Rank(Arc::new(d.with_symmetry(symmetry.clone())))
                                })
                                .collect(),
                        )
                    } else {
                        let mut argv = vec![
                            "pld-pypto".to_string(),
                            "--daemons".into(),
                            daemons.join(","),
                        ];
                        if let Some(t) = &token {
                            argv.extend(["--token".into(), t.clone()]);
                        }
                        let args = <Args as clap::Parser>::try_parse_from(argv)
                            .map_err(|e| pld_sim::Error::Usage(e.to_string()))?;
                        let devs = launch::connect(&args, profile, &wins, &symmetry).await?;
                        launch::clear(&devs, &wins).await?;
                        Ok(devs.into_iter().map(Dev::Client).collect())
                    }
                })
            })
            .map_err(errors::device_err)?;
        let (cancel, _) = watch::channel(None);
        let mut ranks = Vec::new();
        for dev in devs {
            let r = rank::PyRank::new(dev, rt.clone(), cancel.subscribe());
            ranks.push(Py::new(py, r)?);
        }
        Ok(Cluster {
            ranks,
            cancel,
            symmetry,
        })
    }

    /// The rank handles, in rank order.
    fn ranks(&self, py: Python<'_>) -> Vec<Py<rank::PyRank>> {
        self.ranks.iter().map(|r| r.clone_ref(py)).collect()
    }

    /// Cancels every rank's pending and future calls with `reason` (a rank
    /// failed: the others must not wait for it until their deadline).
    fn cancel(&self, reason: String) {
        self.cancel.send_replace(Some(reason));
    }

    /// After every kernel ended: a window buffer one rank allocated and
    /// another did not is an error naming both.
    fn check_symmetric(&self) -> PyResult<()> {
        self.symmetry
            .check_complete(self.ranks.len() as u32)
            .map_err(errors::device_err)
    }

    /// `--checked`: every race the embedded ranks reported, each once,
    /// sorted (empty when checked mode is off or nothing raced).
    fn race_reports(&self, py: Python<'_>) -> Vec<String> {
        let devs = self.embedded(py);
        pld_sim::checked::reports(devs.iter().map(|d| d.rma()), &self.symmetry)
    }

    /// `--trace`: every embedded rank's timeline as one Chrome
    /// trace-event JSON document (None without `trace`).
    fn trace_json(&self, py: Python<'_>) -> Option<String> {
        let devs = self.embedded(py);
        let traces: Vec<&pld_server::Trace> = devs
            .iter()
            .filter_map(|d| d.rma().trace())
            .map(|t| &**t)
            .collect();
        (!traces.is_empty()).then(|| pld_server::trace::merge(&traces))
    }

    /// Shuts the ranks down.
    fn close(&mut self, py: Python<'_>) {
        let ranks = std::mem::take(&mut self.ranks);
        for r in &ranks {
            r.borrow_mut(py).release();
        }
    }
}

/// Refuses a device id listed twice (the launcher's rule).
#[pyfunction]
fn check_devices(ids: Vec<u32>) -> PyResult<()> {
    launch::check_devices(&ids).map_err(errors::device_err)
}

/// The window buffers a rank allocated, by index.
pub(crate) type Buffers = Mutex<Vec<WindowBuffer>>;

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PldError", m.py().get_type::<PldError>())?;
    errors::register(m)?;
    m.add_class::<Cluster>()?;
    m.add_function(wrap_pyfunction!(check_devices, m)?)?;
    m.add_class::<rank::PyRank>()?;
    m.add_class::<rank::NativeTile>()?;
    Ok(())
}
