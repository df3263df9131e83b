//! Fuzzing the peer plane's parsers with a deterministic generator: over a
//! million inputs — random bytes, and valid frames of every kind mutated by
//! bit flips, truncation, splicing and corrupted lengths — go through the
//! frame decoder (both sides of a connection, whole and byte by byte), and
//! random Hello messages through the handshake check. Nothing may panic,
//! and every frame that comes out must obey the limits.
//!
//! `PLD_FUZZ_ITERATIONS` overrides the count (CI uses the default).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use bytes::{Bytes, BytesMut};
use pld_proto::frame::{self, Decoder, MAX_HEADER_LEN, PREAMBLE};
use pld_proto::handshake;
use pld_proto::v1::{self as pb, Header, header::Body};
use prost::Message;

/// xorshift64*: deterministic, so a failure is reproducible from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn iterations() -> u64 {
    std::env::var("PLD_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// Valid frames of every kind, the seeds of the mutations.
fn seeds() -> Vec<Vec<u8>> {
    let bodies = vec![
        Body::Hello(pld_proto::v1::Hello {
            protocol_version: pld_proto::PROTOCOL_VERSION,
            cluster_id: "pld".into(),
            rank: 1,
            nranks: 4,
            windows: vec![pb::WindowSpec {
                name: "data".into(),
                size: 1 << 20,
            }],
            max_payload: 1 << 20,
            epoch: 0,
            barrier_epoch: 1,
            listen: String::new(),
            checked: false,
        }),
        Body::Put(pb::PeerPut {
            window: 0,
            offset: 64,
            region: Some(pb::Region {
                rows: 2,
                cols: 4,
                row_stride: 8,
                dtype: pb::Dtype::Fp32 as i32,
            }),
        }),
        Body::Get(pb::PeerGet {
            window: 0,
            offset: 8,
            len: 16,
            ..Default::default()
        }),
        Body::AtomicAdd(pb::PeerAtomicAdd {
            window: 0,
            offset: 0,
            dtype: pb::Dtype::Bf16 as i32,
            ..Default::default()
        }),
        Body::FetchAdd(pb::PeerFetchAdd {
            window: 0,
            offset: 8,
            dtype: pb::Dtype::Int64 as i32,
            value: -3,
        }),
        Body::CompareSwap(pb::PeerCompareSwap {
            window: 0,
            offset: 8,
            dtype: pb::Dtype::Int32 as i32,
            expected: 1,
            desired: 2,
        }),
        Body::Notify(pb::PeerNotify {
            window: 1,
            offset: 4,
            value: -1,
            op: pb::NotifyOp::AtomicAdd as i32,
        }),
        Body::Barrier(pb::BarrierSignal { epoch: 7, round: 2 }),
        Body::Ack(pb::Ack::default()),
        Body::Error(pb::ErrorReply {
            code: pb::ErrorCode::OutOfRange as i32,
            message: "no".into(),
        }),
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            let h = Header {
                id: i as u64 + 1,
                body: Some(b),
                checked: None,
            };
            frame::encode(&h, &[7u8; 32][..(i * 3) % 33]).to_vec()
        })
        .collect()
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    match rng.below(8) {
        // Random bytes.
        0 => {
            let n = rng.below(96) as usize;
            rng.bytes(n)
        }
        // Random bytes behind a plausible length prefix.
        1 => {
            let hl = rng.below(80) as u32;
            let pl = rng.below(64) as u32;
            let mut v = hl.to_le_bytes().to_vec();
            v.extend(pl.to_le_bytes());
            let n = (hl + pl) as usize;
            v.extend(rng.bytes(n));
            v
        }
        // Huge lengths.
        2 => {
            let mut v = seeds[rng.below(seeds.len() as u64) as usize].clone();
            let at = if rng.below(2) == 0 { 0 } else { 4 };
            let big = [u32::MAX, (MAX_HEADER_LEN + 1) as u32, 1 << 30, 1 << 20 | 1]
                [rng.below(4) as usize];
            v[at..at + 4].copy_from_slice(&big.to_le_bytes());
            v
        }
        // Several frames spliced, some cut short.
        3 => {
            let mut v = Vec::new();
            for _ in 0..1 + rng.below(3) {
                let s = &seeds[rng.below(seeds.len() as u64) as usize];
                let cut = 1 + rng.below(s.len() as u64) as usize;
                v.extend_from_slice(&s[..cut]);
            }
            v
        }
        // Bit flips and byte overwrites in a valid frame.
        _ => {
            let mut v = seeds[rng.below(seeds.len() as u64) as usize].clone();
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(v.len() as u64) as usize;
                if rng.below(2) == 0 {
                    v[i] ^= 1 << rng.below(8);
                } else {
                    v[i] = rng.next() as u8;
                }
            }
            if rng.below(4) == 0 {
                let keep = rng.below(v.len() as u64 + 1) as usize;
                v.truncate(keep);
            }
            v
        }
    }
}

