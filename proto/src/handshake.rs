//! The agreement check two ranks run on each other's [`Hello`].
//!
//! Both the dialing and the accepting side run [`check`]; a cluster serves
//! only if every pair agrees on protocol version, cluster id, nranks and the
//! windows (names and sizes).

use crate::v1::{Hello, WindowSpec};

/// What two ranks disagree on. Messages name both ranks, so that the text
/// reads the same on either side of the connection.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
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
    /// One side runs checked mode and the other does not.
    #[error(
        "checked mode mismatch: rank {local_rank} runs {}, rank {remote_rank} {}: start every rank with the same --checked",
        on_off(*.local), on_off(*.remote)
    )]
    Checked {
        local_rank: u32,
        local: bool,
        remote_rank: u32,
        remote: bool,
    },
    /// The peer claims a rank outside the cluster.
    #[error("a peer claims rank {rank}, but the cluster has ranks 0 to {last}", last = .nranks.saturating_sub(1))]
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

fn on_off(checked: bool) -> &'static str {
    if checked {
        "with --checked"
    } else {
        "without it"
    }
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
    if local.checked != remote.checked {
        return Err(Mismatch::Checked {
            local_rank: local.rank,
            local: local.checked,
            remote_rank: remote.rank,
            remote: remote.checked,
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

/// What the accepting side knows of who sent a Hello, before believing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proof {
    /// Mutual TLS: the peer's certificate names the rank its Hello claims.
    Names,
    /// Mutual TLS: the peer's certificate (of the cluster CA) names another
    /// rank, or none: it is not who it claims to be.
    Other,
    /// No authentication (`--insecure`): anyone may claim any rank.
    Unauthenticated,
}

/// What the accepting side makes of a peer's Hello.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The peer is the rank it claims and agrees with this rank: serve it.
    Accept,
    /// Refuse it, and hold nothing against the rank it claims: it claims no
    /// rank of this cluster, or its certificate does not name the rank it
    /// claims, or nothing proves who it is. A stranger never stops a rank.
    Stranger(Refused),
    /// Refuse it: its certificate proves it is rank `rank` of this cluster,
    /// and that rank is configured differently (cluster id, protocol
    /// version, windows) — a cluster this rank cannot serve.
    Misconfigured {
        /// The rank its certificate proves it is.
        rank: u32,
        /// How its configuration differs from this rank's.
        mismatch: Mismatch,
    },
}

/// Why a stranger was refused.
// The fields of each variant are the values its message names.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The claimed rank is outside this cluster (checked before any other
    /// field is read, and against this rank's own rank count).
    #[error("claims rank {rank}, but the cluster has ranks 0 to {last}")]
    NoSuchRank { rank: u32, last: u32 },
    /// The certificate names another rank than the Hello claims.
    #[error("claims rank {rank} but its certificate does not name rank {rank}")]
    NotThatRank { rank: u32 },
    /// The Hello disagrees with this rank; see the mismatch.
    #[error("{0}")]
    Mismatch(Mismatch),
}

/// Judges a Hello on the accepting side. Every field is range-checked
/// before it is used, and the claimed rank is believed only when `proof`
/// says the certificate names it: a mismatch counts against a rank of the
/// cluster ([`Verdict::Misconfigured`]) only then. Without authentication a
/// mismatch is a stranger's: the rank's own dial of that peer, which
/// reaches the configured address, finds a genuine one.
pub fn admit(local: &Hello, remote: &Hello, proof: impl Fn(u32) -> Proof) -> Verdict {
    if remote.rank >= local.nranks {
        return Verdict::Stranger(Refused::NoSuchRank {
            rank: remote.rank,
            last: local.nranks.saturating_sub(1),
        });
    }
    let proof = proof(remote.rank);
    if proof == Proof::Other {
        return Verdict::Stranger(Refused::NotThatRank { rank: remote.rank });
    }
    match check(local, remote, None) {
        Ok(()) => Verdict::Accept,
        Err(m) if proof == Proof::Names && identity_mismatch(&m) => Verdict::Misconfigured {
            rank: remote.rank,
            mismatch: m,
        },
        Err(m) => Verdict::Stranger(Refused::Mismatch(m)),
    }
}

/// Whether a mismatch means the cluster's own configuration disagrees (the
/// peer is a rank of this cluster configured differently), rather than a
/// bad claim.
fn identity_mismatch(m: &Mismatch) -> bool {
    matches!(
        m,
        Mismatch::ProtocolVersion { .. }
            | Mismatch::ClusterId { .. }
            | Mismatch::WindowSize { .. }
            | Mismatch::WindowMissing { .. }
    )
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
            listen: String::new(),
            checked: false,
        }
    }

    #[test]
    fn admit_checks_the_rank_range_before_anything_else() {
        let w = [("data", 64)];
        let mut evil = hello(99, &w);
        evil.cluster_id = "evil".into();
        assert_eq!(
            admit(&hello(0, &w), &evil, |_| Proof::Names),
            Verdict::Stranger(Refused::NoSuchRank { rank: 99, last: 3 })
        );
        // The remote's own nranks does not widen the range.
        let mut wide = hello(6, &w);
        wide.nranks = 8;
        assert!(matches!(
            admit(&hello(0, &w), &wide, |_| Proof::Names),
            Verdict::Stranger(Refused::NoSuchRank { rank: 6, .. })
        ));
    }

    #[test]
    fn admit_believes_a_claim_only_with_a_certificate_that_names_it() {
        let w = [("data", 64)];
        let mut evil = hello(1, &w);
        evil.cluster_id = "evil".into();
        // A holder of rank 2's certificate claiming rank 1: refused as a
        // stranger, nothing held against rank 1.
        let names_2 = |r: u32| if r == 2 { Proof::Names } else { Proof::Other };
        assert_eq!(
            admit(&hello(0, &w), &evil, names_2),
            Verdict::Stranger(Refused::NotThatRank { rank: 1 })
        );
        // Unauthenticated: refused, but never a cluster misconfiguration.
        assert!(matches!(
            admit(&hello(0, &w), &evil, |_| Proof::Unauthenticated),
            Verdict::Stranger(Refused::Mismatch(Mismatch::ClusterId { .. }))
        ));
        // Rank 1 proven by its certificate, in another cluster: misconfigured.
        assert!(matches!(
            admit(&hello(0, &w), &evil, |_| Proof::Names),
            Verdict::Misconfigured {
                rank: 1,
                mismatch: Mismatch::ClusterId { .. }
            }
        ));
        // A proven rank claiming this rank's own id is no configuration
        // problem of the cluster's: a stranger.
        assert!(matches!(
            admit(&hello(0, &w), &hello(0, &w), |_| Proof::Names),
            Verdict::Stranger(Refused::Mismatch(Mismatch::SameRank { rank: 0 }))
        ));
        assert_eq!(
            admit(&hello(0, &w), &hello(3, &w), |_| Proof::Names),
            Verdict::Accept
        );
        assert_eq!(
            admit(&hello(0, &w), &hello(3, &w), |_| Proof::Unauthenticated),
            Verdict::Accept
        );
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
