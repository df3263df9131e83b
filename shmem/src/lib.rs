//! OpenSHMEM 1.5 on pld: the C library `libpld_shmem` (its header is
//! `include/shmem.h`), and the `pld-oshcc` / `pld-oshrun` tools.
//!
//! Each processing element (PE) is a process that embeds a pld rank
//! ([`pld_server::Rank`]): its symmetric heap and its data segment are the
//! rank's windows, so a local load sees what a remote put wrote and
//! `shmem_ptr` to the own PE is the local address. Every call maps to pld
//! ops of one message each — or, when every PE runs on one host, to a
//! copy or a CPU atomic in the heap the PEs share (`near`). See
//! docs/shmem.md.
//!
//! - `addr`: pointer -> (window, offset), pure;
//! - `heap`: the deterministic allocator, pure;
//! - `env`: a PE's settings from its environment, pure;
//! - `segment`: the executable's data segment;
//! - `layout`: the windows' names and the library's heap bytes, constants;
//! - `fatal`: the fatal error and the warning, a leaf every layer calls;
//! - `near`: the heaps of the PEs of one host, mapped;
//! - `pe`: the PE (rank, runtime, spaces);
//! - `team`: teams, their barriers and the collectives' groups;
//! - `coll`: the collectives' algorithms, over the network or shared memory;
//! - `ctx`: communication contexts;
//! - `races`: the `--checked` reports in OpenSHMEM's words;
//! - `job`: the PE with its teams and contexts, the one static;
//! - `capi`: the C entry points;
//! - `launch`: what `pld-oshrun` does;
//! - `say`: one line to stderr in one write.

pub mod addr;
mod bind;
pub mod capi;
mod coll;
mod ctx;
pub mod env;
mod fatal;
pub mod heap;
mod job;
pub mod launch;
mod layout;
mod near;
mod pe;
mod races;
mod say;
pub mod segment;
pub mod symbols;
mod team;
