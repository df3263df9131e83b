//! One line to stderr in one `write`: the PEs of a job and their launcher
//! share one stderr, and a line written in pieces — as `eprintln!` writes
//! each of its arguments — interleaves mid-line with another process's.
//! A pipe keeps a write of up to `PIPE_BUF` (4 KiB) bytes whole; longer
//! lines go out in as few writes as the pipe takes.

use std::io::Write;

/// Writes `text` and a newline to stderr in one write.
pub(crate) fn line(text: impl std::fmt::Display) {
    let mut b = text.to_string();
    b.push('\n');
    let _ = std::io::stderr().lock().write_all(b.as_bytes());
}
