//! `crypto_floor`: what one core can encrypt and decrypt with the cipher
//! suite the TCP peer plane's mutual TLS negotiates (TLS 1.3 AES-256-GCM,
//! ring's first choice; AES-128-GCM next to it as `_aes128`), measured in
//! the same run as the transfers it bounds. ring's AEAD seals and opens
//! 16 KiB records — TLS's largest — in place, as rustls does, with nothing
//! else around them: TLS bulk bandwidth cannot exceed this.

use ring::aead::{AES_128_GCM, AES_256_GCM, Aad, Algorithm, LessSafeKey, Nonce, UnboundKey};
use std::time::{Duration, Instant};

/// TLS's largest record payload.
pub const RECORD: usize = 16 * 1024;

/// Seal and open throughput (MB/s) of one core, each measured for `time`.
pub fn floor(alg: &'static Algorithm, time: Duration) -> anyhow::Result<(f64, f64)> {
    let key = LessSafeKey::new(
        UnboundKey::new(alg, &vec![7u8; alg.key_len()])
            .map_err(|_| anyhow::anyhow!("ring refused a key"))?,
    );
    let nonce = |n: u64| {
        let mut b = [0u8; 12];
        b[4..].copy_from_slice(&n.to_be_bytes());
        Nonce::assume_unique_for_key(b)
    };
    let mut record = vec![0x5au8; RECORD];
    // Seal: as many records as fit in `time`.
    let (mut n, t0) = (0u64, Instant::now());
    let mut tags = Vec::new();
    while t0.elapsed() < time {
        let tag = key
            .seal_in_place_separate_tag(nonce(n), Aad::empty(), &mut record)
            .map_err(|_| anyhow::anyhow!("seal failed"))?;
        if tags.len() < 64 {
            tags.push(tag);
        }
        n += 1;
    }
    let seal = (n as usize * RECORD) as f64 / t0.elapsed().as_secs_f64() / 1e6;
    // Open: a sealed record (with its tag) opened again and again; each
    // open authenticates the whole record before it decrypts it. Only the
    // opens are timed: the copy that restores the sealed bytes before each
    // is not the cipher's (and on this VM a 16 KiB copy between two such
    // buffers cost more than the open itself).
    let mut sealed = vec![0x5au8; RECORD];
    let tag = key
        .seal_in_place_separate_tag(nonce(u64::MAX), Aad::empty(), &mut sealed)
        .map_err(|_| anyhow::anyhow!("seal failed"))?;
    sealed.extend_from_slice(tag.as_ref());
    let (mut m, mut opening, t0) = (0u64, Duration::ZERO, Instant::now());
    let mut work = sealed.clone();
    while t0.elapsed() < time {
        work.copy_from_slice(&sealed);
        let t = Instant::now();
        key.open_in_place(nonce(u64::MAX), Aad::empty(), &mut work)
            .map_err(|_| anyhow::anyhow!("open failed"))?;
        opening += t.elapsed();
        m += 1;
    }
    let open = (m as usize * RECORD) as f64 / opening.as_secs_f64() / 1e6;
    Ok((seal, open))
}

/// The suites measured: the one negotiated first, and the other AES-GCM.
pub const SUITES: [(&str, &Algorithm); 2] = [("", &AES_256_GCM), ("_aes128", &AES_128_GCM)];
