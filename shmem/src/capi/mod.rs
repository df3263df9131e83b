//! The C entry points of OpenSHMEM. Each is thin: check the arguments,
//! translate the addresses ([`crate::addr`]), call the rank, and turn an
//! error into a fatal, named report ([`crate::fatal::fatal`]). The typed
//! entry points (`shmem_long_put`, ...) are generated from the header's
//! type tables by `build.rs` and call the generic functions here.

pub mod amo;
pub mod ctx;
pub mod lock;
pub(crate) mod reduce;
pub mod rma;
pub mod setup;
pub mod signal;
pub mod sync;
pub mod team;
pub mod wait;

/// The bytes of a C `long double` (x86-64: 80 bits in 16 bytes). The RMA
/// routines move it as bytes; `p` and `g` pass it by value, which Rust
/// cannot, so the header defines them over `putmem` / `getmem`.
#[repr(C, align(16))]
#[derive(Debug, Clone, Copy)]
pub struct LongDouble([u8; 16]);

// The collectives move a long double as its bytes.
impl pld_proto::collective::Plain for LongDouble {
    const SIZE: usize = 16;
    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.0);
    }
    fn read_le(bytes: &[u8]) -> Self {
        let mut b = [0u8; 16];
        b.copy_from_slice(bytes);
        LongDouble(b)
    }
}

/// The typed entry points, generated from `include/shmem.h`.
// The generated calls multiply by the element size, 1 for the 8-bit forms.
// A context twin wraps its body in a closure, itself an unsafe block.
#[allow(clippy::too_many_arguments, clippy::identity_op, unused_unsafe)]
pub mod typed {
    include!(concat!(env!("OUT_DIR"), "/typed.rs"));
}
