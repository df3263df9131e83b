//! Busy-polled TCP: the `--progress spin` transport.
//!
//! Waking a sleeping thread costs several times a busy-polled loopback
//! round trip on our machines (docs/PERFORMANCE.md). A [`SpinTcp`] socket
//! therefore reads
//! and writes with plain non-blocking syscalls, and when one would block it
//! asks to be polled again at once instead of waiting for epoll (see
//! [`again`]): the thread never sleeps. Once the socket has
//! been idle for the configured time it backs off — it waits for readiness
//! through tokio's reactor like any socket — and spins again from the next
//! byte on. All inside tokio: no extra thread.
//!
//! Where ranks outnumber the host's cores (`oversubscribed`), a rank that
//! spins holds the core the rank it waits for needs: a polling thread then
//! sleeps after [`PARK_AFTER`] empty polls in a row, and a barrier round
//! costs a wake-up instead of the rotation of every spinner on the core
//! (docs/PERFORMANCE.md).

use socket2::SockRef;
use std::future::Future;
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::ReadBuf;
use tokio::io::unix::AsyncFd;

/// Nanoseconds since the first call, for cheap shared timestamps.
fn now_ns() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Asks to be polled again soon, the way `tokio::task::yield_now` does:
/// the task is deferred until the scheduler has polled its driver and the
/// other ready tasks — and, on a current-thread runtime, the `block_on`
/// future. (A plain `wake_by_ref` would put the task straight back in the
/// run queue, and the scheduler runs up to 61 queued polls before it looks
/// at `block_on` again: a spinning reader then delays the very caller it
/// just woke.)
fn defer<T>(cx: &mut Context<'_>) -> Poll<T> {
    let mut y = std::pin::pin!(tokio::task::yield_now());
    // The first poll of a yield registers the deferred wake and is Pending.
    let _ = y.as_mut().poll(cx);
    Poll::Pending
}

/// Empty polls on a thread, since bytes last moved on it, that defer to
/// the scheduler (see [`again`]).
const DEFER_FOR: u32 = 16;

/// Asks to be polled again after an empty poll. Right after bytes moved on
/// this thread — when a reply may just have woken its caller — the poll
/// [`defer`]s, so that the caller runs before any spinner polls again;
/// once nothing has moved for [`DEFER_FOR`] polls, the task goes straight
/// back in the run queue: the scheduler then skips its look at the reactor
/// (an `epoll_wait` per pass) and the spin costs one `recv` a round.
fn again<T>(cx: &mut Context<'_>) -> Poll<T> {
    if THREAD_MISSES.with(std::cell::Cell::get) <= DEFER_FOR {
        return defer(cx);
    }
    cx.waker().wake_by_ref();
    Poll::Pending
}

/// A TCP connection that busy-polls while it is active.
#[derive(Debug)]
pub struct SpinTcp {
    fd: AsyncFd<TcpStream>,
    idle_ns: u64,
    /// Empty polls in a row on this thread after which it sleeps (u32::MAX
    /// unless oversubscribed).
    park_after: u32,
    last_active: AtomicU64,
    /// Misses since the clock was last read: the clock is read once per
    /// `CLOCK_EVERY` misses, not on every one.
    misses: std::sync::atomic::AtomicU32,
    /// Whether reads spin at all. A link's reader spins only while replies
    /// are due (`want_replies`) or a barrier signal is (`want_signals`);
    /// served connections always may.
    read_spins: std::sync::atomic::AtomicBool,
    /// A barrier waits for a signal on this connection (`want_signals`).
    signals_due: std::sync::atomic::AtomicBool,
    /// The reader's waker while it waits for readiness, so that turning
    /// spinning back on can wake it.
    parked_reader: std::sync::Mutex<Option<std::task::Waker>>,
}

