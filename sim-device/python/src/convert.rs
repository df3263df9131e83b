//! The names Python passes for pld's enums — dtypes, comparisons,
//! reductions, notify ops, collectives, algorithms — parsed by the Rust
//! parsers of those enums (`Dtype::parse`, `Cmp::parse`...), so that the
//! rules are written once. An unknown name is a `ValueError` naming it and
//! the names there are; nothing falls back to a default.

use pld_proto::collective::{Algo, CallKind};
use pld_proto::{Cmp, Dtype, NotifyOp, ReduceOp};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Declares `$py`, the Python form of `$t`: a name parsed with `$parse`,
/// refused naming the names in `$all` when it is none of them.
macro_rules! named {
    ($(#[$doc:meta])* $py:ident($t:ty), $what:literal, $parse:expr, $all:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) struct $py(pub(crate) $t);

        impl<'py> FromPyObject<'py> for $py {
            fn extract_bound(ob: &Bound<'py, PyAny>) -> PyResult<Self> {
                let name: String = ob.extract()?;
                let parse: fn(&str) -> Option<$t> = $parse;
                parse(&name).map($py).ok_or_else(|| {
                    let names: Vec<&str> = $all.into_iter().map(|x| x.name()).collect();
                    PyValueError::new_err(format!(
                        "unknown {} {name:?}: expected one of {}",
                        $what,
                        names.join(", ")
                    ))
                })
            }
        }
    };
}

named!(
    /// A dtype by its pld name (`fp32`, `bf16`, `int64`...).
    PyDtype(Dtype),
    "dtype",
    |n| Dtype::parse(n).filter(|d| *d != Dtype::Unspecified),
    Dtype::ALL.into_iter().filter(|d| *d != Dtype::Unspecified)
);
named!(
    /// A `WaitCmp` by name (`Eq`, `Ge`...).
    PyCmp(Cmp),
    "WaitCmp",
    Cmp::parse,
    Cmp::ALL
);
named!(
    /// A `ReduceOp` by name (`Sum`, `Max`, `Min`, `Prod`).
    PyReduceOp(ReduceOp),
    "ReduceOp",
    ReduceOp::parse,
    ReduceOp::ALL
);
named!(
    /// A `NotifyOp` by name (`Set`, `AtomicAdd`).
    PyNotifyOp(NotifyOp),
    "NotifyOp",
    NotifyOp::parse,
    NotifyOp::ALL
);
named!(
    /// A collective by name (`allreduce`, `broadcast`, `allgather`,
    /// `reduce_scatter`, `all_to_all`).
    PyCollective(CallKind),
    "collective",
    CallKind::parse,
    CallKind::ALL
);
named!(
    /// An allreduce algorithm by name (`mesh`, `ring`).
    PyAlgo(Algo),
    "collective mode",
    Algo::parse,
    Algo::ALL
);
