//! Running the machine in QEMU.
//!
//! QEMU gets the kernel command line through fw_cfg and the serial port on
//! its stdout. The kernel ends a run by writing to QEMU's `isa-debug-exit`
//! device: QEMU then exits with status 33 (success) or 35 (failure). Any
//! other status (a triple fault with `--no-reboot` gives 0, a QEMU error
//! gives 1) is an [`Outcome::UnexpectedExit`]. Which binary runs, and how
//! one unpacked into a prefix finds its files, is [`binary`].
//!
//! A Linux guest ([`Guest::Linux`]) is loaded by QEMU itself, and ends by
//! powering the machine off (QEMU exits with 0): its run succeeded if the
//! project's init says the program exited with 0 (`linux-init: exited=0`).

mod binary;

use std::{
    io::Read,
    path::{Path, PathBuf},
    process::Stdio,
    thread,
    time::Instant,
};

pub use binary::{Qemu, QemuPathError};
use wait_timeout::ChildExt;

use super::{
    Accelerator, Config, Diagnostics, Firmware, Guest, Outcome, Run, RunError, serial::Serial,
    watch::watch,
};

/// QEMU's exit status when the kernel reports success (`0x10 << 1 | 1`).
pub const EXIT_SUCCESS: i32 = 33;
/// QEMU's exit status when the kernel reports failure (`0x11 << 1 | 1`).
pub const EXIT_FAILURE: i32 = 35;

/// The QEMU binary's name, in `PATH` or in a prefix's `usr/bin`.
pub const PROGRAM: &str = "qemu-system-x86_64";

/// Where Debian's `ovmf` package puts the firmware.
pub const OVMF_PATHS: &[&str] = &["/usr/share/ovmf/OVMF.fd", "/usr/share/OVMF/OVMF_CODE.fd"];

/// What the Linux guest's init prints first, once its console is set up.
const LINUX_INIT_START: &str = "linux-init: started";

/// What the Linux guest's init prints when the program it ran has ended.
pub const LINUX_INIT_END: &str = "linux-init: exited=";

/// What Linux prints when it panics (with `panic=-1` it then reboots, and
/// `-no-reboot` makes QEMU exit with status 0).
const LINUX_PANIC: &str = "Kernel panic - not syncing";

/// Linux's part of the command line: the console on the serial port, no
/// boot chatter, and no reboot after a panic (QEMU's `-no-reboot` then
/// ends the run).
const LINUX_CMDLINE: &str = "console=ttyS0 quiet panic=-1";

/// The full QEMU argument list for `config` (without the program name,
/// and without what [`Qemu::command`] adds for a prefix).
fn arguments(config: &Config) -> Result<Vec<String>, RunError> {
    let mut args = machine_arguments(config);
    match &config.guest {
        Guest::Shootdown => {
            // snapshot=on: writes go to a temporary overlay, so parallel
            // runs can share the image (QEMU locks images opened for
            // writing).
            args.push("-drive".into());
            args.push(format!("format=raw,file={},snapshot=on", config.image()));
            // QEMU rejects an empty fw_cfg string; no file means no options.
            if !config.cmdline.is_empty() {
                args.push("-fw_cfg".into());
                // Commas separate QEMU's sub-options; a literal one is doubled.
                args.push(format!(
                    "name=opt/shootdown/cmdline,string={}",
                    config.cmdline.replace(',', ",,")
                ));
            }
        }
        Guest::Linux { kernel, initramfs } => {
            args.push("-kernel".into());
            args.push(kernel.display().to_string());
            args.push("-initrd".into());
            args.push(initramfs.display().to_string());
            args.push("-append".into());
            args.push(
                format!("{LINUX_CMDLINE} {}", config.cmdline)
                    .trim_end()
                    .to_string(),
            );
        }
    }
    args.push("-accel".into());
    args.push(match config.accelerator {
        Accelerator::Tcg => "tcg,thread=multi".into(),
        Accelerator::Kvm => "kvm".into(),
    });
    if config.firmware == Firmware::Uefi {
        args.push("-bios".into());
        args.push(ovmf_path()?.display().to_string());
    }
    if config.gdb {
        // -s: GDB stub on tcp::1234; -S: wait for the debugger to continue.
        args.extend(["-s".into(), "-S".into()]);
    }
    Ok(args)
}

