//! `cargo run --release -- bench <workload> [options]`: the benchmarks.
//!
//! A benchmark boots the kernel once per configuration and repeat, each
//! time running one workload program with `exec=`, reads the numbers the
//! program and the kernel print at the end, and prints tables (Markdown),
//! optionally a CSV file of every run and an SVG plot. See
//! `docs/BENCHMARKS.md` for the measured tables and what they mean.
//!
//! - `tlb_flush2`: will-it-scale's `tlb_flush2` in threads or processes
//!   mode, task counts × TLB modes (the broadcast-ASID seed's table);
//! - `pageout`: the reclaim loop, batched against per-page flushes (the
//!   batched-flush seed's benchmark), with sleeping or busy helpers.
//!
//! The parts: `plan` (the grid of runs and their interleaved order),
//! `runs` (booting and parsing, with a progress line), `stats`
//! (median and spread), `table`, `csv` and `svg` (the outputs), and
//! `profiles` (`--profile`: the kernel's profiles of each cell, added up).
//!
//! Benchmarks are not tests: nothing here judges a time. A run fails only
//! if the kernel or the program reports a failure, or the numbers cannot
//! be right (no iterations counted).

mod against;
mod csv;
mod pageout;
mod plan;
mod profiles;
mod runs;
mod stats;
mod svg;
mod table;
mod tlb_flush2;

use std::{path::PathBuf, process::ExitCode};

use clap::{Args, Subcommand, ValueEnum};

use crate::cli::MachineArgs;
use plan::{Plan, Sample};

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// will-it-scale tlb_flush2: tasks write, discard (madvise DONTNEED)
    /// and re-read their own pages; total iterations/s per task count and
    /// TLB mode.
    #[command(name = "tlb_flush2")]
    TlbFlush2(tlb_flush2::TlbFlush2Args),
    /// The reclaim loop: touch 1 MiB, madvise(PAGEOUT) it, again; time and
    /// IPIs per loop with batched and per-page flushes.
    Pageout(pageout::PageoutArgs),
}

/// A TLB mode to compare (the kernel's `tlb=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TlbMode {
    /// Targeted IPIs only.
    Ipi,
    /// Global ASIDs for processes on 4+ CPUs, flushed by a software
    /// broadcast.
    BroadcastSw,
    /// Global ASIDs flushed by INVLPGB/TLBSYNC: needs a CPU with INVLPGB
    /// (the patched QEMU of `.ci/qemu-invlpgb` with `--cpu
    /// EPYC-Milan,+invlpgb`); elsewhere the kernel refuses the mode.
    Invlpgb,
}

impl TlbMode {
    /// The value of `tlb=`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ipi => "ipi",
            Self::BroadcastSw => "broadcast-sw",
            Self::Invlpgb => "invlpgb",
        }
    }
}

/// An address-space locking discipline (`vm.lock=`, see
/// `kernel::vm_lock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VmLock {
    /// Faults and discards share the address space; flushes outside the
    /// lock; waiters block.
    Fine,
    /// One spinning lock per address space, held across every shootdown.
    Coarse,
}

impl VmLock {
    /// The value of `vm.lock=`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fine => "fine",
            Self::Coarse => "coarse",
        }
    }
}

/// Options every benchmark takes.
#[derive(Debug, Args)]
pub struct CommonArgs {
    /// Boots per configuration (the tables show the median and min..max).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=1000))]
    repeat: u16,
    /// Also write every run's numbers to this CSV file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    #[command(flatten)]
    machine: MachineArgs,
    /// Run the kernel's sampling profiler in every run (profile=on) and
    /// print, per configuration, the profiles of its runs added up.
    #[arg(long)]
    profile: bool,
    /// More kernel options for every run (key=value, e.g. tlb.promote=2).
    #[arg(value_name = "KERNEL OPTIONS")]
    kernel_options: Vec<String>,
}

