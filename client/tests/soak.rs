//! Soak: four daemons, sixteen gRPC clients mixing every op with random
//! sizes for about a minute, rank 3 SIGKILLed and restarted twice, one
//! client that stalls a GetStream and one that drops its streams mid-way.
//! Each client owns a slice of every rank's windows and keeps a model of
//! it; at the end every slice matches its model, no daemon log shows a
//! panic, and every daemon's memory stayed within its windows, its buffer
//! budget and 64 MiB.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pld_client::{Client, ClientOptions, Dtype, NotifyOp};
use pld_grpc::pld_client::PldClient;
use pld_proto::v1::GetStreamRequest;
use pld_server::TransportKind;
use pld_tests::{GrpcCluster, run};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

const RANKS: u32 = 4;
const CLIENTS: u32 = 16;
/// Each client's slice of every rank's data window.
const SLICE: u64 = 2 << 20;
/// The data window: the clients' slices, then room for the bad clients.
const DATA: u64 = SLICE * CLIENTS as u64 + (8 << 20);
/// Each client's signal cells (4 of them).
const CELLS: u64 = 16;
const VICTIM: u32 = 3;
const BUDGET: u64 = 64 << 20;
/// How much a rank that kept running may grow under the same load after
/// its first 12 s.
const LEAK_BOUND: u64 = 24 << 20;

/// Deterministic pseudo-random numbers.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// What the orchestrator says: run, and whether the victim is up.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Phase {
    /// Bumped at every kill and restart; a client that sees a new one
    /// reconciles its model before going on.
    generation: u32,
    victim_up: bool,
    done: bool,
}

/// A client's model of its slices: data and signal cells, per rank.
struct Model {
    data: Vec<Vec<u8>>,
    cells: Vec<[i32; 4]>,
}

async fn connect(addr: &str) -> Client {
    Client::connect_with(
        addr,
        ClientOptions {
            wait_ready: Duration::from_secs(60),
            ..ClientOptions::default()
        },
    )
    .await
    .unwrap_or_else(|e| panic!("connect {addr}: {e}"))
}

/// Reads client `id`'s slice and cells of rank `r`.
async fn read_slice(c: &Client, id: u32, r: u32) -> (Vec<u8>, [i32; 4]) {
    let (data, signal) = (c.window("data").unwrap(), c.window("signal").unwrap());
    let bytes = c
        .get(r, data, id as u64 * SLICE, SLICE)
        .await
        .unwrap()
        .to_vec();
    let raw = c.get(r, signal, id as u64 * CELLS, 16).await.unwrap();
    let mut cells = [0i32; 4];
    for (k, v) in cells.iter_mut().enumerate() {
        *v = i32::from_le_bytes(raw[4 * k..4 * k + 4].try_into().unwrap());
    }
    (bytes, cells)
}