/// The machine itself, whichever kernel it boots.
fn machine_arguments(config: &Config) -> Vec<String> {
    [
        "-machine",
        "q35",
        "-cpu",
        config.effective_cpu_model(),
        "-smp",
        &config.cpus.to_string(),
        "-m",
        &config.memory,
        "-serial",
        "stdio",
        "-display",
        "none",
        "-monitor",
        "none",
        "-device",
        "isa-debug-exit,iobase=0xf4,iosize=0x04",
        "-no-reboot",
    ]
    .iter()
    .map(|arg| arg.to_string())
    .collect()
}

fn ovmf_path() -> Result<PathBuf, RunError> {
    OVMF_PATHS
        .iter()
        .map(Path::new)
        .find(|path| path.exists())
        .map(Path::to_path_buf)
        .ok_or(RunError::NoOvmf)
}

/// What QEMU's exit status says about a run of this kernel.
fn outcome(status: Option<i32>) -> Outcome {
    match status {
        Some(EXIT_SUCCESS) => Outcome::Success,
        Some(EXIT_FAILURE) => Outcome::Failure,
        other => Outcome::UnexpectedExit(other),
    }
}

/// How a Linux guest's run ended: powered off (status 0) after its init
/// said the program exited with 0, or not.
fn linux_outcome(status: Option<i32>, serial: &[String]) -> Outcome {
    let ended = serial
        .iter()
        .find_map(|line| line.strip_prefix(LINUX_INIT_END))
        .map(|rest| rest.split_whitespace().next() == Some("0"));
    match (status, ended) {
        (Some(0), Some(true)) => Outcome::Success,
        (Some(0), Some(false)) => Outcome::Failure,
        (other, _) => Outcome::UnexpectedExit(other),
    }
}

/// The line of Linux's panic, if Linux panicked before the project's init
/// printed its first line: Linux's own boot failed, before anything of the
/// run's program or of its init could have caused it.
pub fn linux_panic_before_init(serial: &[String]) -> Option<&str> {
    serial
        .iter()
        .take_while(|line| !line.starts_with(LINUX_INIT_START))
        .find(|line| line.contains(LINUX_PANIC))
        .map(String::as_str)
}