impl CommonArgs {
    /// The extra kernel options as one string; refuses words that are not
    /// `key=value` and the options the benchmark sets itself.
    fn kernel_options(&self, reserved: &[&str]) -> Result<String, String> {
        for word in &self.kernel_options {
            let Some((key, _)) = word.split_once('=') else {
                return Err(format!(
                    "'{word}' is not a kernel option (key=value); see `cargo run -- --help`"
                ));
            };
            if reserved.contains(&key) {
                return Err(format!(
                    "the benchmark sets {key}= itself; use its own options instead"
                ));
            }
            if key == "profile" && self.profile {
                return Err(format!(
                    "--profile sets profile=on; give '{word}' without --profile instead"
                ));
            }
        }
        let mut options = self.kernel_options.clone();
        if self.profile {
            options.push(String::from("profile=on"));
        }
        Ok(options.join(" "))
    }
}

/// Rejects a list that names the same value twice.
fn distinct<T: PartialEq>(
    option: &str,
    values: &[T],
    name: impl Fn(&T) -> String,
) -> Result<(), String> {
    for (index, value) in values.iter().enumerate() {
        if values[..index].contains(value) {
            return Err(format!("--{option} lists {} twice", name(value)));
        }
    }
    Ok(())
}

/// Seconds as a command-line value: a positive number up to an hour.
fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if (0.001..=3600.0).contains(&seconds) => Ok(seconds),
        _ => Err(format!(
            "'{text}' is not a number of seconds between 0.001 and 3600"
        )),
    }
}

/// Refuses an output file whose directory does not exist, before the runs
/// rather than after them.
fn check_output(path: Option<&PathBuf>) -> Result<(), String> {
    let Some(path) = path else { return Ok(()) };
    match path.parent() {
        Some(directory) if !directory.as_os_str().is_empty() && !directory.is_dir() => {
            Err(format!(
                "cannot write {}: no directory {}",
                path.display(),
                directory.display()
            ))
        }
        _ => Ok(()),
    }
}

fn write_file(path: &PathBuf, contents: &str, what: &str) -> Result<(), String> {
    std::fs::write(path, contents)
        .map_err(|error| format!("cannot write the {what} to {}: {error}", path.display()))?;
    eprintln!("bench: wrote the {what} to {}", path.display());
    Ok(())
}

/// Runs a benchmark to the end: the runs, the tables on stdout, the files.
fn run(command: &BenchCommand) -> Result<(), String> {
    let (plan, common): (Plan, &CommonArgs) = match command {
        BenchCommand::TlbFlush2(args) => (tlb_flush2::plan(args)?, &args.common),
        BenchCommand::Pageout(args) => (pageout::plan(args)?, &args.common),
    };
    check_output(common.csv.as_ref())?;
    if let BenchCommand::TlbFlush2(args) = command {
        check_output(args.svg.as_ref())?;
    }
    let samples: Vec<Sample> = runs::run_all(&plan)?;
    let report = match command {
        BenchCommand::TlbFlush2(_) => tlb_flush2::report(&plan, &samples),
        BenchCommand::Pageout(_) => pageout::report(&plan, &samples),
    };
    println!("{report}");
    if let Some(note) = &plan.note {
        println!("\n{note}");
    }
    if let Some(profiles) = profiles::report(&plan, &samples) {
        println!("\n{profiles}");
    }
    if let Some(path) = &common.csv {
        write_file(path, &csv::write(&plan, &samples), "CSV")?;
    }
    if let BenchCommand::TlbFlush2(args) = command
        && let Some(path) = &args.svg
    {
        write_file(path, &tlb_flush2::plot(&plan, &samples), "plot")?;
    }
    Ok(())
}

/// `cargo run -- bench ...`.
pub fn main(command: &BenchCommand) -> ExitCode {
    match run(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("bench: error: {error}");
            ExitCode::FAILURE
        }
    }
}
