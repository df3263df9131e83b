//! Generates the typed OpenSHMEM entry points (`shmem_long_put`,
//! `shmem_int_atomic_fetch_add`, ...) from the type tables of
//! `include/shmem.h`, so that a type is listed once: in the header, which
//! declares them from the same tables.

#[path = "build/coll.rs"]
mod coll;
#[path = "build/sync.rs"]
mod sync;

/// The tables of the header: name -> [(C type, type name)].
fn tables(header: &str) -> std::collections::HashMap<String, Vec<(String, String)>> {
    let mut out = std::collections::HashMap::new();
    let mut current: Option<(String, Vec<(String, String)>)> = None;
    for line in header.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("#define PLD_SHMEM_")
            && let Some(name) = rest.strip_suffix("(X) \\")
        {
            current = Some((name.to_string(), Vec::new()));
            continue;
        }
        let Some((_, entries)) = current.as_mut() else {
            continue;
        };
        let body = t.trim_end_matches('\\').trim();
        for item in body.split("X(").skip(1) {
            let inner = item.trim().trim_end_matches(')').trim_end_matches(')');
            let Some((ty, name)) = inner.split_once(',') else {
                continue;
            };
            entries.push((
                ty.trim().to_string(),
                name.trim().trim_end_matches(')').to_string(),
            ));
        }
        if !t.ends_with('\\')
            && let Some((name, entries)) = current.take()
        {
            out.insert(name, entries);
        }
    }
    out
}

/// The Rust type of a C type (LP64).
fn rust(c: &str) -> &'static str {
    match c {
        "float" => "f32",
        "double" => "f64",
        "long double" => "crate::capi::LongDouble",
        "char" => "std::ffi::c_char",
        "signed char" | "int8_t" => "i8",
        "short" | "int16_t" => "i16",
        "int" | "int32_t" => "i32",
        "long" | "long long" | "int64_t" => "i64",
        "unsigned char" | "uint8_t" => "u8",
        "unsigned short" | "uint16_t" => "u16",
        "unsigned int" | "uint32_t" => "u32",
        "unsigned long" | "unsigned long long" | "uint64_t" => "u64",
        "size_t" => "usize",
        "ptrdiff_t" => "isize",
        other => panic!("shmem.h lists a type build.rs does not know: {other}"),
    }
}

/// One exported function: `shmem_{name}_{op}` with `args`, returning `ret`,
/// whose body calls `call`.
fn func(out: &mut String, sym: &str, args: &str, ret: &str, call: &str) {
    let ret = if ret.is_empty() {
        String::new()
    } else {
        format!(" -> {ret}")
    };
    out.push_str(&format!(
        "/// OpenSHMEM's `{sym}` (docs/shmem.md).\n///\n/// # Safety\n/// The pointers are as OpenSHMEM requires: valid for the elements named.\n#[unsafe(no_mangle)]\npub unsafe extern \"C\" fn {sym}({args}){ret} {{\n    // SAFETY: the caller's contract, passed on.\n    unsafe {{ {call} }}\n}}\n"
    ));
}

