//! The `cargo run` front end.
//!
//! - `cargo run -- [OPTIONS] [KERNEL OPTIONS...]`: boot the kernel once in
//!   QEMU (the default, no command word);
//! - `cargo run --release -- bench <workload> [...]`: the benchmarks (see
//!   [`crate::bench`]);
//! - `cargo run -- fuzz --calls N --seed S`: a long fuzzer run (see
//!   [`crate::fuzz`]).
//!
//! Kernel options always contain `=`, so they can never be mistaken for a
//! command word. A new command is one more variant of `Command` and one
//! more arm in [`main`].

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use clap::{Args, Parser, Subcommand};

use crate::{
    bench::{self, BenchCommand},
    machine::{self, Accelerator, Config, Echo, Firmware, Outcome, Qemu, QemuPathError, Run},
    timeline::{self, Window},
};

/// Boot the shootdown teaching kernel in QEMU.
///
/// Everything after the options is the kernel command line, for example
/// `cargo run -- --smp 2 test=frames` or `cargo run -- run=list`.
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    boot: BootArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a benchmark: one boot per configuration and repeat, then tables
    /// (and optionally CSV and SVG). Use `--release`.
    // Boxed: its machine options make it much larger than the others.
    #[command(subcommand)]
    Bench(Box<BenchCommand>),
    /// Run the system-call fuzzer: seeded hostile system calls from several
    /// threads on several CPUs.
    Fuzz(crate::fuzz::FuzzArgs),
}

/// The machine QEMU emulates, apart from the CPU count (which each command
/// chooses its own way).
#[derive(Clone, Debug, Args)]
pub struct MachineArgs {
    /// The QEMU binary [default: qemu-system-x86_64 from PATH]. A binary
    /// PREFIX/usr/bin/qemu-system-x86_64 of an unpacked prefix runs with
    /// that prefix's settings, as with --qemu-prefix PREFIX.
    #[arg(long, value_name = "PATH", value_parser = parse_qemu_program)]
    qemu: Option<Qemu>,
    /// Run the QEMU unpacked (dpkg-deb -x) into DIR, such as QEMU 10 from
    /// bookworm-backports that `.ci/qemu10` unpacks into target/qemu10: its
    /// binary, with QEMU_MODULE_DIR and -L set to the prefix's directories.
    #[arg(long, value_name = "DIR", value_parser = parse_qemu_prefix, conflicts_with = "qemu")]
    qemu_prefix: Option<Qemu>,
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
}

impl Default for MachineArgs {
    fn default() -> Self {
        let config = Config::default();
        Self {
            qemu: None,
            qemu_prefix: None,
            cpu: config.cpu_model,
            memory: config.memory,
            accel: config.accelerator,
            uefi: config.firmware == Firmware::Uefi,
        }
    }
}

impl MachineArgs {
    /// The QEMU binary `--qemu` or `--qemu-prefix` names, else the system's.
    fn qemu(&self) -> Qemu {
        self.qemu
            .clone()
            .or_else(|| self.qemu_prefix.clone())
            .unwrap_or_default()
    }

    /// A configuration for this machine in QEMU (other fields as defaults).
    pub fn config(&self) -> Config {
        Config {
            emulator: self.qemu().into(),
            cpu_model: self.cpu.clone(),
            memory: self.memory.clone(),
            accelerator: self.accel,
            firmware: if self.uefi {
                Firmware::Uefi
            } else {
                Firmware::Bios
            },
            ..Config::default()
        }
    }
}

/// Options of a plain boot.
#[derive(Debug, Args)]
struct BootArgs {
    /// Number of CPUs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    smp: u32,
    #[command(flatten)]
    machine: MachineArgs,
    /// Start QEMU's GDB stub on tcp::1234 and wait for a debugger (no timeout).
    #[arg(long)]
    gdb: bool,
    /// Kill the run after this many seconds.
    #[arg(long, default_value_t = 120)]
    timeout: u64,
    /// Kill the run if the kernel prints nothing for this many seconds.
    #[arg(long)]
    stall_timeout: Option<u64>,
    /// Record each CPU's part in every shootdown (tlb.timeline=on) and write
    /// DIR/timeline.json (Perfetto, chrome://tracing) and DIR/timeline.svg.
    #[arg(long, value_name = "DIR")]
    timeline: Option<PathBuf>,
    /// What timeline.svg shows: a shootdown of median length [default:
    /// typical], the N-th, shootdowns N to M, the last, the first promotion
    /// and the two shootdowns after it, a CPU flushes skipped until the
    /// switch that caught up, FROM..TO in microseconds since boot, or all.
    #[arg(long, value_name = "typical|N|N-M|last|promotion|lazy|FROM..TO|all", value_parser = Window::parse, requires = "timeline")]
    timeline_window: Option<Window>,
    /// Kernel command line words (key=value).
    kernel_options: Vec<String>,
}

/// Checks `--qemu` before anything boots.
fn parse_qemu_program(text: &str) -> Result<Qemu, QemuPathError> {
    Qemu::from_program(PathBuf::from(text))
}

/// Checks `--qemu-prefix` before anything boots.
fn parse_qemu_prefix(text: &str) -> Result<Qemu, QemuPathError> {
    Qemu::from_prefix(PathBuf::from(text))
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
    let cli = Cli::parse();
    match cli.command {
        None => boot(cli.boot),
        Some(Command::Bench(command)) => bench::main(&command),
        Some(Command::Fuzz(fuzz)) => crate::fuzz::main(fuzz),
    }
}

