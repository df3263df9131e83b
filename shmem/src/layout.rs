//! Where things are in a PE's symmetric memory: the windows' names and the
//! library's own bytes at the start of the heap. Every PE lays its heap out
//! the same way, so an offset names the same cell on each; the teams,
//! the shared-memory control block and the active sets' call cell all
//! take their offsets from here.

/// The heap window's name.
pub const HEAP_WINDOW: &str = "shmem.heap";
/// The data segment window's name.
pub const DATA_WINDOW: &str = "shmem.data";
/// Bytes at the start of the heap the teams' sync cells and scratch take
/// (`team::SLOTS` slots).
pub const TEAM_BYTES: u64 = 1 << 20;
/// The heap offset of a PE's shared-memory control block (`near`), right
/// after the teams' bytes.
pub const CONTROL: u64 = TEAM_BYTES;
/// The bytes of one collective's call description, which members compare
/// under `--checked` (`team::agree`).
pub const CALL_BYTES: usize = 128;
/// The offset of the call cell the active-set collectives agree on their
/// calls in under `--checked` (`team::agree`): after the control block.
pub const ACTIVE_CALL: u64 = TEAM_BYTES + 1024;
/// Bytes at the start of the heap window the library keeps for itself:
/// the teams' bytes, then this PE's control block and the active sets'
/// call cell; programs' allocations start after.
pub const RESERVED: u64 = TEAM_BYTES + (64 << 10);
const _: () = assert!(ACTIVE_CALL + CALL_BYTES as u64 <= RESERVED);
