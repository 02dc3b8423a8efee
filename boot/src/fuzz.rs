//! `cargo run -- fuzz --calls N --seed S [--threads T] [--smp C]`: a long run
//! of the system-call fuzzer (`user/src/bin/fuzz.rs`).
//!
//! It boots the kernel with `exec=fuzz:S,N,T`, shows the output as it
//! arrives, and ends with a verdict: the fuzzer's summary, or, on any
//! failure (a `fuzz: FAIL` line, a kernel crash report, a hang), the seed,
//! the command that replays the run, and the fuzzer's last lines.

use std::{process::ExitCode, time::Duration};

use clap::Args;

use crate::machine::{self, Config, Echo, Outcome, Run};

/// A generous time budget per call: under TCG on two busy host cores a
/// call takes about half a millisecond; the budget is ten times that.
const BUDGET_PER_CALL: Duration = Duration::from_millis(5);
/// Boot and bring-up, on top of the calls.
const BUDGET_BASE: Duration = Duration::from_secs(120);
/// The fuzzer prints a progress line every 10 000 calls per thread; this
/// much silence means a hang.
const STALL: Duration = Duration::from_secs(120);

/// Run the system-call fuzzer: seeded hostile system calls from several
/// threads on several CPUs.
#[derive(Debug, Args)]
pub struct FuzzArgs {
    /// How many system calls in total.
    #[arg(long, default_value_t = 1_000_000)]
    calls: u64,
    /// The seed of the random sequence; the same seed replays the same calls.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Threads making calls at once (each pinned to its own CPU if there
    /// are enough).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=8))]
    threads: u32,
    /// Number of CPUs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    smp: u32,
    /// Kill the run after this many seconds [default: 120 + 5 ms per call].
    #[arg(long)]
    timeout: Option<u64>,
}

impl FuzzArgs {
    fn replay_command(&self) -> String {
        format!(
            "cargo run -- fuzz --calls {} --seed {} --threads {} --smp {}",
            self.calls, self.seed, self.threads, self.smp
        )
    }
}

/// Runs the fuzzer as `args` says and reports the verdict.
pub fn main(args: FuzzArgs) -> ExitCode {
    let timeout = args.timeout.map_or_else(
        || BUDGET_BASE + BUDGET_PER_CALL * u32::try_from(args.calls).unwrap_or(u32::MAX),
        Duration::from_secs,
    );
    let config = Config {
        echo: Echo::Everything,
        ..Config::default()
            .cpus(args.smp)
            .cmdline(format!(
                "exec=fuzz:{},{},{}",
                args.seed, args.calls, args.threads
            ))
            .timeout(timeout)
            .stall_timeout(STALL)
    };
    eprintln!(
        "fuzz: seed {}, {} calls, {} threads on {} CPUs, time limit {} s",
        args.seed,
        args.calls,
        args.threads,
        args.smp,
        timeout.as_secs()
    );
    let run = match machine::run(&config) {
        Ok(run) => run,
        Err(error) => {
            eprintln!("fuzz: {error}");
            return ExitCode::FAILURE;
        }
    };
    if passed(&run) {
        let seconds = run.elapsed.as_secs_f64();
        eprintln!(
            "fuzz: passed: seed {}, {} calls in {seconds:.0} s ({:.0} calls/s, boot included)",
            args.seed,
            args.calls,
            args.calls as f64 / seconds
        );
        return ExitCode::SUCCESS;
    }
    report_failure(&args, &run);
    ExitCode::FAILURE
}

/// What a failed run says: how it ended, how to replay it, and the
/// fuzzer's last lines.
fn report_failure(args: &FuzzArgs, run: &Run) {
    eprintln!("fuzz: FAILED: {}", run.ending());
    eprintln!(
        "fuzz: seed {}; replay with `{}`",
        args.seed,
        args.replay_command()
    );
    let fuzz_lines: Vec<&String> = run
        .serial
        .iter()
        .filter(|line| line.starts_with("fuzz:"))
        .collect();
    let skip = fuzz_lines.len().saturating_sub(12);
    eprintln!(
        "fuzz: the fuzzer's last lines (a kernel crash report above names the last system call on each CPU):"
    );
    for line in &fuzz_lines[skip..] {
        eprintln!("  | {line}");
    }
}

/// The fuzzer finished, exited 0 and the kernel reported success.
fn passed(run: &Run) -> bool {
    run.outcome == Outcome::Success
        && run.printed("fuzz: done, seed ")
        && run.printed("exec: fuzz (pid 1) exited with 0")
}
