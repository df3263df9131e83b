//! Starting a PE: its settings, its heap and data segment lent to an
//! embedded rank, the runtime that serves the rank's peers, and the
//! mapped heaps of the PEs of this host.

use super::Pe;
use crate::addr::{Space, Spaces};
use crate::env::{Auth, Settings};
use crate::heap::Heap;
use crate::layout::{DATA_WINDOW, HEAP_WINDOW, RESERVED};
use pld_server::{Config, ForeignMemory, Rank, Security};
use std::ptr::NonNull;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

pub(crate) fn start() -> anyhow::Result<Pe> {
    let s = Settings::from(|k| std::env::var(k).ok())?;
    let security = match &s.auth {
        Auth::Tls(dir) => Security::from_dir(dir, s.rank)?,
        Auth::Insecure => Security::Insecure,
    };
    let mut config = Config::new(s.rank, s.peers.clone());
    config.transport = s.transport;
    // The heap is memory this process maps, aligned to HEAP_ALIGN, so that
    // an offset aligned for `shmem_align` is an aligned address on every PE.
    // Shared (a memory file the other PEs of this host may map) unless
    // the race detector must see every op, or the user said no.
    let share = s.shared_memory && s.checked == pld_server::CheckedMode::Off;
    let (heap, heap_file) = crate::heap::map(s.heap_size, share)?;
    // SAFETY: the mapping lives as long as the process (it is never
    // unmapped) and is HEAP_ALIGN-aligned; it is symmetric memory.
    let heap_memory = unsafe { ForeignMemory::new(HEAP_WINDOW, heap, s.heap_size)? };
    config.windows = Vec::new();
    config.lent.push(Arc::new(heap_memory));
    config.security = security;
    config.sync_timeout = s.sync_timeout;
    config.connect_timeout = s.connect_timeout;
    config.op_timeout = s.op_timeout;
    config.checked = s.checked;
    config.trace = s.trace.is_some();
    config.progress = s.progress;
    config.cluster_id = s.cluster_id.clone();
    let shared = config.ranks_here();
    let data = crate::segment::data_segment();
    let load_base = data.as_ref().map_or(0, |(_, b)| *b);
    let data = data.map(|(d, _)| d);
    if let Some(d) = &data {
        let ptr =
            NonNull::new(d.start as *mut u8).ok_or_else(|| anyhow::anyhow!("null data segment"))?;
        // SAFETY: the main program's writable segment lives as long as the
        // process, and `data_segment` aligns it to 8 bytes; OpenSHMEM
        // makes it symmetric memory, which peers may write at any time.
        let memory = unsafe { ForeignMemory::new(DATA_WINDOW, ptr, d.len() as u64)? };
        config.lent.push(Arc::new(memory));
    }
    // The data segment's whole pages into a memory file too, where the
    // heaps may be shared (every PE on this host): now, while this is the
    // only thread (the runtime's start below).
    let all_here = shared.len() > 1 && shared.len() == config.peers.len();
    let shared_data = match (&data, &heap_file) {
        (Some(d), Some(_)) if all_here => crate::segment::share(d)
            .inspect_err(|why| {
                tracing::debug!(%why, "the data segment stays private: reached over the links")
            })
            .ok(),
        _ => None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("pld-shmem")
        .enable_all()
        .build()?;
    let rank = rt.block_on(Rank::start(config))?;
    let heap_id = rank.window(HEAP_WINDOW)?;
    let heap_base = rank.local(heap_id)?.base() as usize;
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if s.bind_to_core {
        let here = shared.iter().position(|r| *r == s.rank).unwrap_or(0);
        if let Err(e) = crate::bind::to_core(here) {
            tracing::warn!(error = %e, "PLD_BIND=core: the program's thread stays unbound");
        }
    }
    let progress = s.progress.on_host(shared.len(), cores);
    let own_data = match (&data, shared_data) {
        (Some(d), Some(shared)) => Some(crate::near::OwnData {
            window: rank.window(DATA_WINDOW)?,
            base: d.start,
            shared,
        }),
        _ => None,
    };
    let near = rt.block_on(crate::near::setup(
        &rank,
        heap_id,
        heap_base,
        s.heap_size,
        heap_file,
        own_data,
        progress,
    ))?;
    let mut list = vec![Space {
        window: heap_id,
        base: heap_base,
        len: s.heap_size,
        what: "symmetric heap",
        reserved: RESERVED,
    }];
    if let Some(d) = data {
        list.push(Space {
            window: rank.window(DATA_WINDOW)?,
            base: d.start,
            len: d.len() as u64,
            what: "data segment",
            reserved: 0,
        });
    }
    Ok(Pe {
        rt,
        rank,
        spaces: Spaces { list },
        heap: Mutex::new(Heap::new(RESERVED, s.heap_size)),
        deferred: Mutex::new(Vec::new()),
        sync_timeout: s.sync_timeout,
        checked: s.checked != pld_server::CheckedMode::Off,
        control: s.control,
        trace: s.trace.clone(),
        finalized: AtomicBool::new(false),
        shared,
        near,
        load_base,
        symbols: OnceLock::new(),
    })
}