/// Boots once, echoing the serial output, and reports how it ended.
fn boot(args: BootArgs) -> ExitCode {
    // The kernel would reject such a word too, but only after booting; a
    // command word after an option lands here as well.
    if let Some(word) = args.kernel_options.iter().find(|word| !word.contains('=')) {
        eprintln!(
            "runner: '{word}' is not a kernel option (key=value); \
             a command (bench, fuzz) must come first: `cargo run -- help`"
        );
        return ExitCode::FAILURE;
    }
    let kernel_options = match kernel_options(&args) {
        Ok(options) => options,
        Err(why) => {
            eprintln!("runner: {why}");
            return ExitCode::FAILURE;
        }
    };
    let config = Config {
        cpus: args.smp,
        gdb: args.gdb,
        timeout: Duration::from_secs(args.timeout),
        stall_timeout: args.stall_timeout.map(Duration::from_secs),
        cmdline: kernel_options.join(" "),
        // The timeline's event lines go to DIR/timeline.txt, not the screen.
        echo: if args.timeline.is_some() {
            Echo::AllBut(&[timeline::EVENT_PREFIX, timeline::END_PREFIX])
        } else {
            Echo::Everything
        },
        ..args.machine.config()
    };
    if config.gdb {
        eprintln!(
            "runner: QEMU waits for a debugger on tcp::1234; attach one, with symbols and source:"
        );
        eprintln!("  {}", debugger_command(&config));
    }
    let run = match machine::run(&config) {
        Ok(run) => run,
        Err(error) => {
            eprintln!("runner: {error}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("{}", closing_line(&config, &args.machine, &run));
    if run.outcome != Outcome::Success {
        eprint!("{}", run.diagnostics.describe());
        return ExitCode::FAILURE;
    }
    match &args.timeline {
        Some(dir) => write_timeline(dir, &run, &config, args.timeline_window.unwrap_or_default()),
        None => ExitCode::SUCCESS,
    }
}

/// The runner's last line: the machine, when the kernel started, how long
/// the run took and how it ended.
fn closing_line(config: &Config, machine: &MachineArgs, run: &Run) -> String {
    let entry = run.kernel_entry.map_or("never".to_string(), |time| {
        format!("{:.2} s", time.as_secs_f64())
    });
    // The version's first word ("10.0.2"); QEMU started, so it answers.
    let version = machine.qemu().version().unwrap_or_default();
    let version = version.split_whitespace().next().unwrap_or("?");
    format!(
        "runner: {} CPUs, {}, QEMU {version}; kernel entered after {entry}, run took {:.2} s: {}",
        config.cpus,
        config.effective_cpu_model(),
        run.elapsed.as_secs_f64(),
        run.ending()
    )
}

/// The kernel command line of a plain boot: its words, and what the
/// runner's own options ask of the kernel (`--timeline`: the recording).
fn kernel_options(args: &BootArgs) -> Result<Vec<String>, String> {
    let mut options = args.kernel_options.clone();
    if args.timeline.is_some() {
        if options.iter().any(|word| word == "tlb.timeline=off") {
            return Err(
                "--timeline needs the timeline, and tlb.timeline=off turns it off".to_string(),
            );
        }
        // `tlb.timeline=N` records already, with room for N events per CPU.
        if !options.iter().any(|word| word.starts_with("tlb.timeline=")) {
            options.push("tlb.timeline=on".to_string());
        }
    }
    Ok(options)
}

/// Writes the timeline of `run` into `dir` and says what it holds.
fn write_timeline(dir: &Path, run: &Run, config: &Config, window: Window) -> ExitCode {
    let info = timeline::RunInfo {
        command_line: config.cmdline.clone(),
        dropped: 0,
    };
    match timeline::write(dir, run.serial.iter().map(String::as_str), &info, &window) {
        Ok(written) => {
            eprintln!(
                "runner: timeline of {} CPUs, {} events ({} did not fit): {} slices, {} IPI arrows; \
                 {} shows {} of {} shootdowns; the events as printed are in {}",
                written.summary.cpus,
                written.summary.recorded,
                written.summary.dropped,
                written.counts.slices,
                written.counts.flows,
                dir.join("timeline.svg").display(),
                written.drawn_shootdowns,
                written.shootdowns,
                dir.join("timeline.txt").display(),
            );
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("runner: no timeline written: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Where the bootloader maps the kernel image (the kernel's
/// `BOOTLOADER_CONFIG` asks for this fixed address); the kernel ELF is
/// position-independent and linked at 0, so a debugger must add it.
const KERNEL_LOAD_ADDRESS: u64 = 0xffff_ffff_8000_0000;

/// The command that attaches GDB to a run started with `--gdb`: the ELF
/// with DWARF of the image this run boots, at its load address.
fn debugger_command(config: &Config) -> String {
    let elf = if config.wants_tests() {
        crate::KERNEL_TESTS_ELF
    } else {
        crate::KERNEL_ELF
    };
    format!("gdb -q -ex 'symbol-file -o {KERNEL_LOAD_ADDRESS:#x} {elf}' -ex 'target remote :1234'")
}
