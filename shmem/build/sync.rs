//! The generated entry points of point-to-point synchronization
//! (`wait_until`, `test` and their set forms): part of `build.rs`, in its own file to keep each under 500 lines.

use super::{func, rust};

/// `shmem_T_wait_until`, `shmem_T_test` and their set and vector forms.
pub fn p2p(out: &mut String, types: Vec<(String, String)>) {
    for (c, n) in types {
        let r = rust(&c);
        let s = format!("shmem_{n}");
        let w = "crate::capi::wait";
        let set = format!("ivars: *mut {r}, nelems: usize, status: *const i32, cmp: i32");
        let some = format!(
            "ivars: *mut {r}, nelems: usize, indices: *mut usize, status: *const i32, cmp: i32"
        );
        let one = format!("{w}::Values::One(cmp_value)");
        let vec = format!("{w}::Values::Each(cmp_values)");
        let rows: [(&str, String, &str, String); 15] = [
            (
                "wait_until",
                format!("ivar: *mut {r}, cmp: i32, cmp_value: {r}"),
                "",
                format!("{w}::wait_until(\"{s}_wait_until\", ivar, cmp, cmp_value)"),
            ),
            (
                "wait_until_all",
                format!("{set}, cmp_value: {r}"),
                "",
                format!(
                    "{w}::wait_set(\"{s}_wait_until_all\", ivars, nelems, status, std::ptr::null_mut(), cmp, {one}, {w}::Want::All);"
                ),
            ),
            (
                "wait_until_any",
                format!("{set}, cmp_value: {r}"),
                "usize",
                format!(
                    "{w}::wait_set(\"{s}_wait_until_any\", ivars, nelems, status, std::ptr::null_mut(), cmp, {one}, {w}::Want::Any)"
                ),
            ),
            (
                "wait_until_some",
                format!("{some}, cmp_value: {r}"),
                "usize",
                format!(
                    "{w}::wait_set(\"{s}_wait_until_some\", ivars, nelems, status, indices, cmp, {one}, {w}::Want::Some)"
                ),
            ),
            (
                "wait_until_all_vector",
                format!("{set}, cmp_values: *mut {r}"),
                "",
                format!(
                    "{w}::wait_set(\"{s}_wait_until_all_vector\", ivars, nelems, status, std::ptr::null_mut(), cmp, {vec}, {w}::Want::All);"
                ),
            ),
            (
                "wait_until_any_vector",
                format!("{set}, cmp_values: *mut {r}"),
                "usize",
                format!(
                    "{w}::wait_set(\"{s}_wait_until_any_vector\", ivars, nelems, status, std::ptr::null_mut(), cmp, {vec}, {w}::Want::Any)"
                ),
            ),
            (
                "wait_until_some_vector",
                format!("{some}, cmp_values: *mut {r}"),
                "usize",
                format!(
                    "{w}::wait_set(\"{s}_wait_until_some_vector\", ivars, nelems, status, indices, cmp, {vec}, {w}::Want::Some)"
                ),
            ),
            (
                "test",
                format!("ivar: *mut {r}, cmp: i32, cmp_value: {r}"),
                "i32",
                format!("{w}::test(\"{s}_test\", ivar, cmp, cmp_value)"),
            ),
            (
                "test_all",
                format!("{set}, cmp_value: {r}"),
                "i32",
                format!(
                    "{w}::test_set(\"{s}_test_all\", ivars, nelems, status, std::ptr::null_mut(), cmp, {one}, {w}::Want::All) as i32"
                ),
            ),
            (
                "test_any",
                format!("{set}, cmp_value: {r}"),
                "usize",
                format!(
                    "{w}::test_set(\"{s}_test_any\", ivars, nelems, status, std::ptr::null_mut(), cmp, {one}, {w}::Want::Any)"
                ),
            ),
            (
                "test_some",
                format!("{some}, cmp_value: {r}"),
                "usize",
                format!(
                    "{w}::test_set(\"{s}_test_some\", ivars, nelems, status, indices, cmp, {one}, {w}::Want::Some)"
                ),
            ),
            (
                "test_all_vector",
                format!("{set}, cmp_values: *mut {r}"),
                "i32",
                format!(
                    "{w}::test_set(\"{s}_test_all_vector\", ivars, nelems, status, std::ptr::null_mut(), cmp, {vec}, {w}::Want::All) as i32"
                ),
            ),
            (
                "test_any_vector",
                format!("{set}, cmp_values: *mut {r}"),
                "usize",
                format!(
                    "{w}::test_set(\"{s}_test_any_vector\", ivars, nelems, status, std::ptr::null_mut(), cmp, {vec}, {w}::Want::Any)"
                ),
            ),
            (
                "test_some_vector",
                format!("{some}, cmp_values: *mut {r}"),
                "usize",
                format!(
                    "{w}::test_set(\"{s}_test_some_vector\", ivars, nelems, status, indices, cmp, {vec}, {w}::Want::Some)"
                ),
            ),
            (
                "wait",
                format!("ivar: *mut {r}, cmp_value: {r}"),
                "",
                format!(
                    "{w}::wait_until(\"{s}_wait\", ivar, crate::capi::wait::CMP_NE, cmp_value)"
                ),
            ),
        ];
        for (op, args, ret, call) in rows {
            func(out, &format!("{s}_{op}"), &args, ret, &call);
        }
    }
}