thread_local! {
    /// Empty polls in a row on this thread, over all its spinning sockets,
    /// since bytes last moved on any of them: the thread gives the CPU away
    /// once per round of them, not once per socket, and, oversubscribed,
    /// parks after [`PARK_AFTER`].
    static THREAD_MISSES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Empty polls in a row after which each further one gives the CPU away
/// (sched_yield) — so that ranks outnumbering the cores take turns instead
/// of spinning through each other's time slices. With nobody else to run,
/// sched_yield returns at once.
const YIELD_AFTER: u32 = 4;

/// Oversubscribed: empty polls in a row on a thread, over all its sockets,
/// after which it sleeps until the next byte. Measured at P = 4 and 8 on
/// two cores: 24–48 all do as well; 2–16 with a yield after every poll, or
/// the reactor polled between yields, do worse (docs/PERFORMANCE.md).
pub const PARK_AFTER: u32 = 32;

/// How many empty polls pass between two looks at the clock.
const CLOCK_EVERY: u32 = 128;

impl SpinTcp {
    /// Wraps a connected stream; it spins while it has moved bytes within
    /// the last `idle` — oversubscribed, for `PARK_AFTER` empty polls.
    pub fn new(stream: TcpStream, idle: Duration, oversubscribed: bool) -> io::Result<SpinTcp> {
        stream.set_nonblocking(true)?;
        stream.set_nodelay(true)?;
        // SAFETY: the TcpStream owns its descriptor and moves into the
        // AsyncFd, which keeps it open and unchanged until it is dropped.
        let fd = unsafe { AsyncFd::register(stream) }.map_err(io::Error::from)?;
        Ok(SpinTcp {
            fd,
            idle_ns: idle.as_nanos() as u64,
            park_after: if oversubscribed { PARK_AFTER } else { u32::MAX },
            last_active: AtomicU64::new(now_ns()),
            misses: std::sync::atomic::AtomicU32::new(0),
            read_spins: std::sync::atomic::AtomicBool::new(true),
            signals_due: std::sync::atomic::AtomicBool::new(false),
            parked_reader: std::sync::Mutex::new(None),
        })
    }

    /// Bytes moved: the thread spins on. A read also marks the socket's
    /// read side active (the timestamp is taken on the next look at the
    /// clock); a write does not, so that a connection this rank only
    /// writes to — barrier signals to a lower rank on its served
    /// connection — does not keep its reads spinning.
    fn touch(&self, read: bool) {
        if read {
            self.misses.store(0, Ordering::Relaxed);
            self.last_active.store(0, Ordering::Relaxed);
        }
        THREAD_MISSES.with(|m| m.set(0));
    }

    /// Whether the read side should spin: a link turns it on while replies
    /// are due and off when none are, so that a link that only sends
    /// (barrier signals, say) does not burn a core waiting for nothing.
    pub fn want_replies(&self, on: bool) {
        self.want(&self.read_spins, on);
    }

    /// Whether the read side should spin for a barrier signal, whether or
    /// not replies are due: a barrier waits for one on this link.
    pub fn want_signals(&self, on: bool) {
        self.want(&self.signals_due, on);
    }

    /// Whether the read side spins: replies or a signal are due.
    fn reads_spin(&self) -> bool {
        self.read_spins.load(Ordering::Acquire) || self.signals_due.load(Ordering::Acquire)
    }

    fn want(&self, flag: &std::sync::atomic::AtomicBool, on: bool) {
        // Called for every op issued and completed: most leave it as it is,
        // and a load costs less than a swap.
        if flag.load(Ordering::Acquire) == on {
            return;
        }
        let was = flag.swap(on, Ordering::AcqRel);
        if on && !was {
            self.misses.store(0, Ordering::Relaxed);
            self.last_active.store(0, Ordering::Relaxed);
            let parked = self.parked_reader.lock().map(|mut w| w.take());
            if let Ok(Some(w)) = parked {
                w.wake();
            }
        }
    }

    /// Whether to keep spinning after an empty poll: yes while there was
    /// traffic within the idle time.
    fn spinning(&self) -> bool {
        let thread_misses = THREAD_MISSES.with(|m| {
            m.set(m.get().saturating_add(1));
            m.get()
        });
        if thread_misses > self.park_after {
            return false;
        }
        if thread_misses % (YIELD_AFTER + 1) == 0 {
            std::thread::yield_now();
        }
        let misses = self.misses.fetch_add(1, Ordering::Relaxed);
        if misses % CLOCK_EVERY != 0 {
            return true;
        }
        let now = now_ns();
        match self.last_active.load(Ordering::Relaxed) {
            // Active since the last look: start the idle clock now.
            0 => {
                self.last_active.store(now, Ordering::Relaxed);
                true
            }
            since if now.saturating_sub(since) < self.idle_ns => true,
            // Idle: the next empty poll (after a wake-up that brought
            // nothing) looks at the clock again rather than spinning for
            // another `CLOCK_EVERY`.
            _ => {
                self.misses.store(0, Ordering::Relaxed);
                false
            }
        }
    }

    /// Runs one non-blocking socket operation; when it would block, spins
    /// (or, idle, waits for readiness) and says so with `Pending`.
    fn poll_io<R>(
        &self,
        cx: &mut Context<'_>,
        read: bool,
        mut op: impl FnMut(&TcpStream) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            match op(self.fd.get_ref()) {
                Ok(r) => {
                    self.touch(read);
                    return Poll::Ready(Ok(r));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let spins = !read || self.reads_spin();
                    if spins && self.spinning() {
                        return again(cx);
                    }
                    if read && !spins {
                        if let Ok(mut w) = self.parked_reader.lock() {
                            *w = Some(cx.waker().clone());
                        }
                        // Spinning may have been turned on meanwhile (and
                        // the waker taken before it was left): read again.
                        if self.reads_spin() {
                            continue;
                        }
                    }
                    // Idle (or not to spin): wait for readiness. (Asking
                    // `spinning` again here would restart its count, and an
                    // idle socket would never stop spinning.)
                    let ready = if read {
                        self.fd.poll_read_ready(cx)
                    } else {
                        self.fd.poll_write_ready(cx)
                    };
                    match ready {
                        Poll::Ready(Ok(mut ready)) => ready.clear_ready(),
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Pending => return Poll::Pending,
                    }
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    pub(super) fn poll_read(
        &self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `recv` writes at most the slice's length of bytes and
        // returns how many; only those are marked initialised.
        let unfilled = unsafe { buf.unfilled_mut() };
        let n = std::task::ready!(self.poll_io(cx, true, |s| SockRef::from(s).recv(unfilled)))?;
        // SAFETY: the kernel initialised the first `n` bytes.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }

    pub(super) fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_io(cx, false, |mut s| s.write(buf))
    }

    /// `recv` into raw memory (a window's rows).
    pub(super) fn poll_read_raw(
        &self,
        cx: &mut Context<'_>,
        dst: super::Raw,
    ) -> Poll<io::Result<usize>> {
        self.poll_io(cx, true, |s| super::recv_raw(s, dst, libc::MSG_DONTWAIT))
    }

    /// `send` from raw memory (a window's rows).
    pub(super) fn poll_write_raw(
        &self,
        cx: &mut Context<'_>,
        src: super::Raw,
    ) -> Poll<io::Result<usize>> {
        self.poll_io(cx, false, |s| super::send_raw(s, src, libc::MSG_DONTWAIT))
    }

    pub(super) fn shutdown(&self) -> io::Result<()> {
        match self.fd.get_ref().shutdown(std::net::Shutdown::Write) {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            r => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::task::{Wake, Waker};

    /// Counts the wakes of the task it stands for.
    struct Wakes(AtomicUsize);
    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A connected loopback pair.
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (a, l.accept().unwrap().0)
    }

    /// Polls a read on `s` until a poll is left to readiness — Pending
    /// without asking to be polled again — and says after how many; `None`
    /// if it still spins after `limit`.
    fn polls_until_parked(s: &SpinTcp, wakes: &Arc<Wakes>, limit: usize) -> Option<usize> {
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut buf = [0u8; 16];
        for i in 1..=limit {
            let before = wakes.0.load(Ordering::SeqCst);
            let mut rb = ReadBuf::new(&mut buf);
            match s.poll_read(&mut cx, &mut rb) {
                Poll::Ready(r) => panic!("read {r:?} from a silent peer"),
                Poll::Pending if wakes.0.load(Ordering::SeqCst) == before => return Some(i),
                Poll::Pending => {}
            }
        }
        None
    }

    /// A runtime, a `SpinTcp` with this idle time on one end of a loopback
    /// pair (the other end is returned), and a fresh wake counter.
    fn spin_socket(idle: Duration) -> (tokio::runtime::Runtime, SpinTcp, TcpStream, Arc<Wakes>) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .unwrap();
        let (a, b) = pair();
        let s = {
            let _in = rt.enter();
            SpinTcp::new(a, idle, false).unwrap()
        };
        (rt, s, b, Arc::new(Wakes(AtomicUsize::new(0))))
    }

    #[test]
    fn an_idle_socket_stops_spinning_and_waits_for_readiness() {
        let (rt, s, mut b, wakes) = spin_socket(Duration::ZERO);
        let _in = rt.enter();
        let polls = polls_until_parked(&s, &wakes, 10 * CLOCK_EVERY as usize)
            .expect("an idle socket never stopped spinning");
        assert!(
            polls <= CLOCK_EVERY as usize + 1,
            "parked after {polls} polls"
        );
        // Once idle, a wake-up that brings nothing parks it again at once.
        assert_eq!(polls_until_parked(&s, &wakes, 10), Some(1));
        // The next byte is read as soon as the task is polled.
        b.write_all(b"x").unwrap();
        let waker = Waker::from(wakes.clone());
        let mut buf = [0u8; 4];
        let mut rb = ReadBuf::new(&mut buf);
        let mut cx = Context::from_waker(&waker);
        let deadline = Instant::now() + Duration::from_secs(10);
        let read = loop {
            if let Poll::Ready(r) = s.poll_read(&mut cx, &mut rb) {
                break r;
            }
            assert!(Instant::now() < deadline, "the byte written never arrived");
        };
        read.unwrap();
        assert_eq!(rb.filled(), b"x");
    }

    #[test]
    fn an_active_socket_keeps_spinning_within_its_idle_time() {
        let (rt, s, _b, wakes) = spin_socket(Duration::from_secs(3600));
        let _in = rt.enter();
        let limit = 4 * CLOCK_EVERY as usize;
        assert_eq!(polls_until_parked(&s, &wakes, limit), None);
    }

    /// A reader with no replies due parks at once; `turn_on` wakes it (the
    /// assertion saying `why`), it then spins, and it parks again at once
    /// when neither replies nor a signal are due.
    fn parked_then_woken_by(turn_on: impl Fn(&SpinTcp), why: &str) {
        let (rt, s, _b, wakes) = spin_socket(Duration::from_secs(3600));
        let _in = rt.enter();
        s.want_replies(false);
        assert_eq!(polls_until_parked(&s, &wakes, 10), Some(1));
        turn_on(&s);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "{why}");
        assert_eq!(
            polls_until_parked(&s, &wakes, 2 * CLOCK_EVERY as usize),
            None
        );
        s.want_signals(false);
        s.want_replies(false);
        assert_eq!(polls_until_parked(&s, &wakes, 10), Some(1));
    }

    #[test]
    fn a_reader_with_no_replies_due_parks_at_once_and_wakes_when_one_is() {
        parked_then_woken_by(|s| s.want_replies(true), "issuing an op wakes the reader");
    }

    #[test]
    fn a_reader_spins_while_a_signal_is_due_though_no_reply_is() {
        parked_then_woken_by(|s| s.want_signals(true), "a due signal wakes the reader");
    }

    #[test]
    fn writes_alone_do_not_keep_the_reads_spinning() {
        let (rt, s, _b, wakes) = spin_socket(Duration::ZERO);
        let _in = rt.enter();
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        // A byte written before every read poll: the reads still go idle
        // at their first look at the clock after the first.
        let polls = (1..=10 * CLOCK_EVERY as usize).find(|_| {
            assert!(matches!(s.poll_write(&mut cx, b"x"), Poll::Ready(Ok(1))));
            polls_until_parked(&s, &wakes, 1).is_some()
        });
        let polls = polls.expect("writes kept the reads spinning");
        assert!(
            polls <= CLOCK_EVERY as usize + 1,
            "parked after {polls} polls"
        );
    }
}
