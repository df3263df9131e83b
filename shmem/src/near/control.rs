//! The control block each PE keeps at a fixed offset of its heap (in the
//! library's reserved bytes): how the other PEs of its host find its heap
//! file, and the doorbell a PE that sleeps in a wait is woken by.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering, fence};
use std::time::Duration;

/// The control block. Zero until its PE fills it in `shmem_init`.
#[repr(C, align(64))]
pub(crate) struct Control {
    /// A random number, also read over the network: a PE that maps this
    /// block through `/proc/PID/fd/FD` and finds it knows it reached the
    /// same memory, not another host's process of the same pid.
    pub nonce: AtomicU64,
    /// The process.
    pub pid: AtomicU32,
    /// Its heap's memory file descriptor.
    pub fd: AtomicI32,
    /// [`VERDICT_NEAR`] once this PE maps every PE's heap (with
    /// [`VERDICT_DATA`] if every PE's data segment too), else
    /// [`VERDICT_FAR`]; 0 before it has tried.
    pub verdict: AtomicU32,
    /// Its data segment's memory file descriptor, or -1: the segment is
    /// private (`segment::share`).
    pub data_fd: AtomicI32,
    /// That file's length.
    pub data_len: AtomicU64,
    /// That file's inode, which a PE that opens it checks.
    pub data_ino: AtomicU64,
    /// Where in the data window the file's first byte is.
    pub data_head: AtomicU64,
    _pad: [u32; 4],
    /// The doorbell: a counter in the upper 31 bits, and in bit 0 whether
    /// a thread of this PE sleeps on it (or is about to). A writer that
    /// sees the bit clears it (one compare-and-swap) and wakes the
    /// sleepers, so a stream of writes costs one wake per sleep, not one
    /// each; a writer that does not see it pays one load.
    bell: AtomicU32,
    _pad2: [u32; 15],
}

/// The bytes [`Control::nonce`], `pid` and `fd` take, read over the network.
pub(crate) const IDENTITY_BYTES: u64 = 16;
/// The PE maps every PE's heap.
pub(crate) const VERDICT_NEAR: u32 = 1;
/// It does not: the job does not use shared memory.
pub(crate) const VERDICT_FAR: u32 = 2;
/// With [`VERDICT_NEAR`]: the PE maps every PE's data segment too.
pub(crate) const VERDICT_DATA: u32 = 4;

const _: () = assert!(std::mem::size_of::<Control>() == 128);

impl Control {
    /// The control block at `addr`.
    ///
    /// # Safety
    /// `addr` is 64-byte aligned, valid for 128 bytes of shared heap
    /// memory that lives as long as the process, and only used as a
    /// control block.
    pub(crate) unsafe fn at<'a>(addr: usize) -> &'a Control {
        // SAFETY: the caller's contract; every field is an atomic, valid at
        // any bit pattern, zero included.
        unsafe { &*(addr as *const Control) }
    }

    /// Wakes this PE's sleeping waiters, if any, after a write into its
    /// memory. The writer's store, this fence and its load of the bell pair
    /// with the waiter's setting of the bit and its second look at memory
    /// (each side's store before its load), so either the waiter sees the
    /// write or the writer sees the bit.
    pub(crate) fn ring(&self) {
        fence(Ordering::SeqCst);
        let v = self.bell.load(Ordering::Relaxed);
        if v & SLEEPING != 0
            && self
                .bell
                .compare_exchange(v, v.wrapping_add(1), Ordering::SeqCst, Ordering::Relaxed)
                .is_ok()
        {
            futex(&self.bell, libc::FUTEX_WAKE, i32::MAX as u32, None);
        }
    }

    /// Sleeps until `ready()` holds (true) or `left` runs out (false),
    /// woken by [`Control::ring`] — from another PE's write or, through
    /// the rank's change hook, from a write that came over the network.
    pub(crate) fn sleep_until(
        &self,
        left: impl Fn() -> Option<Duration>,
        ready: &mut impl FnMut() -> bool,
    ) -> bool {
        loop {
            let v = self.bell.load(Ordering::SeqCst);
            if ready() {
                return true;
            }
            let Some(left) = left() else {
                return ready();
            };
            // Set the bit (unless another sleeper has), then look again:
            // a write before the bit was set rang nobody.
            if v & SLEEPING == 0
                && self
                    .bell
                    .compare_exchange(v, v | SLEEPING, Ordering::SeqCst, Ordering::Relaxed)
                    .is_err()
            {
                continue;
            }
            if ready() {
                return true;
            }
            futex(&self.bell, libc::FUTEX_WAIT, v | SLEEPING, Some(left));
        }
    }
}

/// The bell's bit that says a thread sleeps on it.
const SLEEPING: u32 = 1;

/// futex(2) on a word of shared memory (not FUTEX_PRIVATE: the waker is
/// another process). A spurious or interrupted return is harmless: the
/// caller looks again.
fn futex(word: &AtomicU32, op: i32, val: u32, timeout: Option<Duration>) {
    let ts = timeout.map(|d| libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a live, aligned 32-bit atomic; the kernel only
    // reads it (WAIT) or uses its address as a key (WAKE).
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            ts_ptr,
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}
