//! Shared memory between the PEs of one host. When every PE of the job
//! runs on this host (and `--checked` is off), each PE maps every other
//! PE's heap — a memory file, opened through `/proc/PID/fd` — and, where
//! that PE moved its data segment's whole pages into a memory file of
//! their own (`segment::share`), its static and global data too; a put,
//! get or atomic there is a copy or a CPU atomic in that mapping, not a
//! message: what every OpenSHMEM does within a node. Jobs across hosts
//! still go over pld's links.
//!
//! All or nothing, for now: the job uses shared memory only if every PE
//! maps every PE's heap. The rank's integer atomics are the hardware's
//! (`pld_server::window::atomic`), the same instructions these mappings
//! use, so an atomic served by the rank and one applied here agree on a
//! cell; choosing the path per peer is the rank engine's next step.

mod control;
mod ops;

pub(crate) use ops::Amo;

use crate::layout::CONTROL;
use control::{Control, IDENTITY_BYTES, VERDICT_DATA, VERDICT_FAR, VERDICT_NEAR};
use pld_server::{Progress, Rank, WindowId};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;

/// Every PE's heap, mapped here, and the data segments that could be.
pub(crate) struct Near {
    heap: WindowId,
    size: u64,
    /// Per PE, the address of its heap in this process (this PE's own
    /// heap at its own index).
    bases: Vec<usize>,
    /// The data segments' shared pages, where this PE shares its own.
    data: Option<Data>,
    /// How a wait looks before it sleeps.
    progress: Progress,
    /// The heap's memory file, kept open for the job's life.
    _file: OwnedFd,
}

/// The data segments' shared pages.
struct Data {
    window: WindowId,
    /// Where in the window the shared pages start (the same on every PE:
    /// they run one program).
    head: u64,
    len: u64,
    /// Per PE, the address of its shared pages here; 0 where that PE's
    /// data segment is reached over the link.
    bases: Vec<usize>,
    /// The data segment's memory file, kept open for the job's life.
    _file: OwnedFd,
}

/// This PE's data segment as `setup` takes it: its window and shared pages.
pub(crate) struct OwnData {
    /// The data window.
    pub window: WindowId,
    /// Its address in this process.
    pub base: usize,
    /// The pages `segment::share` moved into a memory file.
    pub shared: crate::segment::SharedData,
}

impl Near {
    /// Where `len` bytes at `off` of `win` on `peer` are in this process,
    /// if `win` is the heap (which the caller has checked holds them).
    pub(crate) fn at(&self, peer: u32, win: WindowId, off: u64, len: u64) -> Option<*mut u8> {
        if win == self.heap {
            if off.checked_add(len)? > self.size {
                return None;
            }
            let base = *self.bases.get(peer as usize)?;
            return Some((base + off as usize) as *mut u8);
        }
        let d = self.data.as_ref().filter(|d| d.window == win)?;
        let rel = off.checked_sub(d.head)?;
        if rel.checked_add(len)? > d.len {
            return None;
        }
        let base = *d.bases.get(peer as usize).filter(|b| **b != 0)?;
        Some((base + rel as usize) as *mut u8)
    }

    /// Whether this host's PEs outnumber its cores and spin: a waiter
    /// then runs only when another PE gives up its core.
    pub(crate) fn oversubscribed(&self) -> bool {
        matches!(
            self.progress,
            Progress::Spin {
                oversubscribed: true,
                ..
            }
        )
    }

    /// Wakes `peer` if it sleeps in a wait: after every write into its heap.
    pub(crate) fn ring(&self, peer: u32) {
        if let Some(base) = self.bases.get(peer as usize) {
            self.control(*base).ring();
        }
    }

    fn control(&self, base: usize) -> &Control {
        // SAFETY: every base is a heap mapping of `size` > CONTROL + 128
        // bytes, page aligned, that lives as long as the process; the
        // control block's bytes are the library's own.
        unsafe { Control::at(base + CONTROL as usize) }
    }

