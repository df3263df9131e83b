//! [`Driver`]: the runtime of one run's ranks, and how a Python thread
//! waits on it without paying a thread wake-up per op.
//!
//! A thread asleep costs more to wake on our machines than a loopback TCP
//! op itself (docs/PERFORMANCE.md). The Rust device pays none: its kernel task, the
//! target's server and the origin's reader run on one worker, which polls
//! the sockets itself between them. A Python rank's op crosses threads
//! twice: the request reaches a worker asleep in epoll, and the reply
//! reaches the Python thread. So, while device calls are in flight:
//!
//! - the calling thread polls its op itself (yielding its core between
//!   polls) for up to [`spin_budget`] before it parks, and
//! - one runtime task, the *pacer*, keeps a worker awake: it yields in a
//!   loop, and every yield makes the worker poll the sockets without
//!   sleeping and run what they woke — the target's apply, the reply.
//!
//! The pacer stops after the same budget when no call began in it (a long
//! wait or barrier, or no calls at all), so an idle or waiting run costs no
//! CPU; the next call wakes it once.
//!
//! One worker: the ranks' servers then run where the pacer keeps the
//! sockets polled. With two, the pacer's yields kept waking the second to
//! steal work, which took the core from the Python threads (one worker
//! was nearly twice as fast: docs/PERFORMANCE.md; the Python threads
//! themselves are the rest of the parallelism).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a device call polls before it parks, and how long the pacer
/// keeps a worker awake after the last call began: `PLD_PYPTO_SPIN_US`,
/// 300 us by default (an op on loopback completes within it; a wait or a
/// barrier that takes longer parks and costs no CPU after that). `0` turns
/// both off.
pub(crate) fn spin_budget() -> Duration {
    let us = std::env::var("PLD_PYPTO_SPIN_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300u64);
    Duration::from_micros(us)
}

/// What the callers tell the pacer.
#[derive(Debug)]
struct Pace {
    origin: Instant,
    /// When the latest call began, in microseconds since `origin`.
    last_call_us: AtomicU64,
    /// Whether the pacer is asleep (and a call must wake it).
    asleep: AtomicBool,
    wake: Notify,
    budget: Duration,
}

impl Pace {
    fn since_last_call(&self) -> Duration {
        let now = self.origin.elapsed().as_micros() as u64;
        Duration::from_micros(now.saturating_sub(self.last_call_us.load(Ordering::Relaxed)))
    }
}

/// The run's runtime and its pacer.
#[derive(Debug)]
pub(crate) struct Driver {
    rt: tokio::runtime::Runtime,
    pace: Arc<Pace>,
}

impl Driver {
    /// A one-worker runtime with its pacer task.
    pub fn start() -> std::io::Result<Driver> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let budget = spin_budget();
        let pace = Arc::new(Pace {
            origin: Instant::now(),
            last_call_us: AtomicU64::new(0),
            asleep: AtomicBool::new(true),
            wake: Notify::new(),
            budget,
        });
        if !budget.is_zero() {
            rt.spawn(pacer(pace.clone()));
        }
        Ok(Driver { rt, pace })
    }

    /// Runs `fut` to completion on the calling thread (see the module
    /// header for how it waits).
    pub fn block_on<F: Future>(&self, fut: F) -> F::Output {
        let p = &self.pace;
        p.last_call_us
            .store(p.origin.elapsed().as_micros() as u64, Ordering::Relaxed);
        if p.asleep.swap(false, Ordering::SeqCst) {
            p.wake.notify_one();
        }
        let mut fut = std::pin::pin!(fut);
        if !p.budget.is_zero() {
            let _in_runtime = self.rt.enter();
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let start = Instant::now();
            while start.elapsed() < p.budget {
                if let std::task::Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
                    return r;
                }
                std::thread::yield_now();
            }
        }
        self.rt.block_on(fut)
    }
}

/// Keeps one worker polling the sockets while calls are recent.
async fn pacer(p: Arc<Pace>) {
    loop {
        while p.since_last_call() < p.budget {
            tokio::task::yield_now().await;
        }
        p.asleep.store(true, Ordering::SeqCst);
        // A call that began after the check above has seen `asleep` false
        // and not notified: look again before sleeping.
        if p.since_last_call() < p.budget {
            p.asleep.store(false, Ordering::SeqCst);
            continue;
        }
        p.wake.notified().await;
    }
}
