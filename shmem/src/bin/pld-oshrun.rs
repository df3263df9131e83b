//! `pld-oshrun`: runs an OpenSHMEM program as N PEs on this host over pld.
//!
//! ```text
//! pld-oshrun -np 4 ./hello
//! pld-oshrun -np 2 --transport tcp --checked --timeout 10s ./ring 1000
//! ```

use clap::Parser;

/// Runs PROGRAM as N OpenSHMEM PEs on this host, each embedding a pld rank,
/// under a throwaway cluster CA (mutual TLS). Output is forwarded; the
/// first non-zero exit status (or shmem_global_exit's) is returned and the
/// other PEs are stopped at once. Across hosts, start each PE with
/// PLD_RANK, PLD_PEERS and PLD_TLS_DIR instead (docs/shmem.md).
#[derive(Debug, Parser)]
#[command(name = "pld-oshrun", version)]
struct Cli {
    /// How many PEs.
    #[arg(short = 'n', long = "np", alias = "n")]
    np: u32,
    /// The peer-plane transport.
    #[arg(long, default_value = "quic", value_parser = ["quic", "tcp"])]
    transport: String,
    /// Report unordered accesses (races); =strict also refuses them.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "on", default_value = "off", value_parser = ["off", "on", "strict"])]
    checked: String,
    /// How each PE waits for the network: sleep (kind to a shared host) or
    /// spin (busy-poll while there is traffic: the lowest latency).
    #[arg(long, default_value = "sleep", value_parser = ["sleep", "spin"])]
    progress: String,
    /// Whether the PEs share their heaps' memory (puts, gets and atomics on
    /// the heap become copies and CPU atomics), or reach each other only
    /// over the network. Off under --checked.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    shared_memory: String,
    /// Bind each PE's program thread to a core (its index among this
    /// host's PEs, modulo the cores this launcher may use), as mpirun
    /// binds: a PE that waits for another then yields to a known one, and
    /// nothing migrates; none leaves placement to the scheduler.
    #[arg(long, default_value = "core", value_parser = ["core", "none"])]
    bind_to: String,
    /// How long any wait or barrier may take before it fails naming what is
    /// missing (ms, s, m).
    #[arg(long, value_parser = pld_proto::units::parse_duration)]
    timeout: Option<std::time::Duration>,
    /// Write the job's timeline — each PE's ops over pld's links, its
    /// barriers and waits, races — to FILE as Chrome trace-event JSON
    /// (ui.perfetto.dev). Through shared memory a heap put or get is a
    /// CPU copy and not on it: --shared-memory off shows every op.
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
    /// The program and its arguments.
    /// (An unknown flag before it is refused as one, not run as the
    /// program: a program whose name starts with '-' is `./-name`.)
    #[arg(trailing_var_arg = true, required = true)]
    program: Vec<String>,
}

/// Whether `a` is the value of the flag before it (`--transport tcp`).
fn is_value(args: &[String], a: &str) -> bool {
    let at = args.iter().position(|x| x == a).unwrap_or(0);
    at > 0
        && matches!(
            args[at - 1].as_str(),
            "--transport"
                | "--timeout"
                | "--np"
                | "-n"
                | "--progress"
                | "--checked"
                | "--shared-memory"
                | "--bind-to"
                | "--trace"
        )
}

fn main() -> std::process::ExitCode {
    // `-np N`, as every launcher spells it, is `--np N` to clap (which
    // would read `-np` as `-n p`). Only before the program: its own
    // arguments pass as they are.
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "-np")
        && !args[1..i]
            .iter()
            .any(|a| !a.starts_with('-') && !is_value(&args, a))
    {
        args[i] = "--np".into();
    }
    let cli = Cli::parse_from(args);
    let job = pld_shmem::launch::Job {
        npes: cli.np,
        transport: cli.transport,
        checked: cli.checked,
        progress: cli.progress,
        shared_memory: cli.shared_memory,
        bind: cli.bind_to,
        timeout: cli.timeout,
        program: cli.program,
        trace: cli.trace,
    };
    match pld_shmem::launch::run(&job) {
        // What exit(code) gives the parent: the low 8 bits (exit(-1) is
        // 255, a failure — never clamped to 0, a success).
        Ok(code) => std::process::ExitCode::from((code & 0xff) as u8),
        Err(e) => {
            eprintln!("pld-oshrun: error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
