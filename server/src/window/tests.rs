use super::*;
use half::{bf16, f16};
use pld_proto::NotifyOp;
use pld_proto::dtype::{from_bytes, to_bytes};
use std::sync::Arc;

fn win(size: u64) -> Window {
    Window::new("data", size).unwrap()
}

#[test]
fn a_new_window_is_zero() {
    let w = win(1 << 20);
    assert!(w.read(0, 1 << 20).unwrap().iter().all(|b| *b == 0));
}

#[test]
fn out_of_bounds_and_overflowing_ranges_are_refused() {
    let w = win(64);
    assert!(w.write(60, &[1; 4]).is_ok());
    let e = w.write(61, &[1; 4]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "4 bytes at offset 61 do not fit in window 'data' of 64 bytes"
    );
    assert!(
        w.check_range(u64::MAX, 2).is_err(),
        "offset + len overflow is out of bounds"
    );
    assert!(w.read(64, 1).is_err());
    assert!(
        w.read(64, 0).is_ok(),
        "an empty read at the end is in bounds"
    );
}

#[test]
fn element_ops_need_aligned_offsets_and_lengths() {
    let w = win(64);
    let e = w.atomic_add(2, Dtype::Int32, &[0; 4]).unwrap_err();
    assert!(
        matches!(
            e,
            AccessError::MisalignedOffset {
                offset: 2,
                size: 4,
                ..
            }
        ),
        "{e}"
    );
    let e = w.atomic_add(0, Dtype::Int32, &[0; 6]).unwrap_err();
    assert!(
        matches!(e, AccessError::MisalignedLength { len: 6, .. }),
        "{e}"
    );
    let e = w.fetch_add(0, Dtype::Fp32, 1).unwrap_err();
    assert_eq!(
        e.to_string(),
        "fetch_add does not support dtype fp32; it takes int32 or int64"
    );
    let e = w.compare_swap(0, Dtype::Int32, 1 << 40, 0).unwrap_err();
    assert!(matches!(e, AccessError::ValueOutOfRange { .. }), "{e}");
    assert!(
        w.read(0, 64).unwrap().iter().all(|b| *b == 0),
        "refused ops change nothing"
    );
}

fn add_twice<T: pld_proto::Element>(a: &[T], b: &[T]) -> Vec<T> {
    let w = win((a.len() * T::DTYPE.size()).max(64) as u64);
    w.write(0, &to_bytes(a)).unwrap();
    w.atomic_add(0, T::DTYPE, &to_bytes(b)).unwrap();
    from_bytes(&w.read(0, (a.len() * T::DTYPE.size()) as u64).unwrap())
}

#[test]
fn integer_adds_wrap_like_the_hardware() {
    assert_eq!(add_twice(&[i8::MAX, -3], &[1, 2]), vec![i8::MIN, -1]);
    assert_eq!(add_twice(&[i16::MAX, 7], &[1, -8]), vec![i16::MIN, -1]);
    assert_eq!(add_twice(&[i32::MAX, 7], &[1, -8]), vec![i32::MIN, -1]);
    assert_eq!(add_twice(&[i64::MAX, 7], &[1, -8]), vec![i64::MIN, -1]);
}

#[test]
fn float_adds_match_the_reference() {
    assert_eq!(
        add_twice(&[1.5f32, -0.25], &[2.25, 0.25]),
        vec![3.75f32, 0.0]
    );
    assert_eq!(
        add_twice(&[1e300f64, 1.0], &[1e300, 2.0]),
        vec![2e300f64, 3.0]
    );
}

/// A deterministic stream of u16 bit patterns covering normals, subnormals,
/// infinities and NaNs.
fn patterns(n: usize) -> impl Iterator<Item = u16> {
    let mut x: u32 = 0x1234_5678;
    (0..n).map(move |_| {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x as u16
    })
}

#[test]
fn fp16_and_bf16_sums_round_to_nearest_even() {
    // The reference adds exactly in f64 (every fp16/bf16 sum fits in 53 bits)
    // and rounds once.
    let a: Vec<u16> = patterns(20_000).collect();
    let b: Vec<u16> = patterns(20_001).skip(1).collect();
    let fa: Vec<f16> = a.iter().map(|x| f16::from_bits(*x)).collect();
    let fb: Vec<f16> = b.iter().map(|x| f16::from_bits(*x)).collect();
    let got = add_twice(&fa, &fb);
    for i in 0..fa.len() {
        let want = f16::from_f64(fa[i].to_f64() + fb[i].to_f64());
        assert!(
            got[i].to_bits() == want.to_bits() || (got[i].is_nan() && want.is_nan()),
            "fp16 {:?} + {:?}: got {:?}, want {:?}",
            fa[i],
            fb[i],
            got[i],
            want
        );
    }
    let ba: Vec<bf16> = a.iter().map(|x| bf16::from_bits(*x)).collect();
    let bb: Vec<bf16> = b.iter().map(|x| bf16::from_bits(*x)).collect();
    let got = add_twice(&ba, &bb);
    for i in 0..ba.len() {
        let want = bf16::from_f64(ba[i].to_f64() + bb[i].to_f64());
        assert!(
            got[i].to_bits() == want.to_bits() || (got[i].is_nan() && want.is_nan()),
            "bf16 {:?} + {:?}: got {:?}, want {:?}",
            ba[i],
            bb[i],
            got[i],
            want
        );
    }
    // The tie case by hand: 2048 + 1 is halfway between 2048 and 2050 in
    // fp16 and rounds to the even 2048; 2050 + 1 rounds up to 2052.
    let r = add_twice(
        &[f16::from_f32(2048.0), f16::from_f32(2050.0)],
        &[f16::ONE, f16::ONE],
    );
    assert_eq!(r, vec![f16::from_f32(2048.0), f16::from_f32(2052.0)]);
}

