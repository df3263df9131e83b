//! The generated entry points of the collectives: the 1.5 team forms
//! (`shmem_long_broadcast`, `shmem_int_sum_reduce`, ...), the untyped
//! `mem` forms, and the 1.4 active-set forms (`shmem_broadcast64`,
//! `shmem_long_sum_to_all`, ...): part of `build.rs`.

use super::{func, rust};

const C: &str = "crate::coll";
const R: &str = "crate::capi::reduce";

/// The data-movement collectives of element type `r`, named `shmem_{n}_`.
fn moves(out: &mut String, prefix: &str, suffix: &str, r: &str) {
    let team = "team: usize";
    let d = format!("dest: *mut {r}, source: *const {r}");
    let rows = [
        (
            "broadcast",
            format!("{team}, {d}, nelems: usize, pe_root: i32"),
            "broadcast(CALL, SCOPE, dest, source, nelems, pe_root, false)",
        ),
        (
            "collect",
            format!("{team}, {d}, nelems: usize"),
            "collect(CALL, SCOPE, dest, source, nelems)",
        ),
        (
            "fcollect",
            format!("{team}, {d}, nelems: usize"),
            "fcollect(CALL, SCOPE, dest, source, nelems)",
        ),
        (
            "alltoall",
            format!("{team}, {d}, nelems: usize"),
            "alltoall(CALL, SCOPE, dest, source, nelems)",
        ),
        (
            "alltoalls",
            format!("{team}, {d}, dst: isize, sst: isize, nelems: usize"),
            "alltoalls(CALL, SCOPE, dest, source, dst, sst, nelems)",
        ),
    ];
    for (op, args, call) in rows {
        let sym = format!("{prefix}{op}{suffix}");
        let body = format!("{C}::{call}")
            .replace("CALL", &format!("\"{sym}\""))
            .replace("SCOPE", &format!("{C}::Scope::Team(team)"));
        func(out, &sym, &args, "i32", &body);
    }
}

/// The 1.4 active-set data movers of `bits`-bit elements.
fn active(out: &mut String, bits: u32) {
    let r = if bits == 32 { "u32" } else { "u64" };
    let set = "pe_start: i32, log_pe_stride: i32, pe_size: i32, psync: *mut i64";
    let scope = format!("{C}::Scope::Active((pe_start, log_pe_stride, pe_size), psync)");
    let d = "dest: *mut std::ffi::c_void, source: *const std::ffi::c_void";
    let cast = format!("dest.cast::<{r}>(), source.cast::<{r}>()");
    let rows = [
        (
            "broadcast",
            format!("{d}, nelems: usize, pe_root: i32, {set}"),
            format!("broadcast(CALL, SCOPE, {cast}, nelems, pe_root, true)"),
        ),
        (
            "collect",
            format!("{d}, nelems: usize, {set}"),
            format!("collect(CALL, SCOPE, {cast}, nelems)"),
        ),
        (
            "fcollect",
            format!("{d}, nelems: usize, {set}"),
            format!("fcollect(CALL, SCOPE, {cast}, nelems)"),
        ),
        (
            "alltoall",
            format!("{d}, nelems: usize, {set}"),
            format!("alltoall(CALL, SCOPE, {cast}, nelems)"),
        ),
        (
            "alltoalls",
            format!("{d}, dst: isize, sst: isize, nelems: usize, {set}"),
            format!("alltoalls(CALL, SCOPE, {cast}, dst, sst, nelems)"),
        ),
    ];
    for (op, args, call) in rows {
        let sym = format!("shmem_{op}{bits}");
        let body = format!("{C}::{call};")
            .replace("CALL", &format!("\"{sym}\""))
            .replace("SCOPE", &scope);
        func(out, &sym, &args, "", &body);
    }
}

/// Every collective entry point.
pub fn all(
    out: &mut String,
    rma: Vec<(String, String)>,
    reduce_bit: Vec<(String, String)>,
    reduce_arith: Vec<(String, String)>,
    to_all_bit: Vec<(String, String)>,
    to_all_arith: Vec<(String, String)>,
) {
    for (c, n) in rma {
        moves(out, &format!("shmem_{n}_"), "", rust(&c));
    }
    moves(out, "shmem_", "mem", "u8");
    active(out, 32);
    active(out, 64);
    let reduce = |out: &mut String, types: &[(String, String)], ops: &[&str]| {
        for (c, n) in types {
            let r = rust(c);
            for op in ops {
                let sym = format!("shmem_{n}_{op}_reduce");
                let v = variant(op);
                func(
                    out,
                    &sym,
                    &format!("team: usize, dest: *mut {r}, source: *const {r}, nreduce: usize"),
                    "i32",
                    &format!(
                        "{R}::typed::<{r}>(\"{sym}\", {C}::Scope::Team(team), dest, source, nreduce, {C}::Op::{v})"
                    ),
                );
            }
        }
    };
    let to_all = |out: &mut String, types: &[(String, String)], ops: &[&str]| {
        for (c, n) in types {
            let r = rust(c);
            for op in ops {
                let sym = format!("shmem_{n}_{op}_to_all");
                let v = variant(op);
                func(
                    out,
                    &sym,
                    &format!(
                        "dest: *mut {r}, source: *const {r}, nreduce: i32, pe_start: i32, log_pe_stride: i32, pe_size: i32, _pwrk: *mut {r}, psync: *mut i64"
                    ),
                    "",
                    &format!(
                        "{R}::typed::<{r}>(\"{sym}\", {C}::Scope::Active((pe_start, log_pe_stride, pe_size), psync), dest, source, {R}::count(\"{sym}\", nreduce), {C}::Op::{v});"
                    ),
                );
            }
        }
    };
    let bit = ["and", "or", "xor"];
    let arith = ["max", "min", "sum", "prod"];
    reduce(out, &reduce_bit, &bit);
    reduce(out, &reduce_arith, &arith);
    to_all(out, &to_all_bit, &bit);
    to_all(out, &to_all_arith, &arith);
}

fn variant(op: &str) -> &'static str {
    match op {
        "and" => "And",
        "or" => "Or",
        "xor" => "Xor",
        "max" => "Max",
        "min" => "Min",
        "sum" => "Sum",
        _ => "Prod",
    }
}