/// Boots `config` in `qemu` and waits for QEMU to exit or a limit to end
/// the run.
pub fn run(config: &Config, qemu: &Qemu) -> Result<Run, RunError> {
    let args = arguments(config)?;
    let start = Instant::now();
    let mut child = qemu
        .command()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| RunError::NoQemu(qemu.program().to_path_buf(), error))?;
    let serial = Serial::new(start, config.echo);
    let stdout = child.stdout.take().expect("stdout is piped");
    let stdout_reader = {
        let serial = serial.clone();
        thread::spawn(move || serial.follow(stdout))
    };
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let stderr_reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut exit_status = None;
    let outcome = watch(config, start, &serial, |interval| {
        match child.wait_timeout(interval) {
            Ok(Some(status)) => {
                exit_status = status.code();
                Some(outcome(status.code()))
            }
            Ok(None) => None,
            Err(_) => Some(Outcome::UnexpectedExit(None)),
        }
    });
    let _ = child.kill();
    let _ = child.wait();
    let elapsed = start.elapsed();
    let _ = stdout_reader.join();
    let stderr = stderr_reader.join().unwrap_or_default();
    let (serial, kernel_entry) = serial.finish();
    // A Linux run that ended by itself is judged by what its init printed
    // (a limit's outcome stays as it is).
    let outcome = match (&config.guest, &outcome) {
        (Guest::Linux { .. }, Outcome::UnexpectedExit(_)) => linux_outcome(exit_status, &serial),
        _ => outcome,
    };
    Ok(Run {
        outcome,
        serial,
        kernel_entry,
        elapsed,
        diagnostics: Diagnostics::Qemu { stderr },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value that follows `flag` in `args`.
    fn after<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
        let at = args.iter().position(|arg| arg == flag)?;
        args.get(at + 1).map(String::as_str)
    }

    #[test]
    fn the_machine_becomes_arguments() {
        let config = Config::default()
            .cpus(2)
            .memory("3G")
            .cmdline("exec=coherence:100,2 tlb=ipi");
        let args = arguments(&config).unwrap();
        assert_eq!(after(&args, "-cpu"), Some("EPYC-Milan"));
        assert_eq!(after(&args, "-smp"), Some("2"));
        assert_eq!(after(&args, "-m"), Some("3G"));
        assert_eq!(after(&args, "-accel"), Some("tcg,thread=multi"));
        assert_eq!(
            after(&args, "-fw_cfg"),
            Some("name=opt/shootdown/cmdline,string=exec=coherence:100,,2 tlb=ipi")
        );
        assert!(!args.iter().any(|arg| arg == "-s" || arg == "-bios"));
    }

    #[test]
    fn an_empty_command_line_passes_no_fw_cfg() {
        let args = arguments(&Config::default()).unwrap();
        assert_eq!(after(&args, "-fw_cfg"), None);
        let gdb = Config {
            gdb: true,
            ..Config::default()
        };
        assert!(
            arguments(&gdb)
                .unwrap()
                .ends_with(&["-s".into(), "-S".into()])
        );
    }

    #[test]
    fn a_linux_guest_is_loaded_by_qemu() {
        let config = Config::default()
            .cmdline("bench.exec=x:1")
            .guest(Guest::Linux {
                kernel: PathBuf::from("/k/vmlinuz"),
                initramfs: PathBuf::from("/k/initramfs.cpio"),
            });
        let args = arguments(&config).unwrap();
        assert_eq!(after(&args, "-kernel"), Some("/k/vmlinuz"));
        assert_eq!(after(&args, "-initrd"), Some("/k/initramfs.cpio"));
        assert_eq!(
            after(&args, "-append"),
            Some("console=ttyS0 quiet panic=-1 bench.exec=x:1")
        );
        assert!(!args.iter().any(|arg| arg == "-drive" || arg == "-fw_cfg"));
        let lines = |line: &str| vec![String::from("boot"), String::from(line)];
        let exited = |code| lines(&format!("linux-init: exited={code} tlb_shootdown_ipis=3"));
        assert_eq!(linux_outcome(Some(0), &exited(0)), Outcome::Success);
        assert_eq!(linux_outcome(Some(0), &exited(1)), Outcome::Failure);
        assert_eq!(
            linux_outcome(Some(0), &lines("Kernel panic")),
            Outcome::UnexpectedExit(Some(0))
        );
        assert_eq!(
            linux_outcome(Some(1), &exited(0)),
            Outcome::UnexpectedExit(Some(1))
        );
    }

    /// Only a panic before the init's first line is Linux's own boot
    /// failing; one after it may be the run's doing.
    #[test]
    fn a_panic_before_the_init_is_a_failed_boot() {
        let serial = |text: &[&str]| text.iter().map(|line| line.to_string()).collect::<Vec<_>>();
        let panic = "[    0.91] Kernel panic - not syncing: Fatal exception in interrupt";
        let booted = serial(&["[    0.90] Oops: int3: 0000 [#1] SMP", panic]);
        assert_eq!(linux_panic_before_init(&booted), Some(panic));
        let in_the_run = serial(&["linux-init: started", panic]);
        assert_eq!(linux_panic_before_init(&in_the_run), None);
        let clean = serial(&["linux-init: started", "linux-init: exited=0"]);
        assert_eq!(linux_panic_before_init(&clean), None);
    }

    #[test]
    fn exit_statuses_are_outcomes() {
        assert_eq!(outcome(Some(33)), Outcome::Success);
        assert_eq!(outcome(Some(35)), Outcome::Failure);
        assert_eq!(outcome(Some(0)), Outcome::UnexpectedExit(Some(0)));
        assert_eq!(outcome(None), Outcome::UnexpectedExit(None));
    }
}