/// Decodes everything in `input`, fed in pieces of `step` bytes; checks the
/// limits on every frame that comes out. Returns how many frames decoded.
fn decode_all(mut d: Decoder, input: &[u8], step: usize) -> usize {
    let max = d.max_payload();
    let mut buf = BytesMut::new();
    let mut frames = 0;
    for piece in input.chunks(step.max(1)) {
        buf.extend_from_slice(piece);
        loop {
            match d.decode(&mut buf) {
                Ok(Some(f)) => {
                    assert!(f.payload.len() <= max, "payload over the limit");
                    let _ = f.kind();
                    frames += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    // Every error has a code and a message.
                    let _ = (e.code(), e.to_string());
                    return frames;
                }
            }
        }
        // The decoder never reserves more than one frame's worth.
        assert!(buf.capacity() <= 8 + MAX_HEADER_LEN + max + input.len() + 64);
    }
    frames
}

#[test]
fn a_million_mutated_frames_never_panic_the_decoder() {
    let seeds = seeds();
    // Every seed decodes as it is.
    for s in &seeds {
        assert_eq!(decode_all(Decoder::new(1 << 20), s, s.len()), 1);
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let (mut inputs, mut decoded) = (0u64, 0usize);
    let n = iterations();
    while inputs < n {
        let input = mutate(&mut rng, &seeds);
        let max = [64usize, 1 << 10, 1 << 20][rng.below(3) as usize];
        decoded += decode_all(Decoder::new(max), &input, input.len());
        // The accepting side: preamble first, fed a byte at a time now and then.
        let mut with_preamble = PREAMBLE.to_vec();
        with_preamble.extend_from_slice(&input);
        if rng.below(16) == 0 {
            let _ = with_preamble
                .get_mut(rng.below(4) as usize)
                .map(|b| *b ^= 1);
        }
        let step = if rng.below(8) == 0 {
            1
        } else {
            with_preamble.len()
        };
        decoded += decode_all(Decoder::expecting_preamble(max), &with_preamble, step);
        inputs += 2;
    }
    // The mutations are not all rejected: the fuzzer reaches past the prefix.
    assert!(
        decoded as u64 > n / 20,
        "only {decoded} of {n} inputs decoded to a frame"
    );
}

#[test]
fn random_hellos_never_panic_the_handshake_check() {
    let local = pld_proto::v1::Hello {
        protocol_version: pld_proto::PROTOCOL_VERSION,
        cluster_id: "pld".into(),
        rank: 0,
        nranks: 4,
        windows: vec![
            pb::WindowSpec {
                name: "data".into(),
                size: 1 << 20,
            },
            pb::WindowSpec {
                name: "signal".into(),
                size: 64 << 10,
            },
        ],
        max_payload: 1 << 20,
        epoch: 0,
        barrier_epoch: 1,
        listen: String::new(),
        checked: false,
    };
    let valid = local.encode_to_vec();
    let mut rng = Rng(42);
    let (mut accepted, n) = (0, iterations() / 4);
    for i in 0..n {
        let mut bytes = if i % 2 == 0 {
            let len = rng.below(64) as usize;
            rng.bytes(len)
        } else {
            valid.clone()
        };
        for _ in 0..rng.below(3) {
            if !bytes.is_empty() {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = rng.next() as u8;
            }
        }
        let Ok(mut remote) = pld_proto::v1::Hello::decode(Bytes::from(bytes)) else {
            continue;
        };
        if i % 3 == 0 {
            remote.rank = 1;
        }
        let expected = [None, Some(1), Some(u32::MAX)][(i % 3) as usize];
        match handshake::check(&local, &remote, expected) {
            Ok(()) => accepted += 1,
            // A refusal names the mismatch.
            Err(m) => assert!(!m.to_string().is_empty()),
        }
    }
    assert!(accepted > 0, "the valid hello is accepted");
}

/// Structurally valid Hellos whose every field is drawn from its edges
/// (0, 1, the cluster's values, just past them, the type's maximum), in
/// every combination the generator reaches, through the accepting side's
/// judgement: nothing panics, no claim outside the cluster is believed,
/// and only a certificate that names the claimed rank lets a mismatch
/// count against that rank.
#[test]
fn out_of_range_hellos_never_panic_admission_nor_blame_an_unproven_rank() {
    use pld_proto::handshake::{Proof, Verdict};
    let local = pld_proto::v1::Hello {
        protocol_version: pld_proto::PROTOCOL_VERSION,
        cluster_id: "pld".into(),
        rank: 0,
        nranks: 4,
        windows: vec![
            pb::WindowSpec {
                name: "data".into(),
                size: 1 << 20,
            },
            pb::WindowSpec {
                name: "signal".into(),
                size: 64 << 10,
            },
        ],
        max_payload: 1 << 20,
        epoch: 7,
        barrier_epoch: 1,
        listen: String::new(),
        checked: false,
    };
    let mut rng = Rng(7);
    let u32s = [0, 1, 2, 3, 4, 5, 99, u32::MAX - 1, u32::MAX];
    let u64s = [0, 1, 64 << 10, 1 << 20, (1 << 20) + 1, u64::MAX];
    let names = ["data", "signal", "", "a", "zzz", "data\0"];
    let clusters = ["pld", "evil", "", "pld "];
    let proofs = [Proof::Names, Proof::Other, Proof::Unauthenticated];
    let (mut accepted, mut blamed, n) = (0, 0, iterations() / 4);
    for _ in 0..n {
        let pick32 = |rng: &mut Rng| u32s[rng.below(u32s.len() as u64) as usize];
        let pick64 = |rng: &mut Rng| u64s[rng.below(u64s.len() as u64) as usize];
        let windows = (0..rng.below(4))
            .map(|_| pb::WindowSpec {
                name: names[rng.below(names.len() as u64) as usize].into(),
                size: pick64(&mut rng),
            })
            .collect();
        let mut remote = pld_proto::v1::Hello {
            protocol_version: [pld_proto::PROTOCOL_VERSION, pick32(&mut rng)]
                [rng.below(2) as usize],
            cluster_id: clusters[rng.below(clusters.len() as u64) as usize].into(),
            rank: pick32(&mut rng),
            nranks: [4, pick32(&mut rng)][rng.below(2) as usize],
            windows,
            max_payload: pick64(&mut rng),
            epoch: pick64(&mut rng),
            barrier_epoch: pick64(&mut rng),
            listen: String::new(),
            checked: false,
        };
        if rng.below(4) == 0 {
            remote.windows = local.windows.clone();
        }
        let proof = proofs[rng.below(3) as usize];
        match handshake::admit(&local, &remote, |_| proof) {
            Verdict::Accept => {
                accepted += 1;
                assert!(remote.rank < local.nranks && remote.rank != local.rank);
                assert_ne!(proof, Proof::Other);
                assert_eq!(handshake::check(&local, &remote, None), Ok(()));
            }
            Verdict::Misconfigured { rank, mismatch } => {
                blamed += 1;
                assert_eq!(proof, Proof::Names, "an unproven claim was believed");
                assert!(rank < local.nranks && rank == remote.rank);
                assert!(!mismatch.to_string().is_empty());
            }
            Verdict::Stranger(why) => assert!(!why.to_string().is_empty()),
        }
    }
    assert!(accepted > 0, "some generated hellos are valid");
    assert!(blamed > 0, "some proven ranks are misconfigured");
}
