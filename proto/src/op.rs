//! The one list of pld's one-sided operations.
//!
//! Each op is declared once, in [`ops!`] below, with its properties: its
//! name, what answers it, how checked mode sees it. [`OpKind`], the op
//! part of [`MsgKind`], their `ALL` arrays (which size every per-op and
//! per-message counter) and the maps to and from the wire's `Body` are all
//! generated from that list, as exhaustive matches: a new op is a new line
//! here, and every place that must know of it is then a compile error until
//! it does (`docs/architecture.md`, "Adding an op").

use crate::checked::AccessKind;
use crate::v1::{Header, header::Body};

/// What answers an op once the target has applied it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplyShape {
    /// A plain ack: nothing comes back.
    Ack,
    /// The bytes read (`GetReply`).
    Data,
    /// The value the cell held (`Value`).
    Value,
}

/// Declares the ops; see the module's docs. Each line: the variant (also
/// the name of its `Body` variant on the wire), its pld/OpenSHMEM name,
/// its reply, the access checked mode records for it (`None`: a signal op,
/// which the checker orders rather than records), and whether it is a
/// release point of checked mode's happens-before order.
macro_rules! ops {
    ($(
        $(#[$doc:meta])*
        $op:ident = $name:literal, reply: $reply:ident, access: $access:expr, releases: $rel:expr;
    )*) => {
        /// The one-sided operations.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(usize)]
        pub enum OpKind {
            $($(#[$doc])* $op,)*
        }

        impl OpKind {
            /// Every kind, in index order.
            pub const ALL: [OpKind; [$($name),*].len()] = [$(OpKind::$op),*];

            /// The pld/OpenSHMEM name of the operation.
            pub const fn name(self) -> &'static str {
                match self {
                    $(OpKind::$op => $name,)*
                }
            }

            /// What answers the op.
            pub const fn reply(self) -> ReplyShape {
                match self {
                    $(OpKind::$op => ReplyShape::$reply,)*
                }
            }

            /// The access checked mode records for the op at its target;
            /// `None` for a signal op.
            pub const fn access(self) -> Option<AccessKind> {
                match self {
                    $(OpKind::$op => $access,)*
                }
            }

            /// Whether the op is a release point in checked mode: what its
            /// issuer did before happens before what a rank that observes
            /// it does after.
            pub const fn releases(self) -> bool {
                match self {
                    $(OpKind::$op => $rel,)*
                }
            }

            /// The kind of the message that carries the op's request.
            pub const fn msg_kind(self) -> MsgKind {
                match self {
                    $(OpKind::$op => MsgKind::$op,)*
                }
            }

            /// The op a request body asks for; `None` for a body that is
            /// not a request (a hello, a barrier signal, a reply).
            pub fn of_request(body: &Body) -> Option<OpKind> {
                match body {
                    $(Body::$op(_) => Some(OpKind::$op),)*
                    Body::Hello(_)
                    | Body::Barrier(_)
                    | Body::Ack(_)
                    | Body::GetReply(_)
                    | Body::Value(_)
                    | Body::Error(_) => None,
                }
            }
        }

        /// The kinds of peer-plane messages, for counters and logs: the
        /// request of each op, and the frames that are not requests.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(usize)]
        pub enum MsgKind {
            /// The connection's first frame: who the sender is.
            Hello,
            $($(#[$doc])* $op,)*
            /// A dissemination-barrier round message.
            Barrier,
            /// An op was applied.
            Ack,
            /// A get's bytes.
            GetReply,
            /// The value a fetching atomic found.
            Value,
            /// The target refused an op.
            Error,
            /// A header without a body.
            Empty,
        }

        impl MsgKind {
            /// Every kind, in index order.
            pub const ALL: [MsgKind; [$($name),*].len() + 7] = [
                MsgKind::Hello,
                $(MsgKind::$op,)*
                MsgKind::Barrier,
                MsgKind::Ack,
                MsgKind::GetReply,
                MsgKind::Value,
                MsgKind::Error,
                MsgKind::Empty,
            ];

            /// The kind of the message a header carries.
            pub fn of(header: &Header) -> MsgKind {
                match &header.body {
                    None => MsgKind::Empty,
                    Some(Body::Hello(_)) => MsgKind::Hello,
                    $(Some(Body::$op(_)) => MsgKind::$op,)*
                    Some(Body::Barrier(_)) => MsgKind::Barrier,
                    Some(Body::Ack(_)) => MsgKind::Ack,
                    Some(Body::GetReply(_)) => MsgKind::GetReply,
                    Some(Body::Value(_)) => MsgKind::Value,
                    Some(Body::Error(_)) => MsgKind::Error,
                }
            }

            /// The op whose request this is; `None` for the other frames.
            pub const fn op(self) -> Option<OpKind> {
                match self {
                    $(MsgKind::$op => Some(OpKind::$op),)*
                    MsgKind::Hello
                    | MsgKind::Barrier
                    | MsgKind::Ack
                    | MsgKind::GetReply
                    | MsgKind::Value
                    | MsgKind::Error
                    | MsgKind::Empty => None,
                }
            }

            /// The snake_case name used in counters.
            pub const fn name(self) -> &'static str {
                match self {
                    MsgKind::Hello => "hello",
                    $(MsgKind::$op => $name,)*
                    MsgKind::Barrier => "barrier",
                    MsgKind::Ack => "ack",
                    MsgKind::GetReply => "get_reply",
                    MsgKind::Value => "value",
                    MsgKind::Error => "error",
                    MsgKind::Empty => "empty",
                }
            }
        }
    };
}

ops! {
    /// `put`: write bytes into the target's window.
    Put = "put", reply: Ack, access: Some(AccessKind::Put), releases: false;
    /// `get`: read bytes from the target's window.
    Get = "get", reply: Data, access: Some(AccessKind::Get), releases: false;
    /// `atomic_add`: add to window cells, no value back.
    AtomicAdd = "atomic_add", reply: Ack, access: Some(AccessKind::AtomicAdd), releases: true;
    /// `fetch_add`: add to a window cell and return what it held.
    FetchAdd = "fetch_add", reply: Value, access: Some(AccessKind::FetchAdd), releases: true;
    /// `compare_swap`: swap a window cell if it holds the expected value.
    CompareSwap = "compare_swap", reply: Value, access: Some(AccessKind::CompareSwap), releases: true;
    /// `notify`: set or add to an int32 signal cell.
    Notify = "notify", reply: Ack, access: None, releases: true;
    /// `swap`: replace a window cell and return what it held.
    Swap = "swap", reply: Value, access: Some(AccessKind::Atomic), releases: true;
    /// `fetch`: read a window cell atomically.
    Fetch = "fetch", reply: Value, access: Some(AccessKind::AtomicRead), releases: false;
    /// `set`: write a window cell atomically.
    Set = "set", reply: Ack, access: Some(AccessKind::Atomic), releases: true;
    /// `atomic_bitwise`: and / or / xor into a window cell, no value back.
    AtomicBitwise = "atomic_bitwise", reply: Ack, access: Some(AccessKind::Atomic), releases: true;
    /// `fetch_bitwise`: and / or / xor into a window cell and return what it held.
    FetchBitwise = "fetch_bitwise", reply: Value, access: Some(AccessKind::Atomic), releases: true;
    /// `put_signal`: write bytes, then set or add to a 64-bit signal cell.
    PutSignal = "put_signal", reply: Ack, access: Some(AccessKind::Put), releases: true;
}

impl OpKind {
    /// Whether a plain ack is this op's whole answer (no data, no value).
    pub const fn answered_by_ack(self) -> bool {
        matches!(self.reply(), ReplyShape::Ack)
    }
}

impl std::fmt::Display for OpKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_request_is_a_message_kind_that_maps_back_to_it() {
        for op in OpKind::ALL {
            assert_eq!(op.msg_kind().op(), Some(op));
            assert_eq!(op.msg_kind().name(), op.name());
            assert_eq!(MsgKind::ALL[op.msg_kind() as usize], op.msg_kind());
        }
        for (i, k) in MsgKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i, "{k:?} is at its index");
        }
        for (i, k) in OpKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i, "{k:?} is at its index");
        }
    }

    #[test]
    fn the_ops_that_release_are_the_writing_atomics_and_the_signals() {
        for op in OpKind::ALL {
            let atomic = op.access().is_some_and(|a| a.atomic() && a.writes());
            let signal = matches!(op, OpKind::Notify | OpKind::PutSignal);
            assert_eq!(op.releases(), atomic || signal, "{op}");
        }
    }
}