/// One client: random ops on its own slices of every rank, one at a time,
/// checking each get and each atomic's previous value against its model.
/// An op that involves rank 3 while it dies or is down may fail, and what
/// it did is then unknown: the client reads that slice back into its model
/// once rank 3 is up again (it is the slice's only writer).
async fn client(
    id: u32,
    addrs: Arc<Vec<String>>,
    mut phase: watch::Receiver<Phase>,
) -> (u32, u64, Model) {
    let home = id % RANKS;
    let base = id as u64 * SLICE;
    let mut rng = Rng(0x9e37_79b9 ^ (id as u64 + 1).wrapping_mul(0x1234_5678_9abc));
    let mut model = Model {
        data: (0..RANKS).map(|_| vec![0u8; SLICE as usize]).collect(),
        cells: (0..RANKS).map(|_| [0i32; 4]).collect(),
    };
    let mut unknown = vec![false; RANKS as usize];
    let mut cl = Some(connect(&addrs[home as usize]).await);
    let mut seen = *phase.borrow();
    let mut ops = 0u64;
    loop {
        let now = *phase.borrow_and_update();
        if now.done {
            break;
        }
        if now.generation != seen.generation {
            if now.victim_up {
                if home == VICTIM {
                    cl = Some(connect(&addrs[home as usize]).await);
                }
                // Rank 3 restarted (zeroed), and whatever a failed op did.
                unknown[VICTIM as usize] = true;
                let c = cl.as_ref().expect("connected");
                for r in 0..RANKS {
                    if std::mem::take(&mut unknown[r as usize]) {
                        let (bytes, cells) = read_slice(c, id, r).await;
                        model.data[r as usize] = bytes;
                        model.cells[r as usize] = cells;
                    }
                }
            } else if home == VICTIM {
                cl = None;
            }
            seen = now;
        }
        let Some(c) = cl.as_ref() else {
            // This client's daemon is down: wait for the next phase.
            let _ = phase.changed().await;
            continue;
        };
        let (data, signal) = (c.window("data").unwrap(), c.window("signal").unwrap());
        let target = rng.below(RANKS as u64) as u32;
        let t = target as usize;
        let kind = rng.below(10);
        // Small unary ones mostly; now and then one over the message limit,
        // which streams.
        let len = match rng.below(20) {
            0 => 256 * 1024 + rng.below(1 << 20) as usize,
            1..=4 => 1 + rng.below(64 * 1024) as usize,
            _ => 1 + rng.below(512) as usize,
        };
        let off = rng.below(SLICE - len as u64 - 8) / 8 * 8;
        let at = base + off;
        let check = !unknown[t];
        let m = &mut model.data[t];
        let result: Result<(), pld_client::Error> = async {
            match kind {
                0..=3 => {
                    let bytes = rng.bytes(len);
                    c.put(target, data, at, &bytes).await?;
                    m[off as usize..off as usize + len].copy_from_slice(&bytes);
                }
                4..=5 => {
                    let got = c.get(target, data, at, len as u64).await?;
                    assert!(
                        !check || got[..] == m[off as usize..off as usize + len],
                        "client {id}: get {len} B at {at} of rank {target} differs from the model"
                    );
                }
                6 => {
                    let n = (len / 4).max(1);
                    let adds: Vec<i32> = (0..n).map(|_| rng.next() as i32).collect();
                    let bytes: Vec<u8> = adds.iter().flat_map(|v| v.to_le_bytes()).collect();
                    c.atomic_add(target, data, at, Dtype::Int32, &bytes).await?;
                    for (i, a) in adds.iter().enumerate() {
                        let p = off as usize + 4 * i;
                        let v = i32::from_le_bytes(m[p..p + 4].try_into().unwrap());
                        m[p..p + 4].copy_from_slice(&v.wrapping_add(*a).to_le_bytes());
                    }
                }
                7 => {
                    let v = rng.below(1000) as i64;
                    let prev = c.fetch_add(target, data, at, Dtype::Int64, v).await?;
                    let p = off as usize;
                    let old = i64::from_le_bytes(m[p..p + 8].try_into().unwrap());
                    assert!(
                        !check || prev == old,
                        "client {id}: fetch_add's previous value"
                    );
                    m[p..p + 8].copy_from_slice(&prev.wrapping_add(v).to_le_bytes());
                }
                8 => {
                    let p = off as usize;
                    let expected = i64::from_le_bytes(m[p..p + 8].try_into().unwrap());
                    let desired = rng.next() as i64;
                    let prev = c
                        .compare_swap(target, data, at, Dtype::Int64, expected, desired)
                        .await?;
                    assert!(
                        !check || prev == expected,
                        "client {id}: compare_swap's previous value"
                    );
                    let new = if prev == expected { desired } else { prev };
                    m[p..p + 8].copy_from_slice(&new.to_le_bytes());
                }
                _ => {
                    let k = rng.below(4) as usize;
                    let v = rng.next() as i32;
                    let cell = id as u64 * CELLS + 4 * k as u64;
                    c.notify(target, signal, cell, v, NotifyOp::Set).await?;
                    model.cells[t][k] = v;
                }
            }
            Ok(())
        }
        .await;
        let after = *phase.borrow();
        let victim_involved = target == VICTIM || home == VICTIM;
        let troubled = victim_involved && (!now.victim_up || after.generation != now.generation);
        match result {
            Ok(()) if troubled => unknown[t] = true,
            Ok(()) => ops += 1,
            Err(_) if troubled => {
                unknown[t] = true;
                if home == VICTIM && !after.victim_up {
                    cl = None;
                }
            }
            Err(e) => panic!("client {id}: op {kind} to rank {target} failed: {e}"),
        }
    }
    // Every rank is up at the end: whatever is still unknown is read back.
    if let Some(c) = cl.as_ref() {
        for r in 0..RANKS {
            if unknown[r as usize] {
                let (bytes, cells) = read_slice(c, id, r).await;
                model.data[r as usize] = bytes;
                model.cells[r as usize] = cells;
            }
        }
    }
    (id, ops, model)
}

/// Reads every slice back and compares it with the client's model.
async fn verify(addrs: &[String], id: u32, model: &Model) {
    let c = connect(&addrs[0]).await;
    for r in 0..RANKS {
        let (bytes, cells) = read_slice(&c, id, r).await;
        assert!(
            bytes == model.data[r as usize],
            "client {id}'s slice of rank {r} differs from its model"
        );
        assert_eq!(
            cells, model.cells[r as usize],
            "client {id}: signal cells of rank {r}"
        );
    }
}

