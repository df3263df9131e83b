//! Reply matching: what a reply frame means for the op it answers. The
//! link's reader hands each reply here with the kind of the op its id
//! names; a reply of the wrong kind is a protocol error that names both.

use crate::frame::MsgKind;
use crate::op::{OpKind, ReplyShape};
use crate::v1::header::Body;
use crate::v1::{ErrorCode, Header};

/// What a reply says about its op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A put, atomic add or notify was applied.
    Ack,
    /// A get's bytes follow as the frame's payload.
    Data,
    /// A fetch_add or compare_swap was applied; the cell held this before.
    Value(i64),
    /// The target refused the op; its window did not change.
    Refused {
        /// Why, as a code.
        code: ErrorCode,
        /// Why, in words.
        message: String,
    },
    /// A reply that does not answer an op of this kind.
    Mismatch {
        /// The op that was waiting.
        op: OpKind,
        /// What arrived instead.
        got: &'static str,
    },
}

/// Matches the body of a reply to op `op`.
pub fn answer(op: OpKind, body: Option<Body>) -> Answer {
    match (op.reply(), body) {
        (ReplyShape::Ack, Some(Body::Ack(_))) => Answer::Ack,
        (ReplyShape::Data, Some(Body::GetReply(_))) => Answer::Data,
        (ReplyShape::Value, Some(Body::Value(v))) => Answer::Value(v.previous),
        (_, Some(Body::Error(e))) => Answer::Refused {
            code: ErrorCode::try_from(e.code).unwrap_or(ErrorCode::Unspecified),
            message: e.message,
        },
        (_, None) => Answer::Mismatch {
            op,
            got: "an empty frame",
        },
        (_, Some(b)) => Answer::Mismatch {
            op,
            got: MsgKind::of(&Header {
                id: 0,
                body: Some(b),
                checked: None,
            })
            .name(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::v1::{Ack, ErrorReply, GetReply, ValueReply};

    #[test]
    fn each_op_takes_its_own_reply_and_names_a_wrong_one() {
        assert_eq!(
            answer(OpKind::Put, Some(Body::Ack(Ack::default()))),
            Answer::Ack
        );
        assert_eq!(
            answer(OpKind::Notify, Some(Body::Ack(Ack::default()))),
            Answer::Ack
        );
        assert_eq!(
            answer(OpKind::Get, Some(Body::GetReply(GetReply {}))),
            Answer::Data
        );
        assert_eq!(
            answer(
                OpKind::CompareSwap,
                Some(Body::Value(ValueReply { previous: -3 }))
            ),
            Answer::Value(-3)
        );
        assert_eq!(
            answer(
                OpKind::Get,
                Some(Body::Error(ErrorReply {
                    code: ErrorCode::OutOfRange as i32,
                    message: "no".into()
                }))
            ),
            Answer::Refused {
                code: ErrorCode::OutOfRange,
                message: "no".into()
            }
        );
        assert_eq!(
            answer(OpKind::Get, Some(Body::Ack(Ack::default()))),
            Answer::Mismatch {
                op: OpKind::Get,
                got: "ack"
            }
        );
        assert_eq!(
            answer(OpKind::FetchAdd, None),
            Answer::Mismatch {
                op: OpKind::FetchAdd,
                got: "an empty frame"
            }
        );
    }
}
