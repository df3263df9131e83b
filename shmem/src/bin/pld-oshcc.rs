//! `pld-oshcc`: compiles and links a C program against pld's OpenSHMEM
//! (`shmem.h`, `libpld_shmem`), as `oshcc` does for other implementations.
//!
//! ```text
//! pld-oshcc hello.c -o hello                 # PLD_OSHCC_CC=clang to pick the compiler
//! pld-oshcc --showme hello.c -o hello        # print the command instead
//! CC=pld-oshcc make; CC=pld-oshcc cmake ..   # how build systems are pointed at it
//! ```
//!
//! The underlying compiler is `PLD_OSHCC_CC` (default `cc`), never `CC`:
//! `CC=pld-oshcc` is how every build system is told to use the wrapper,
//! and a wrapper that ran `$CC` would run itself, without end (as Open
//! MPI's wrappers read `OMPI_CC`, not `CC`). A chain that comes back to
//! pld-oshcc anyway — `PLD_OSHCC_CC` naming it, a link to it, or a script
//! that calls it — is refused with a message, never followed.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable that names the underlying compiler.
const COMPILER_VAR: &str = "PLD_OSHCC_CC";

/// Set in the underlying compiler's environment: a pld-oshcc that finds
/// it was started by the compiler it started, through some chain.
const RUNNING_VAR: &str = "PLD_OSHCC_RUNNING";

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

/// `name` as the shell finds it: a path as given, a bare name on `PATH`.
fn resolve(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Why `compiler` cannot be the underlying compiler, if it is pld-oshcc
/// itself (by path, through links).
fn loops_back(compiler: &str) -> Option<String> {
    let me = std::env::current_exe().ok()?.canonicalize().ok()?;
    let it = resolve(compiler)?.canonicalize().ok()?;
    (it == me).then(|| {
        format!(
            "{COMPILER_VAR}={compiler} is pld-oshcc itself ({}), which would run itself without end; set {COMPILER_VAR} to a C compiler (cc, gcc, clang)",
            me.display()
        )
    })
}

fn fail(msg: &str) -> std::process::ExitCode {
    eprintln!("pld-oshcc: error: {msg}");
    std::process::ExitCode::from(2)
}

fn main() -> std::process::ExitCode {
    let compiler = std::env::var(COMPILER_VAR)
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    if let Some(outer) = std::env::var_os(RUNNING_VAR) {
        return fail(&format!(
            "pld-oshcc was started by the compiler it runs ({}, {COMPILER_VAR}={}): a chain back to itself, refused instead of run without end; set {COMPILER_VAR} to a C compiler (cc, gcc, clang) that is not a wrapper around pld-oshcc",
            outer.to_string_lossy(),
            compiler
        ));
    }
    if let Some(why) = loops_back(&compiler) {
        return fail(&why);
    }
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let showme = args.first().is_some_and(|a| a == "--showme");
    if showme {
        args.remove(0);
    }
    let (include, lib) = locate();
    let link = !args
        .iter()
        .any(|a| matches!(a.as_str(), "-c" | "-S" | "-E" | "-M" | "-MM"));
    let mut cmd = vec![compiler, format!("-I{}", include.display())];
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
    let me = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "pld-oshcc".into());
    match Command::new(&cmd[0])
        .args(&cmd[1..])
        .env(RUNNING_VAR, me)
        .status()
    {
        Ok(s) => std::process::ExitCode::from(s.code().unwrap_or(1).clamp(0, 255) as u8),
        Err(e) => fail(&format!(
            "cannot run {} ({COMPILER_VAR}, default cc): {e}",
            cmd[0]
        )),
    }
}