#[test]
fn concurrent_adds_from_many_threads_lose_no_update() {
    let w = Arc::new(win(4096));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let w = w.clone();
            std::thread::spawn(move || {
                for _ in 0..20_000 {
                    w.atomic_add(0, Dtype::Int32, &to_bytes(&[1i32; 16]))
                        .unwrap();
                    w.atomic_add(64, Dtype::Fp32, &to_bytes(&[1f32; 4]))
                        .unwrap();
                    w.atomic_add(128, Dtype::Fp16, &to_bytes(&[f16::ONE]))
                        .unwrap();
                    w.fetch_add(256, Dtype::Int64, 3).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        from_bytes::<i32>(&w.read(0, 64).unwrap()),
        vec![160_000; 16]
    );
    assert_eq!(
        from_bytes::<f32>(&w.read(64, 16).unwrap()),
        vec![160_000.0; 4]
    );
    // fp16 saturates its integer range at 2048 (2048 + 1 rounds back to 2048).
    assert_eq!(
        from_bytes::<f16>(&w.read(128, 2).unwrap()),
        vec![f16::from_f32(2048.0)]
    );
    assert_eq!(from_bytes::<i64>(&w.read(256, 8).unwrap()), vec![480_000]);
}

/// What a peer that maps the window does (pld-shmem's PEs of one host): a
/// CPU atomic on the cell's address, while the rank serves elementwise
/// adds, fetch_adds and bitwise ops of the same cells. Every integer
/// atomic is the hardware's, so none is lost — a plain load and store
/// under a lock only the rank takes would lose some.
#[test]
fn integer_atomics_agree_with_cpu_atomics_through_the_address() {
    use std::sync::atomic::{AtomicI32, AtomicI64, Ordering::AcqRel};
    const ROUNDS: i64 = 1_000_000;
    let w = Arc::new(win(4096));
    let base = w.base() as usize;
    // Both start at once, so that their adds overlap.
    let start = Arc::new(std::sync::Barrier::new(2));
    let rank = {
        let (w, start) = (w.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            for _ in 0..ROUNDS {
                w.atomic_add(0, Dtype::Int64, &to_bytes(&[1i64; 4]))
                    .unwrap();
                w.atomic_add(64, Dtype::Int32, &to_bytes(&[2i32; 2]))
                    .unwrap();
                w.fetch_add(128, Dtype::Int64, 1).unwrap();
            }
        })
    };
    let mapped = std::thread::spawn(move || {
        start.wait();
        for _ in 0..ROUNDS {
            for k in 0..4 {
                // SAFETY: the window outlives the thread (joined below);
                // cell k of int64s at offset 0, 8-byte aligned.
                unsafe { AtomicI64::from_ptr((base + 8 * k) as *mut i64) }.fetch_add(1, AcqRel);
            }
            for k in 0..2 {
                // SAFETY: as above, the int32 cells at offset 64.
                unsafe { AtomicI32::from_ptr((base + 64 + 4 * k) as *mut i32) }
                    .fetch_add(3, AcqRel);
            }
            // SAFETY: as above, the int64 cell at offset 128.
            unsafe { AtomicI64::from_ptr((base + 128) as *mut i64) }.fetch_add(5, AcqRel);
        }
    });
    rank.join().unwrap();
    mapped.join().unwrap();
    assert_eq!(
        from_bytes::<i64>(&w.read(0, 32).unwrap()),
        vec![2 * ROUNDS; 4]
    );
    assert_eq!(
        from_bytes::<i32>(&w.read(64, 8).unwrap()),
        vec![5 * ROUNDS as i32; 2]
    );
    assert_eq!(
        from_bytes::<i64>(&w.read(128, 8).unwrap()),
        vec![6 * ROUNDS]
    );
}

#[test]
fn compare_swap_swaps_only_on_match() {
    let w = win(64);
    assert_eq!(w.compare_swap(8, Dtype::Int64, 0, 5).unwrap(), 0);
    assert_eq!(
        w.compare_swap(8, Dtype::Int64, 0, 9).unwrap(),
        5,
        "no swap: returns current"
    );
    assert_eq!(from_bytes::<i64>(&w.read(8, 8).unwrap()), vec![5]);
    assert_eq!(w.compare_swap(0, Dtype::Int32, 0, -1).unwrap(), 0);
    assert_eq!(w.fetch_add(0, Dtype::Int32, 1).unwrap(), -1);
}

#[test]
fn signals_set_and_add_negative_values() {
    let w = win(64);
    w.notify(4, NotifyOp::Set, 10).unwrap();
    w.notify(4, NotifyOp::AtomicAdd, -3).unwrap();
    assert_eq!(w.load_signal(4).unwrap(), 7);
    assert!(w.notify(2, NotifyOp::Set, 1).is_err());
    assert!(w.notify(8, NotifyOp::Unspecified, 1).is_err());
}

#[test]
fn windows_are_found_by_name_and_id() {
    let ws = Windows::new(&[("signal".into(), 64), ("data".into(), 128)]).unwrap();
    assert_eq!(ws.id_of("data"), Some(0));
    assert_eq!(ws.id_of("signal"), Some(1));
    assert_eq!(ws.id_of("nope"), None);
    assert_eq!(ws.get(1).unwrap().size(), 64);
    assert!(matches!(
        ws.get(2),
        Err(AccessError::UnknownWindow { id: 2, count: 2 })
    ));
}