/// [`func`], and its `shmem_ctx_` twin: the same call with a context
/// first, run with that context current (`crate::capi::ctx::with`).
fn func_ctx(out: &mut String, sym: &str, args: &str, ret: &str, call: &str) {
    func(out, sym, args, ret, call);
    let ctx_sym = sym.replacen("shmem_", "shmem_ctx_", 1);
    let call = call.replace(&format!("\"{sym}\""), &format!("\"{ctx_sym}\""));
    func(
        out,
        &ctx_sym,
        &format!("ctx: usize, {args}"),
        ret,
        &format!("crate::capi::ctx::with(\"{ctx_sym}\", ctx, || unsafe {{ {call} }})"),
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let header_path = "include/shmem.h";
    println!("cargo:rerun-if-changed={header_path}");
    let header = std::fs::read_to_string(header_path)?;
    let t = tables(&header);
    let get = |n: &str| {
        t.get(n)
            .unwrap_or_else(|| panic!("table {n} in shmem.h"))
            .clone()
    };
    let both = |a: &str, b: &str| [get(a), get(b)].concat();
    let mut out = String::new();
    let pe = "pe: i32";
    for (c, n) in both("RMA_BASE_TYPES", "RMA_ALIAS_TYPES") {
        let r = rust(&c);
        let s = format!("shmem_{n}");
        let d = format!("dest: *mut {r}, source: *const {r}");
        func_ctx(
            &mut out,
            &format!("{s}_put"),
            &format!("{d}, nelems: usize, {pe}"),
            "",
            &format!(
                "crate::capi::rma::put(\"{s}_put\", dest.cast(), source.cast(), nelems * size_of::<{r}>(), pe, false)"
            ),
        );
        func_ctx(
            &mut out,
            &format!("{s}_put_nbi"),
            &format!("{d}, nelems: usize, {pe}"),
            "",
            &format!(
                "crate::capi::rma::put(\"{s}_put_nbi\", dest.cast(), source.cast(), nelems * size_of::<{r}>(), pe, true)"
            ),
        );
        func_ctx(
            &mut out,
            &format!("{s}_get"),
            &format!("{d}, nelems: usize, {pe}"),
            "",
            &format!(
                "crate::capi::rma::get(\"{s}_get\", dest.cast(), source.cast(), nelems * size_of::<{r}>(), pe, false)"
            ),
        );
        func_ctx(
            &mut out,
            &format!("{s}_get_nbi"),
            &format!("{d}, nelems: usize, {pe}"),
            "",
            &format!(
                "crate::capi::rma::get(\"{s}_get_nbi\", dest.cast(), source.cast(), nelems * size_of::<{r}>(), pe, true)"
            ),
        );
        let strided = format!("{d}, dst: isize, sst: isize, nelems: usize, {pe}");
        func_ctx(
            &mut out,
            &format!("{s}_iput"),
            &strided,
            "",
            &format!(
                "crate::capi::rma::iput(\"{s}_iput\", dest.cast(), source.cast(), dst, sst, nelems, size_of::<{r}>(), pe)"
            ),
        );
        func_ctx(
            &mut out,
            &format!("{s}_iget"),
            &strided,
            "",
            &format!(
                "crate::capi::rma::iget(\"{s}_iget\", dest.cast(), source.cast(), dst, sst, nelems, size_of::<{r}>(), pe)"
            ),
        );
        let sig = format!("{d}, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: i32, {pe}");
        for (suffix, nbi) in [("", false), ("_nbi", true)] {
            func_ctx(
                &mut out,
                &format!("{s}_put_signal{suffix}"),
                &sig,
                "",
                &format!(
                    "crate::capi::signal::put_signal(\"{s}_put_signal{suffix}\", dest.cast(), source.cast(), nelems * size_of::<{r}>(), sig_addr, signal, sig_op, pe, {nbi})"
                ),
            );
        }
        if c != "long double" {
            func_ctx(
                &mut out,
                &format!("{s}_p"),
                &format!("dest: *mut {r}, value: {r}, {pe}"),
                "",
                &format!("crate::capi::rma::p(\"{s}_p\", dest, value, pe)"),
            );
            func_ctx(
                &mut out,
                &format!("{s}_g"),
                &format!("source: *const {r}, {pe}"),
                r,
                &format!("crate::capi::rma::g(\"{s}_g\", source, pe)"),
            );
        }
    }
    let d = "dest: *mut std::ffi::c_void, source: *const std::ffi::c_void";
    for (op, nbi) in [("put", false), ("get", false), ("put", true), ("get", true)] {
        let sym = format!("shmem_{op}mem{}", if nbi { "_nbi" } else { "" });
        func_ctx(
            &mut out,
            &sym,
            &format!("{d}, nelems: usize, {pe}"),
            "",
            &format!(
                "crate::capi::rma::{op}(\"{sym}\", dest.cast(), source.cast(), nelems, pe, {nbi})"
            ),
        );
    }
    for (suffix, nbi) in [("", false), ("_nbi", true)] {
        let sym = format!("shmem_putmem_signal{suffix}");
        func_ctx(
            &mut out,
            &sym,
            &format!("{d}, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: i32, {pe}"),
            "",
            &format!(
                "crate::capi::signal::put_signal(\"{sym}\", dest.cast(), source.cast(), nelems, sig_addr, signal, sig_op, pe, {nbi})"
            ),
        );
    }
    for bits in [8, 16, 32, 64, 128] {
        let n = bits / 8;
        let d = "dest: *mut std::ffi::c_void, source: *const std::ffi::c_void";
        for (op, f, nbi) in [
            ("put", "put", false),
            ("get", "get", false),
            ("put", "put", true),
            ("get", "get", true),
        ] {
            let sym = format!("shmem_{op}{bits}{}", if nbi { "_nbi" } else { "" });
            func_ctx(
                &mut out,
                &sym,
                &format!("{d}, nelems: usize, {pe}"),
                "",
                &format!(
                    "crate::capi::rma::{f}(\"{sym}\", dest.cast(), source.cast(), nelems * {n}, pe, {nbi})"
                ),
            );
        }
        for op in ["iput", "iget"] {
            let sym = format!("shmem_{op}{bits}");
            func_ctx(
                &mut out,
                &sym,
                &format!("{d}, dst: isize, sst: isize, nelems: usize, {pe}"),
                "",
                &format!(
                    "crate::capi::rma::{op}(\"{sym}\", dest.cast(), source.cast(), dst, sst, nelems, {n}, pe)"
                ),
            );
        }
        for (suffix, nbi) in [("", false), ("_nbi", true)] {
            let sym = format!("shmem_put{bits}_signal{suffix}");
            func_ctx(
                &mut out,
                &sym,
                &format!("{d}, nelems: usize, sig_addr: *mut u64, signal: u64, sig_op: i32, {pe}"),
                "",
                &format!(
                    "crate::capi::signal::put_signal(\"{sym}\", dest.cast(), source.cast(), nelems * {n}, sig_addr, signal, sig_op, pe, {nbi})"
                ),
            );
        }
    }
    let amo = |out: &mut String, n: &str, r: &str, ops: &[(&str, &str, &str, &str)]| {
        for (op, args, ret, call) in ops {
            let sym = format!("shmem_{n}_atomic_{op}");
            let args = args.replace("T", r);
            let ret = ret.replace("T", r);
            let call = call.replace("SYM", &sym).replace("T", r);
            func_ctx(out, &sym, &args, &ret, &call);
        }
    };
    let std_ops: &[(&str, &str, &str, &str)] = &[
        (
            "compare_swap",
            "dest: *mut T, cond: T, value: T, pe: i32",
            "T",
            "crate::capi::amo::compare_swap::<T>(\"SYM\", dest, cond, value, pe)",
        ),
        (
            "fetch_inc",
            "dest: *mut T, pe: i32",
            "T",
            "crate::capi::amo::fetch_add::<T>(\"SYM\", dest, crate::capi::amo::Amo::ONE, pe)",
        ),
        (
            "inc",
            "dest: *mut T, pe: i32",
            "",
            "crate::capi::amo::add::<T>(\"SYM\", dest, crate::capi::amo::Amo::ONE, pe)",
        ),
        (
            "fetch_add",
            "dest: *mut T, value: T, pe: i32",
            "T",
            "crate::capi::amo::fetch_add::<T>(\"SYM\", dest, value, pe)",
        ),
        (
            "add",
            "dest: *mut T, value: T, pe: i32",
            "",
            "crate::capi::amo::add::<T>(\"SYM\", dest, value, pe)",
        ),
        (
            "compare_swap_nbi",
            "fetch: *mut T, dest: *mut T, cond: T, value: T, pe: i32",
            "",
            "crate::capi::amo::compare_swap_nbi::<T>(\"SYM\", fetch, dest, cond, value, pe)",
        ),
        (
            "fetch_inc_nbi",
            "fetch: *mut T, dest: *mut T, pe: i32",
            "",
            "crate::capi::amo::fetch_add_nbi::<T>(\"SYM\", fetch, dest, crate::capi::amo::Amo::ONE, pe)",
        ),
        (
            "fetch_add_nbi",
            "fetch: *mut T, dest: *mut T, value: T, pe: i32",
            "",
            "crate::capi::amo::fetch_add_nbi::<T>(\"SYM\", fetch, dest, value, pe)",
        ),
    ];
    let ext_ops: &[(&str, &str, &str, &str)] = &[
        (
            "fetch",
            "source: *const T, pe: i32",
            "T",
            "crate::capi::amo::cell::<T>(\"SYM\", source.cast_mut(), crate::capi::amo::Cell::Fetch, pe)",
        ),
        (
            "set",
            "dest: *mut T, value: T, pe: i32",
            "",
            "crate::capi::amo::cell_nbi::<T>(\"SYM\", dest, crate::capi::amo::Cell::Set(value), pe)",
        ),
        (
            "swap",
            "dest: *mut T, value: T, pe: i32",
            "T",
            "crate::capi::amo::cell::<T>(\"SYM\", dest, crate::capi::amo::Cell::Swap(value), pe)",
        ),
        (
            "fetch_nbi",
            "fetch: *mut T, source: *const T, pe: i32",
            "",
            "crate::capi::amo::cell_fetch_nbi::<T>(\"SYM\", fetch, source.cast_mut(), crate::capi::amo::Cell::Fetch, pe)",
        ),
        (
            "swap_nbi",
            "fetch: *mut T, dest: *mut T, value: T, pe: i32",
            "",
            "crate::capi::amo::cell_fetch_nbi::<T>(\"SYM\", fetch, dest, crate::capi::amo::Cell::Swap(value), pe)",
        ),
    ];
    let mut bit_ops: Vec<(String, String, String, String)> = Vec::new();
    for (b, variant) in [("and", "And"), ("or", "Or"), ("xor", "Xor")] {
        let bit = format!("crate::capi::amo::Cell::Bit(pld_proto::BitOp::{variant}, value)");
        bit_ops.push((
            format!("fetch_{b}"),
            "dest: *mut T, value: T, pe: i32".into(),
            "T".into(),
            format!("crate::capi::amo::cell::<T>(\"SYM\", dest, {bit}, pe)"),
        ));
        bit_ops.push((
            b.into(),
            "dest: *mut T, value: T, pe: i32".into(),
            "".into(),
            format!("crate::capi::amo::cell_nbi::<T>(\"SYM\", dest, {bit}, pe)"),
        ));
        bit_ops.push((
            format!("fetch_{b}_nbi"),
            "fetch: *mut T, dest: *mut T, value: T, pe: i32".into(),
            "".into(),
            format!("crate::capi::amo::cell_fetch_nbi::<T>(\"SYM\", fetch, dest, {bit}, pe)"),
        ));
    }
    let bit_ops: Vec<(&str, &str, &str, &str)> = bit_ops
        .iter()
        .map(|(a, b, c, d)| (a.as_str(), b.as_str(), c.as_str(), d.as_str()))
        .collect();
    for (c, n) in both("AMO_BASE_TYPES", "AMO_ALIAS_TYPES") {
        amo(&mut out, &n, rust(&c), std_ops);
        amo(&mut out, &n, rust(&c), ext_ops);
    }
    for (c, n) in get("AMO_EXT_TYPES") {
        amo(&mut out, &n, rust(&c), ext_ops);
    }
    for (c, n) in both("AMO_BIT_BASE_TYPES", "AMO_BIT_ALIAS_TYPES") {
        amo(&mut out, &n, rust(&c), &bit_ops);
    }
    sync::p2p(&mut out, both("P2P_BASE_TYPES", "P2P_ALIAS_TYPES"));
    coll::all(
        &mut out,
        both("RMA_BASE_TYPES", "RMA_ALIAS_TYPES"),
        get("REDUCE_BIT_TYPES"),
        get("REDUCE_ARITH_TYPES"),
        get("TO_ALL_BIT_TYPES"),
        get("TO_ALL_ARITH_TYPES"),
    );
    let dir = std::env::var("OUT_DIR")?;
    std::fs::write(format!("{dir}/typed.rs"), out)?;
    Ok(())
}
