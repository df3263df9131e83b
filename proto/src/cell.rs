//! [`CellOp`]: OpenSHMEM's single-cell atomics beyond add and
//! compare_swap — swap, fetch, set and the bitwise ops — as one value the
//! origin builds, the wire carries as a [`PeerCellOp`] and the target
//! applies. Each is one message and atomic at the target; none is a
//! compare-and-swap loop across the network.

use crate::OpKind;
use crate::v1::{BitOp, CellOpKind, PeerCellOp, header::Body};

/// A single-cell atomic on an int32/int64 cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CellOp {
    /// Replace the cell by the value; answered with what it held.
    Swap(i64),
    /// Read the cell atomically.
    Fetch,
    /// Write the value atomically.
    Set(i64),
    /// `cell = cell op value`, no value back.
    Bitwise(BitOp, i64),
    /// `cell = cell op value`; answered with what it held.
    FetchBitwise(BitOp, i64),
}

/// Why a [`PeerCellOp`] is not a cell op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("bitwise op value {value} is none of and, or, xor")]
pub struct InvalidBitOp {
    /// The value on the wire.
    pub value: i32,
}

impl CellOp {
    /// The op in the op table.
    pub const fn kind(self) -> OpKind {
        match self {
            CellOp::Swap(_) => OpKind::Swap,
            CellOp::Fetch => OpKind::Fetch,
            CellOp::Set(_) => OpKind::Set,
            CellOp::Bitwise(..) => OpKind::AtomicBitwise,
            CellOp::FetchBitwise(..) => OpKind::FetchBitwise,
        }
    }

    /// The operand (0 for a fetch).
    pub const fn value(self) -> i64 {
        match self {
            CellOp::Swap(v)
            | CellOp::Set(v)
            | CellOp::Bitwise(_, v)
            | CellOp::FetchBitwise(_, v) => v,
            CellOp::Fetch => 0,
        }
    }

    /// The request body of this op on `window`'s cell at `offset`.
    pub fn body(self, window: u32, offset: u64, dtype: crate::Dtype) -> Body {
        let bit = match self {
            CellOp::Bitwise(b, _) | CellOp::FetchBitwise(b, _) => b,
            CellOp::Swap(_) | CellOp::Fetch | CellOp::Set(_) => BitOp::Unspecified,
        };
        let c = PeerCellOp {
            window,
            offset,
            dtype: dtype as i32,
            value: self.value(),
            bit_op: bit as i32,
        };
        match self {
            CellOp::Swap(_) => Body::Swap(c),
            CellOp::Fetch => Body::Fetch(c),
            CellOp::Set(_) => Body::Set(c),
            CellOp::Bitwise(..) => Body::AtomicBitwise(c),
            CellOp::FetchBitwise(..) => Body::FetchBitwise(c),
        }
    }

    /// The op a request body carries, if it is a cell op; the target's
    /// side of [`CellOp::body`].
    pub fn of_body(body: &Body) -> Option<Result<(&PeerCellOp, CellOp), InvalidBitOp>> {
        let bit = |c: &PeerCellOp| match BitOp::try_from(c.bit_op) {
            Ok(b @ (BitOp::And | BitOp::Or | BitOp::Xor)) => Ok(b),
            _ => Err(InvalidBitOp { value: c.bit_op }),
        };
        Some(match body {
            Body::Swap(c) => Ok((c, CellOp::Swap(c.value))),
            Body::Fetch(c) => Ok((c, CellOp::Fetch)),
            Body::Set(c) => Ok((c, CellOp::Set(c.value))),
            Body::AtomicBitwise(c) => bit(c).map(|b| (c, CellOp::Bitwise(b, c.value))),
            Body::FetchBitwise(c) => bit(c).map(|b| (c, CellOp::FetchBitwise(b, c.value))),
            _ => return None,
        })
    }
}

impl CellOp {
    /// The op as a client asks for it (`CellOpRequest`): kind, bitwise
    /// op, operand.
    pub fn to_request(self) -> (CellOpKind, BitOp, i64) {
        let v = self.value();
        match self {
            CellOp::Swap(_) => (CellOpKind::Swap, BitOp::Unspecified, v),
            CellOp::Fetch => (CellOpKind::Fetch, BitOp::Unspecified, v),
            CellOp::Set(_) => (CellOpKind::Set, BitOp::Unspecified, v),
            CellOp::Bitwise(b, _) => (CellOpKind::Bitwise, b, v),
            CellOp::FetchBitwise(b, _) => (CellOpKind::FetchBitwise, b, v),
        }
    }

