//! `pld-oshcc`: compiles and links a C program against pld's OpenSHMEM
//! (`shmem.h`, `libpld_shmem`), as `oshcc` does for other implementations.
//!
//! ```text
//! pld-oshcc hello.c -o hello          # CC=clang pld-oshcc ... to pick the compiler
//! pld-oshcc --showme hello.c -o hello # print the command instead
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the header and the library are: `PLD_SHMEM_HOME` (with
/// `include/` and `lib/`), an installed layout next to this binary
/// (`bin/../include`, `bin/../lib`), or the build tree it was built in.
fn locate() -> (PathBuf, PathBuf) {
    if let Some(home) = std::env::var_os("PLD_SHMEM_HOME") {
        let home = PathBuf::from(home);
        return (home.join("include"), home.join("lib"));
    }
    let exe = std::env::current_exe().ok();
    let dir = exe.as_deref().and_then(Path::parent).map(Path::to_path_buf);
    if let Some(d) = &dir
        && let Some(prefix) = d.parent()
        && prefix.join("include/shmem.h").is_file()
        && prefix.join("lib/libpld_shmem.so").is_file()
    {
        return (prefix.join("include"), prefix.join("lib"));
    }
    let include = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("include");
    // In a cargo target dir, `cargo build` copies the library next to this
    // binary, while `cargo test` leaves its fresh build in `deps/`: the
    // newer one is this build's.
    let dir = dir.unwrap_or_default();
    let newest = [dir.clone(), dir.join("deps")]
        .into_iter()
        .filter_map(|d| {
            let modified = d.join("libpld_shmem.so").metadata().ok()?.modified().ok()?;
            Some((modified, d))
        })
        .max_by_key(|(m, _)| *m)
        .map(|(_, d)| d);
    (include, newest.unwrap_or(dir))
}

fn main() -> std::process::ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let showme = args.first().is_some_and(|a| a == "--showme");
    if showme {
        args.remove(0);
    }
    let (include, lib) = locate();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let link = !args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-S" | "-E" | "-M" | "-MM"));
    let mut cmd = vec![cc, format!("-I{}", include.display())];
    cmd.extend(args);
    if link {
        cmd.extend([
            format!("-L{}", lib.display()),
            format!("-Wl,-rpath,{}", lib.display()),
            "-lpld_shmem".into(),
            // Exported symbols name static data in pld's messages.
            "-rdynamic".into(),
        ]);
    }
    if showme {
        println!("{}", cmd.join(" "));
        return std::process::ExitCode::SUCCESS;
    }
    match Command::new(&cmd[0]).args(&cmd[1..]).status() {
        Ok(s) => std::process::ExitCode::from(s.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("pld-oshcc: error: cannot run {}: {e}", cmd[0]);
            std::process::ExitCode::from(2)
        }
    }
}