    fn mine(&self, me: u32) -> &Control {
        self.control(self.bases[me as usize])
    }
}

/// Decides, with every other PE, whether the job uses shared memory, and
/// maps their heaps if so. Collective: two of the rank's barriers.
/// `file` is this PE's heap file (none: it does not take part).
pub(crate) async fn setup(
    rank: &Rank,
    heap: WindowId,
    base: usize,
    size: u64,
    file: Option<OwnedFd>,
    data: Option<OwnData>,
    progress: Progress,
) -> pld_server::Result<Option<Near>> {
    let (me, n) = (rank.rank(), rank.nranks());
    let usable = size > CONTROL + std::mem::size_of::<Control>() as u64;
    let file = file.filter(|_| usable);
    // SAFETY: the heap is `size` bytes at `base`, page aligned; CONTROL
    // is inside the reserved bytes no allocation hands out.
    let own = usable.then(|| unsafe { Control::at(base + CONTROL as usize) });
    if let (Some(c), Some(f)) = (own, &file) {
        c.nonce.store(nonce(), Ordering::Release);
        c.pid.store(std::process::id(), Ordering::Release);
        c.fd.store(f.as_raw_fd(), Ordering::Release);
        c.data_fd.store(-1, Ordering::Release);
        if let Some(d) = &data {
            c.data_len.store(d.shared.len, Ordering::Release);
            c.data_ino.store(d.shared.ino, Ordering::Release);
            c.data_head.store(d.shared.head, Ordering::Release);
            c.data_fd
                .store(d.shared.file.as_raw_fd(), Ordering::Release);
        }
    }
    if n > 1 {
        rank.barrier().await?;
    }
    let mut bases = vec![0usize; n as usize];
    bases[me as usize] = base;
    let mut near = file.is_some();
    for peer in (0..n).filter(|p| *p != me) {
        if !near {
            break;
        }
        let id = rank.get(peer, heap, CONTROL, IDENTITY_BYTES).await?;
        match map_peer(&id, size) {
            Some(at) => bases[peer as usize] = at,
            None => near = false,
        }
    }
    // The data segments, where every heap is mapped: each PE named its
    // file in its control block before the barrier above.
    let data = data.filter(|_| near).map(|d| map_data(me, &bases, d));
    let data_everywhere = data
        .as_ref()
        .is_some_and(|d| d.bases.iter().all(|b| *b != 0));
    if let Some(c) = own {
        let verdict = match (near, data_everywhere) {
            (true, true) => VERDICT_NEAR | VERDICT_DATA,
            (true, false) => VERDICT_NEAR,
            _ => VERDICT_FAR,
        };
        c.verdict.store(verdict, Ordering::Release);
    }
    if n > 1 {
        rank.barrier().await?;
    }
    // Every PE's verdict, read in its own heap: one that could not map
    // them all says so, and then none uses shared memory — for the heaps,
    // and for the data segments alike, so that every PE takes the same
    // path for a collective over either.
    let verdicts = |bit: u32| {
        near && bases.iter().all(|b| {
            // SAFETY: as above, for each mapped heap.
            let c = unsafe { Control::at(b + CONTROL as usize) };
            c.verdict.load(Ordering::Acquire) & bit != 0
        })
    };
    let all = verdicts(VERDICT_NEAR);
    let data = match data {
        Some(d) if all && verdicts(VERDICT_DATA) => Some(d),
        Some(d) => {
            d.unmap(me);
            None
        }
        None => None,
    };
    let (Some(file), true) = (file, all) else {
        for (peer, b) in bases.iter().enumerate() {
            if peer as u32 != me && *b != 0 {
                // SAFETY: a mapping of `size` bytes this function made and
                // nothing else refers to.
                unsafe { libc::munmap(*b as *mut libc::c_void, size as usize) };
            }
        }
        return Ok(None);
    };
    let doorbell = base + CONTROL as usize;
    // A write that comes over the network (to the data segment) wakes a
    // wait asleep on the doorbell too.
    rank.on_window_change(Box::new(move || {
        // SAFETY: this PE's own control block, in its heap, which lives as
        // long as the process.
        unsafe { Control::at(doorbell) }.ring()
    }));
    Ok(Some(Near {
        heap,
        size,
        bases,
        data,
        progress,
        _file: file,
    }))
}