    /// The op of a client's request; `None` for an unknown kind or a
    /// bitwise kind without its operator.
    pub fn from_request(kind: i32, bit_op: i32, value: i64) -> Option<CellOp> {
        let bit = match BitOp::try_from(bit_op) {
            Ok(b @ (BitOp::And | BitOp::Or | BitOp::Xor)) => Some(b),
            _ => None,
        };
        Some(match CellOpKind::try_from(kind).ok()? {
            CellOpKind::Swap => CellOp::Swap(value),
            CellOpKind::Fetch => CellOp::Fetch,
            CellOpKind::Set => CellOp::Set(value),
            CellOpKind::Bitwise => CellOp::Bitwise(bit?, value),
            CellOpKind::FetchBitwise => CellOp::FetchBitwise(bit?, value),
            CellOpKind::Unspecified => return None,
        })
    }
}

/// Applies `op` to `cur`, the cell's value: the new value, or `None` for a
/// fetch (which writes nothing).
pub const fn next_value(op: CellOp, cur: i64) -> Option<i64> {
    match op {
        CellOp::Fetch => None,
        CellOp::Swap(v) | CellOp::Set(v) => Some(v),
        CellOp::Bitwise(b, v) | CellOp::FetchBitwise(b, v) => Some(match b {
            BitOp::And => cur & v,
            BitOp::Or => cur | v,
            BitOp::Xor => cur ^ v,
            BitOp::Unspecified => cur,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dtype;

    #[test]
    fn every_cell_op_survives_the_wire_as_itself() {
        let ops = [
            CellOp::Swap(-7),
            CellOp::Fetch,
            CellOp::Set(1 << 40),
            CellOp::Bitwise(BitOp::And, 0x0f),
            CellOp::Bitwise(BitOp::Or, 0x30),
            CellOp::FetchBitwise(BitOp::Xor, -1),
        ];
        for op in ops {
            let body = op.body(3, 64, Dtype::Int64);
            assert_eq!(OpKind::of_request(&body), Some(op.kind()));
            let (c, back) = CellOp::of_body(&body).expect("a cell op").expect("valid");
            assert_eq!((c.window, c.offset, back), (3, 64, op));
        }
    }

    #[test]
    fn a_clients_request_names_the_same_op() {
        for op in [
            CellOp::Swap(3),
            CellOp::Fetch,
            CellOp::Set(-2),
            CellOp::Bitwise(BitOp::Or, 6),
            CellOp::FetchBitwise(BitOp::And, 5),
        ] {
            let (k, b, v) = op.to_request();
            assert_eq!(CellOp::from_request(k as i32, b as i32, v), Some(op));
        }
        assert_eq!(CellOp::from_request(CellOpKind::Bitwise as i32, 0, 1), None);
        assert_eq!(CellOp::from_request(99, 0, 1), None);
    }

    #[test]
    fn a_bitwise_op_without_its_operator_is_refused() {
        let mut body = CellOp::Bitwise(BitOp::And, 1).body(0, 0, Dtype::Int32);
        if let Body::AtomicBitwise(c) = &mut body {
            c.bit_op = 9;
        }
        assert_eq!(
            CellOp::of_body(&body).map(|r| r.map(|(_, op)| op)),
            Some(Err(InvalidBitOp { value: 9 }))
        );
    }

    #[test]
    fn the_bitwise_ops_compute_what_openshmem_says() {
        assert_eq!(
            next_value(CellOp::Bitwise(BitOp::And, 0b1100), 0b1010),
            Some(0b1000)
        );
        assert_eq!(
            next_value(CellOp::FetchBitwise(BitOp::Or, 0b1100), 0b1010),
            Some(0b1110)
        );
        assert_eq!(
            next_value(CellOp::Bitwise(BitOp::Xor, 0b1100), 0b1010),
            Some(0b0110)
        );
        assert_eq!(next_value(CellOp::Fetch, 5), None);
        assert_eq!(next_value(CellOp::Swap(9), 5), Some(9));
    }
}
