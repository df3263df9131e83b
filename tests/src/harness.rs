//! A test runner for test files whose tests need something this machine
//! may not have (root, network namespaces): libtest cannot skip at run
//! time, and a test that returns early is reported `ok` — a pass that
//! proved nothing. With this runner (`harness = false` for the test
//! target), such a test is reported `skipped`, with the reason, in the
//! result line and the summary; under `CI=true` a missing requirement fails
//! the test instead.
//!
//! It takes what `cargo test` passes: name filters, `--exact`, `--list`
//! (`--format terse`, as cargo-nextest asks), `--skip NAME`; other flags
//! are accepted and ignored. Tests run one after another.

/// One test: its name and body.
pub type Test = (String, Box<dyn Fn()>);

/// What the machine lacks for a test file's tests, if anything.
pub type Requirement = fn() -> Option<String>;

/// One test with a requirement of its own: its name, what it needs, its
/// body.
pub type Needing = (String, Requirement, Box<dyn Fn()>);

/// Runs `tests` as `cargo test` asked (see the module docs) and exits:
/// 0 if none failed, 101 (as libtest) otherwise. Where `missing` says
/// what the machine lacks, every test is skipped, saying so — or, under
/// `CI=true`, fails.
pub fn main(missing: Requirement, tests: Vec<Test>) -> ! {
    main_each(
        tests
            .into_iter()
            .map(|(name, body)| (name, missing, body))
            .collect(),
    )
}

/// [`main`] with a requirement of its own for each test.
pub fn main_each(tests: Vec<Needing>) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let mut filters = Vec::new();
    let mut skips = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--skip" => skips.extend(it.next().cloned()),
            // Flags that take a value.
            "--format" | "--test-threads" | "--color" | "-Z" | "--logfile" => {
                it.next();
            }
            f if f.starts_with('-') => {}
            f => filters.push(f.to_string()),
        }
    }
    let matches = |name: &str, f: &str| if exact { name == f } else { name.contains(f) };
    let chosen: Vec<&Needing> = tests
        .iter()
        .filter(|(n, _, _)| filters.is_empty() || filters.iter().any(|f| matches(n, f)))
        .filter(|(n, _, _)| !skips.iter().any(|s| matches(n, s)))
        .collect();
    if args.iter().any(|a| a == "--list") {
        for (n, _, _) in &chosen {
            println!("{n}: test");
        }
        std::process::exit(0);
    }
    let ci = std::env::var("CI").as_deref() == Ok("true");
    println!("\nrunning {} tests", chosen.len());
    let (mut passed, mut failed, mut skipped) = (Vec::new(), Vec::new(), 0);
    for (name, missing, body) in chosen {
        match (missing(), ci) {
            (Some(why), false) => {
                println!("test {name} ... skipped: {why}");
                skipped += 1;
                continue;
            }
            (Some(why), true) => {
                println!("test {name} ... FAILED: CI=true, and {why}");
                failed.push(name.clone());
                continue;
            }
            (None, _) => {}
        }
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).is_ok();
        println!("test {name} ... {}", if ok { "ok" } else { "FAILED" });
        if ok {
            passed.push(name.clone());
        } else {
            failed.push(name.clone());
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:");
        for f in &failed {
            println!("    {f}");
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; {skipped} skipped\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        passed.len(),
        failed.len()
    );
    std::process::exit(if failed.is_empty() { 0 } else { 101 })
}

/// The tests of `body` once over QUIC and once over TCP, named
/// `NAME::quic` and `NAME::tcp` as `both!` names them, each with an
/// overall deadline of `secs`.
pub fn both<F, Fut>(name: &str, secs: u64, body: F) -> Vec<Test>
where
    F: Fn(pld_server::TransportKind) -> Fut + Clone + 'static,
    Fut: std::future::Future<Output = ()>,
{
    use pld_server::TransportKind::{Quic, Tcp};
    [("quic", Quic), ("tcp", Tcp)]
        .into_iter()
        .map(|(suffix, t)| {
            let body = body.clone();
            let run: Box<dyn Fn()> = Box::new(move || {
                crate::run(std::time::Duration::from_secs(secs), body(t));
            });
            (format!("{name}::{suffix}"), run)
        })
        .collect()
}