impl Data {
    /// Unmaps the peers' pages this PE mapped.
    fn unmap(self, me: u32) {
        for (peer, b) in self.bases.iter().enumerate() {
            if peer as u32 != me && *b != 0 {
                // SAFETY: a mapping of `len` bytes `map_data` made and
                // nothing else refers to.
                unsafe { libc::munmap(*b as *mut libc::c_void, self.len as usize) };
            }
        }
    }
}

/// Maps the shared pages of every peer's data segment that it shared, as
/// its control block (in its mapped heap) names them; 0 for a peer whose
/// pages cannot be mapped here.
fn map_data(me: u32, heaps: &[usize], own: OwnData) -> Data {
    let mut bases = vec![0usize; heaps.len()];
    bases[me as usize] = own.base + own.shared.head as usize;
    for (peer, heap) in heaps.iter().enumerate().filter(|(p, _)| *p as u32 != me) {
        // SAFETY: every heap in `heaps` is mapped, page aligned, with its
        // control block at CONTROL, filled in before the first barrier.
        let c = unsafe { Control::at(heap + CONTROL as usize) };
        let fd = c.data_fd.load(Ordering::Acquire);
        let same = c.data_len.load(Ordering::Acquire) == own.shared.len
            && c.data_head.load(Ordering::Acquire) == own.shared.head;
        if fd < 0 || !same {
            continue;
        }
        let pid = c.pid.load(Ordering::Acquire);
        let ino = c.data_ino.load(Ordering::Acquire);
        if let Some(at) = map_file(pid, fd, own.shared.len, Some(ino)) {
            bases[peer] = at;
        }
    }
    Data {
        window: own.window,
        head: own.shared.head,
        len: own.shared.len,
        bases,
        _file: own.shared.file,
    }
}

/// Maps the heap a peer's identity (nonce, pid, fd) names, if it is on this
/// host: the file opens and holds the same nonce.
fn map_peer(id: &[u8], size: u64) -> Option<usize> {
    let nonce = u64::from_le_bytes(id.get(0..8)?.try_into().ok()?);
    let pid = u32::from_le_bytes(id.get(8..12)?.try_into().ok()?);
    let fd = i32::from_le_bytes(id.get(12..16)?.try_into().ok()?);
    if nonce == 0 {
        return None;
    }
    let at = map_file(pid, fd, size, None)?;
    // SAFETY: the mapping is `size` bytes, page aligned.
    let c = unsafe { Control::at(at + CONTROL as usize) };
    if c.nonce.load(Ordering::Acquire) != nonce {
        // SAFETY: the mapping just made; nothing refers to it.
        unsafe { libc::munmap(at as *mut libc::c_void, size as usize) };
        return None;
    }
    Some(at)
}

/// Maps the `size`-byte memory file `fd` of process `pid`, opened through
/// `/proc`, shared, where it is that size (and, given `ino`, that inode:
/// the file the peer named, not one a reused descriptor or pid names).
fn map_file(pid: u32, fd: i32, size: u64, ino: Option<u64>) -> Option<usize> {
    use std::os::unix::fs::MetadataExt;
    let path = format!("/proc/{pid}/fd/{fd}");
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if meta.len() != size || ino.is_some_and(|i| i != meta.ino()) {
        return None;
    }
    // SAFETY: a shared mapping of the whole file, at an address the kernel
    // picks; the file stays mapped after `file` closes.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size as usize,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

/// A random 64-bit number, never 0.
fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish().max(1)
}