/// A client that opens a large GetStream and never reads it, and one that
/// drops a PutStream and a GetStream half-way, over and over.
async fn bad_clients(addrs: Arc<Vec<String>>, stop: watch::Receiver<Phase>) {
    let stall = async {
        let ch = tonic::transport::Channel::from_shared(format!("http://{}", addrs[0]))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut held = Vec::new();
        for _ in 0..4 {
            let s = PldClient::new(ch.clone())
                .get_stream(GetStreamRequest {
                    rank: 1,
                    window: "data".into(),
                    offset: 0,
                    len: DATA,
                    region: None,
                    chunking: None,
                })
                .await;
            held.push(s);
        }
        let mut stop = stop.clone();
        while !stop.borrow_and_update().done {
            let _ = stop.changed().await;
        }
        drop(held);
    };
    let dropper = async {
        let scratch = SLICE * CLIENTS as u64;
        let mut rng = Rng(77);
        let c = connect(&addrs[2]).await;
        let data = c.window("data").unwrap();
        while !stop.borrow().done {
            // Dropped mid-way: a transfer cancelled by its client.
            let bytes = rng.bytes(6 << 20);
            let _ = tokio::time::timeout(
                Duration::from_millis(20 + rng.below(50)),
                c.put(rng.below(3) as u32, data, scratch, &bytes),
            )
            .await;
            let _ = tokio::time::timeout(
                Duration::from_millis(20 + rng.below(50)),
                c.get(rng.below(3) as u32, data, scratch, 6 << 20),
            )
            .await;
        }
    };
    tokio::join!(stall, dropper);
}

#[test]
fn soak_sixteen_clients_every_op_a_rank_killed_twice_and_bad_clients() {
    run(Duration::from_secs(300), async {
        let data = format!("data={DATA}");
        let flags = [
            "--window",
            data.as_str(),
            "--window",
            "signal=64KiB",
            "--window",
            "collective=1MiB",
            "--grpc-max-message",
            "256KiB",
            "--grpc-buffer-budget",
            "64MiB",
            "--grpc-stall-timeout",
            "3s",
            "--op-timeout",
            "3s",
        ];
        let mut c = GrpcCluster::start(TransportKind::Tcp, RANKS as usize, &flags);
        let addrs = Arc::new(c.grpc.clone());
        let (tx, rx) = watch::channel(Phase {
            generation: 0,
            victim_up: true,
            done: false,
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| tokio::spawn(client(id, addrs.clone(), rx.clone())))
            .collect();
        let bad = tokio::spawn(bad_clients(addrs.clone(), rx.clone()));
        let t0 = Instant::now();
        let mut generation = 0;
        // Every rank's resident memory once the load has run a while: the
        // ranks never restarted must not grow much past it (a leak).
        let mut settled = Vec::new();
        for (up_for, down_for) in [(12, 5), (12, 5)] {
            tokio::time::sleep(Duration::from_secs(up_for)).await;
            if settled.is_empty() {
                settled = (0..RANKS)
                    .map(|r| c.daemon(r).memory().expect("the daemon's VmRSS"))
                    .collect();
            }
            generation += 1;
            tx.send_replace(Phase {
                generation,
                victim_up: false,
                done: false,
            });
            c.daemon(VICTIM).kill();
            tokio::time::sleep(Duration::from_secs(down_for)).await;
            c.spawn(VICTIM);
            c.daemon(VICTIM).wait_ready(Duration::from_secs(30));
            generation += 1;
            tx.send_replace(Phase {
                generation,
                victim_up: true,
                done: false,
            });
        }
        tokio::time::sleep(Duration::from_secs(12)).await;
        tx.send_replace(Phase {
            generation,
            victim_up: true,
            done: true,
        });
        let mut total = 0;
        let mut models = Vec::new();
        for j in clients {
            let (id, ops, model) = j.await.unwrap();
            assert!(ops > 50, "client {id} did only {ops} ops");
            total += ops;
            models.push((id, model));
        }
        bad.await.unwrap();
        for (id, model) in &models {
            verify(&addrs, *id, model).await;
        }
        eprintln!(
            "soak: {total} ops by {CLIENTS} clients in {:?}",
            t0.elapsed()
        );
        for r in 0..RANKS {
            let d = c.daemon(r);
            let peak = d.peak_memory().expect("the daemon's VmHWM");
            let now = d.memory().expect("the daemon's VmRSS");
            eprintln!(
                "soak: rank {r}: {} MiB resident after 12 s, {} MiB at the end, peak {} MiB",
                settled[r as usize] >> 20,
                now >> 20,
                peak >> 20
            );
            let bound = DATA + (64 << 10) + (1 << 20) + BUDGET + (64 << 20);
            assert!(
                peak < bound,
                "rank {r} peaked at {} MiB, over its windows + budget + 64 MiB ({} MiB)",
                peak >> 20,
                bound >> 20
            );
            // Past the first 12 s the load is the same: a rank that kept
            // running must hold about what it held then (the victim was
            // restarted, and starts again from nothing).
            if r != VICTIM {
                let grew = now.saturating_sub(settled[r as usize]);
                assert!(
                    grew < LEAK_BOUND,
                    "rank {r} grew by {} MiB under the same load (from {} to {} MiB): a leak",
                    grew >> 20,
                    settled[r as usize] >> 20,
                    now >> 20
                );
            }
            let log = d.kill_and_stderr_now();
            assert!(!log.contains("panicked"), "rank {r} panicked:\n{log}");
        }
    });
}
