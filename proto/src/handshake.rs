//! The agreement check two ranks run on each other's [`Hello`].
//!
//! Both the dialing and the accepting side run [`check`]; a cluster serves
//! only if every pair agrees on protocol version, cluster id, nranks and the
//! windows (names and sizes).

use crate::v1::{Hello, WindowSpec};

/// What two ranks disagree on. Messages name both ranks, so that the text
/// reads the same on either side of the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Mismatch {
    /// Different peer-plane protocol versions.
    #[error(
        "protocol version mismatch: rank {local_rank} speaks version {local}, rank {remote_rank} version {remote}"
    )]
    ProtocolVersion {
        local_rank: u32,
        local: u32,
        remote_rank: u32,
        remote: u32,
    },
    /// Different cluster ids: the peer belongs to another cluster.
    #[error(
        "cluster id mismatch: rank {local_rank} is in cluster '{local}', rank {remote_rank} in cluster '{remote}'"
    )]
    ClusterId {
        local_rank: u32,
        local: String,
        remote_rank: u32,
        remote: String,
    },
    /// Different cluster sizes.
    #[error(
        "nranks mismatch: rank {local_rank} has {local} ranks, rank {remote_rank} has {remote}"
    )]
    Nranks {
        local_rank: u32,
        local: u32,
        remote_rank: u32,
        remote: u32,
    },
    /// The peer claims a rank outside the cluster.
    #[error("a peer claims rank {rank}, outside 0..{nranks}")]
    RankOutOfRange { rank: u32, nranks: u32 },
    /// The peer claims this rank's own id.
    #[error("a peer claims rank {rank}, which is this rank's own")]
    SameRank { rank: u32 },
    /// The peer at an address answered as another rank than the peer list says.
    #[error("the peer list has rank {expected} at this address, but rank {actual} answered")]
    UnexpectedRank { expected: u32, actual: u32 },
    /// A window with the same name and different sizes.
    #[error(
        "window '{name}' size mismatch: {local} bytes on rank {local_rank}, {remote} bytes on rank {remote_rank}"
    )]
    WindowSize {
        name: String,
        local_rank: u32,
        local: u64,
        remote_rank: u32,
        remote: u64,
    },
    /// A window that only one side has.
    #[error("window '{name}' exists on rank {present} but not on rank {absent}")]
    WindowMissing {
        name: String,
        present: u32,
        absent: u32,
    },
    /// The peer's window list is not sorted by name or has duplicates.
    #[error("rank {rank}'s window list is not sorted by name without duplicates")]
    WindowOrder { rank: u32 },
}

/// Checks that `remote` may join the cluster `local` belongs to. With
/// `expected_rank`, the remote must also be that rank (the dialing side knows
/// whom it dialed).
pub fn check(local: &Hello, remote: &Hello, expected_rank: Option<u32>) -> Result<(), Mismatch> {
    if local.protocol_version != remote.protocol_version {
        return Err(Mismatch::ProtocolVersion {
            local_rank: local.rank,
            local: local.protocol_version,
            remote_rank: remote.rank,
            remote: remote.protocol_version,
        });
    }
    if local.cluster_id != remote.cluster_id {
        return Err(Mismatch::ClusterId {
            local_rank: local.rank,
            local: local.cluster_id.clone(),
            remote_rank: remote.rank,
            remote: remote.cluster_id.clone(),
        });
    }
    if local.nranks != remote.nranks {
        return Err(Mismatch::Nranks {
            local_rank: local.rank,
            local: local.nranks,
            remote_rank: remote.rank,
            remote: remote.nranks,
        });
    }
    if remote.rank >= remote.nranks {
        return Err(Mismatch::RankOutOfRange {
            rank: remote.rank,
            nranks: remote.nranks,
        });
    }
    if remote.rank == local.rank {
        return Err(Mismatch::SameRank { rank: remote.rank });
    }
    if let Some(expected) = expected_rank
        && expected != remote.rank
    {
        return Err(Mismatch::UnexpectedRank {
            expected,
            actual: remote.rank,
        });
    }
    if !sorted_unique(&remote.windows) {
        return Err(Mismatch::WindowOrder { rank: remote.rank });
    }
    check_windows(local, remote)
}

