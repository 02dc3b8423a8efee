//! `cargo run -- [OPTIONS] [KERNEL OPTIONS...]`: boot the kernel in QEMU.

use std::{process::ExitCode, time::Duration};

use clap::{Parser, Subcommand};

use crate::qemu::{self, Accelerator, Firmware, Outcome, QemuConfig};

/// Boot the shootdown teaching kernel in QEMU.
///
/// Everything after the options is the kernel command line, for example
/// `cargo run -- --smp 2 test=frames` or `cargo run -- run=list`.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Number of CPUs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    smp: u32,
    /// QEMU CPU model [default: EPYC-Milan under TCG, host under KVM].
    #[arg(long)]
    cpu: Option<String>,
    /// Guest memory, in QEMU's syntax (512M, 2G).
    #[arg(long, default_value = "512M", value_parser = parse_memory)]
    memory: String,
    /// Accelerator.
    #[arg(long, value_enum, default_value_t = Accelerator::Tcg)]
    accel: Accelerator,
    /// Boot the UEFI image with OVMF instead of the BIOS image.
    #[arg(long)]
    uefi: bool,
    /// Start QEMU's GDB stub on tcp::1234 and wait for a debugger (no timeout).
    #[arg(long)]
    gdb: bool,
    /// Kill the run after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Kill the run if the kernel prints nothing for this many seconds.
    #[arg(long)]
    stall_timeout: Option<u64>,
    /// Kernel command line words (key=value).
    kernel_options: Vec<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    Fuzz(crate::fuzz::FuzzArgs),
}

/// Accepts a number with an optional K, M or G suffix, as QEMU's `-m` does.
fn parse_memory(text: &str) -> Result<String, String> {
    let digits = text
        .strip_suffix(['K', 'M', 'G', 'k', 'm', 'g'])
        .unwrap_or(text);
    match digits.parse::<u64>() {
        Ok(amount) if amount > 0 => Ok(text.to_string()),
        _ => Err(format!("'{text}' is not a memory size like 512M or 2G")),
    }
}

pub fn main() -> ExitCode {
    let args = Args::parse();
    if let Some(Command::Fuzz(fuzz)) = args.command {
        return crate::fuzz::main(fuzz);
    }
    let config = QemuConfig {
        cpus: args.smp,
        cpu_model: args.cpu,
        memory: args.memory,
        accelerator: args.accel,
        firmware: if args.uefi {
            Firmware::Uefi
        } else {
            Firmware::Bios
        },
        gdb: args.gdb,
        timeout: Duration::from_secs(args.timeout),
        stall_timeout: args.stall_timeout.map(Duration::from_secs),
        cmdline: args.kernel_options.join(" "),
        echo: true,
    };
    if config.gdb {
        eprintln!("runner: waiting for GDB on tcp::1234 (gdb -ex 'target remote :1234')");
    }
    let run = match qemu::run(&config) {
        Ok(run) => run,
        Err(error) => {
            eprintln!("runner: {error}");
            return ExitCode::FAILURE;
        }
    };
    let entry = run.kernel_entry.map_or("never".to_string(), |time| {
        format!("{:.2} s", time.as_secs_f64())
    });
    eprintln!(
        "runner: {} CPUs, {}; kernel entered after {entry}, run took {:.2} s: {}",
        config.cpus,
        config.effective_cpu_model(),
        run.elapsed.as_secs_f64(),
        run.outcome
    );
    match run.outcome {
        Outcome::Success => ExitCode::SUCCESS,
        _ => {
            if !run.qemu_stderr.trim().is_empty() {
                eprintln!("QEMU stderr:\n{}", run.qemu_stderr);
            }
            ExitCode::FAILURE
        }
    }
}
