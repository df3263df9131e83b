//! The comparisons `wait` and `test` apply to a signal cell.

use crate::v1::{Cmp, NotifyOp};

impl Cmp {
    /// Every comparison, in wire order.
    pub const ALL: [Cmp; 6] = [Cmp::Eq, Cmp::Ne, Cmp::Gt, Cmp::Ge, Cmp::Lt, Cmp::Le];

    /// Whether `value cmp expected` holds. `Unspecified` never holds.
    pub fn holds(self, value: i32, expected: i32) -> bool {
        match self {
            Cmp::Eq => value == expected,
            Cmp::Ne => value != expected,
            Cmp::Gt => value > expected,
            Cmp::Ge => value >= expected,
            Cmp::Lt => value < expected,
            Cmp::Le => value <= expected,
            Cmp::Unspecified => false,
        }
    }

    /// The comparison's name, as PyPTO's `WaitCmp` writes it: `Eq`, `Ge`...
    pub const fn name(self) -> &'static str {
        match self {
            Cmp::Eq => "Eq",
            Cmp::Ne => "Ne",
            Cmp::Gt => "Gt",
            Cmp::Ge => "Ge",
            Cmp::Lt => "Lt",
            Cmp::Le => "Le",
            Cmp::Unspecified => "Unspecified",
        }
    }

    /// The comparison named `name` ([`Cmp::name`]); never `Unspecified`.
    pub fn parse(name: &str) -> Option<Cmp> {
        Cmp::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The operator as written in messages: `==`, `>=`, ...
    pub const fn symbol(self) -> &'static str {
        match self {
            Cmp::Eq => "==",
            Cmp::Ne => "!=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Unspecified => "?",
        }
    }
}

impl NotifyOp {
    /// Every notify op a caller may ask for.
    pub const ALL: [NotifyOp; 2] = [NotifyOp::Set, NotifyOp::AtomicAdd];

    /// The op's name, as PyPTO's `NotifyOp` writes it.
    pub const fn name(self) -> &'static str {
        match self {
            NotifyOp::Set => "Set",
            NotifyOp::AtomicAdd => "AtomicAdd",
            NotifyOp::Unspecified => "Unspecified",
        }
    }

    /// The op named `name` ([`NotifyOp::name`]); never `Unspecified`.
    pub fn parse(name: &str) -> Option<NotifyOp> {
        NotifyOp::ALL.into_iter().find(|o| o.name() == name)
    }
}

impl std::fmt::Display for Cmp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.symbol())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_comparison_holds_exactly_where_it_should() {
        let table = [
            (Cmp::Eq, [false, true, false]),
            (Cmp::Ne, [true, false, true]),
            (Cmp::Gt, [false, false, true]),
            (Cmp::Ge, [false, true, true]),
            (Cmp::Lt, [true, false, false]),
            (Cmp::Le, [true, true, false]),
        ];
        for (cmp, want) in table {
            for (value, w) in [-1, 0, 1].into_iter().zip(want) {
                assert_eq!(cmp.holds(value, 0), w, "{value} {cmp} 0");
            }
        }
        assert!(!Cmp::Unspecified.holds(0, 0));
    }
}