fn sorted_unique(windows: &[WindowSpec]) -> bool {
    windows.windows(2).all(|w| w[0].name < w[1].name)
}

fn check_windows(local: &Hello, remote: &Hello) -> Result<(), Mismatch> {
    let (l, r) = (&local.windows, &remote.windows);
    let missing = |name: &str, present: &Hello, absent: &Hello| Mismatch::WindowMissing {
        name: name.to_string(),
        present: present.rank,
        absent: absent.rank,
    };
    let (mut i, mut j) = (0, 0);
    loop {
        match (l.get(i), r.get(j)) {
            (None, None) => return Ok(()),
            (Some(a), Some(b)) if a.name == b.name => {
                if a.size != b.size {
                    return Err(Mismatch::WindowSize {
                        name: a.name.clone(),
                        local_rank: local.rank,
                        local: a.size,
                        remote_rank: remote.rank,
                        remote: b.size,
                    });
                }
                i += 1;
                j += 1;
            }
            (Some(a), b) if b.is_none_or(|b| a.name < b.name) => {
                return Err(missing(&a.name, local, remote));
            }
            (_, Some(b)) => return Err(missing(&b.name, remote, local)),
            (Some(_), None) => unreachable!("covered by the arm above"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PROTOCOL_VERSION;

    fn hello(rank: u32, windows: &[(&str, u64)]) -> Hello {
        Hello {
            protocol_version: PROTOCOL_VERSION,
            cluster_id: "c".into(),
            rank,
            nranks: 4,
            windows: windows
                .iter()
                .map(|(n, s)| WindowSpec {
                    name: n.to_string(),
                    size: *s,
                })
                .collect(),
            max_payload: 1 << 20,
            epoch: 0,
            barrier_epoch: 1,
        }
    }

    #[test]
    fn agreeing_ranks_pass() {
        let w = [("data", 64), ("signal", 8)];
        assert_eq!(check(&hello(0, &w), &hello(1, &w), Some(1)), Ok(()));
    }

    #[test]
    fn each_disagreement_is_named() {
        let w = [("data", 64), ("signal", 8)];
        let mut other = hello(1, &w);
        other.cluster_id = "d".into();
        let e = check(&hello(0, &w), &other, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cluster id mismatch: rank 0 is in cluster 'c', rank 1 in cluster 'd'"
        );

        let e = check(
            &hello(0, &w),
            &hello(1, &[("data", 32), ("signal", 8)]),
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "window 'data' size mismatch: 64 bytes on rank 0, 32 bytes on rank 1"
        );
        let e = check(&hello(0, &w), &hello(1, &[("data", 64)]), None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "window 'signal' exists on rank 0 but not on rank 1"
        );
        let e = check(
            &hello(0, &w),
            &hello(1, &[("a", 1), ("data", 64), ("signal", 8)]),
            None,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "window 'a' exists on rank 1 but not on rank 0"
        );
        assert_eq!(
            check(&hello(0, &w), &hello(0, &w), None),
            Err(Mismatch::SameRank { rank: 0 })
        );
        assert_eq!(
            check(&hello(0, &w), &hello(2, &w), Some(1)),
            Err(Mismatch::UnexpectedRank {
                expected: 1,
                actual: 2
            })
        );
        assert_eq!(
            check(&hello(0, &w), &hello(9, &w), None),
            Err(Mismatch::RankOutOfRange { rank: 9, nranks: 4 })
        );
        let mut v = hello(1, &w);
        v.protocol_version += 1;
        assert!(matches!(
            check(&hello(0, &w), &v, None),
            Err(Mismatch::ProtocolVersion { .. })
        ));
        let mut n = hello(1, &w);
        n.nranks = 3;
        assert!(matches!(
            check(&hello(0, &w), &n, None),
            Err(Mismatch::Nranks { .. })
        ));
        assert_eq!(
            check(
                &hello(0, &w),
                &hello(1, &[("signal", 8), ("data", 64)]),
                None
            ),
            Err(Mismatch::WindowOrder { rank: 1 })
        );
    }
}
