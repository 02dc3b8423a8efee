//! Booting the kernel in QEMU and judging how the run ended.
//!
//! The kernel ends a run by writing to QEMU's `isa-debug-exit` device: QEMU
//! then exits with status 33 (success) or 35 (failure). Any other status
//! (a triple fault with `--no-reboot` gives 0, a QEMU error gives 1) and a run
//! that outlives its timeout are failures too, reported with the last lines
//! the kernel printed.
//!
//! [`Qemu`] says which QEMU runs: the `qemu-system-x86_64` on `PATH` by
//! default (Debian bookworm's 7.2), or another binary, for instance QEMU 10
//! unpacked from bookworm-backports into a private prefix (`.ci/qemu10`),
//! whose TCG emulates x2APIC. Such a prefix needs its own module directory
//! and firmware search paths, which [`Qemu::from_prefix`] derives.

use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use wait_timeout::ChildExt;

use crate::coherence::CoherenceSummary;
use crate::report::{self, TestReport};

/// QEMU's exit status when the kernel reports success (`0x10 << 1 | 1`).
pub const EXIT_SUCCESS: i32 = 33;
/// QEMU's exit status when the kernel reports failure (`0x11 << 1 | 1`).
pub const EXIT_FAILURE: i32 = 35;

/// The first line the kernel prints; its arrival times the boot.
const KERNEL_ENTRY_LINE: &str = "shootdown: kernel entered";

/// Where Debian's `ovmf` package puts the firmware.
const OVMF_PATHS: &[&str] = &["/usr/share/ovmf/OVMF.fd", "/usr/share/OVMF/OVMF_CODE.fd"];

/// The QEMU binary's name, in `PATH` or in a prefix's `usr/bin`.
pub const QEMU_PROGRAM: &str = "qemu-system-x86_64";

/// Where, inside a prefix, Debian's QEMU packages put what QEMU needs
/// besides its binary: its loadable modules (display, audio, ... back ends;
/// `QEMU_MODULE_DIR`), its firmware and option ROMs, and SeaBIOS (both
/// through `-L`; `usr/share/qemu` holds only links to `../seabios`).
const PREFIX_BINARY: &str = "usr/bin/qemu-system-x86_64";
const PREFIX_MODULE_DIR: &str = "usr/lib/x86_64-linux-gnu/qemu";
const PREFIX_DATA_DIRS: [&str; 2] = ["usr/share/qemu", "usr/share/seabios"];

/// How often the runner checks the timeouts.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Accelerator {
    /// QEMU's software emulator (multi-threaded TCG). Works everywhere.
    Tcg,
    /// Hardware virtualisation through /dev/kvm.
    Kvm,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Firmware {
    Bios,
    Uefi,
}

/// Which QEMU binary runs, and what it needs to find its own files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qemu {
    /// A path, or a bare name looked up in `PATH`.
    program: PathBuf,
    /// The directory the QEMU packages were unpacked into (with `dpkg-deb
    /// -x`), when it is not the system's root.
    prefix: Option<PathBuf>,
}

impl Default for Qemu {
    fn default() -> Self {
        Self::system()
    }
}

impl Qemu {
    /// The installed QEMU: `qemu-system-x86_64` from `PATH`.
    pub fn system() -> Self {
        Self {
            program: PathBuf::from(QEMU_PROGRAM),
            prefix: None,
        }
    }

    /// The QEMU unpacked into `prefix` as Debian lays it out: the binary in
    /// `usr/bin`, modules in `usr/lib/x86_64-linux-gnu/qemu`, firmware in
    /// `usr/share/qemu` and `usr/share/seabios`. Each must be there.
    pub fn from_prefix(prefix: impl Into<PathBuf>) -> Result<Self, QemuPathError> {
        let prefix = prefix.into();
        check_prefix(&prefix)?;
        let program = prefix.join(PREFIX_BINARY);
        if !program.is_file() {
            return Err(QemuPathError::PrefixLacks {
                prefix,
                part: PREFIX_BINARY,
            });
        }
        Ok(Self {
            program,
            prefix: Some(prefix),
        })
    }

    /// The QEMU binary at `program`: a path to a file, or a bare name found
    /// in `PATH`. A path `PREFIX/usr/bin/NAME` whose `PREFIX` (not `/`)
    /// holds a QEMU module directory is taken as an unpacked prefix, as in
    /// [`Qemu::from_prefix`].
    pub fn from_program(program: impl Into<PathBuf>) -> Result<Self, QemuPathError> {
        let program = program.into();
        let bare_name = program
            .parent()
            .is_some_and(|dir| dir.as_os_str().is_empty());
        if bare_name {
            return match find_in_path(&program) {
                Some(_) => Ok(Self {
                    program,
                    prefix: None,
                }),
                None => Err(QemuPathError::NotInPath(program)),
            };
        }
        if !program.is_file() {
            return Err(QemuPathError::NotAFile(program));
        }
        let prefix = program
            .parent()
            .filter(|bin| bin.ends_with("usr/bin"))
            .and_then(|bin| bin.parent()?.parent())
            .filter(|prefix| {
                !prefix.as_os_str().is_empty()
                    && *prefix != Path::new("/")
                    && prefix.join(PREFIX_MODULE_DIR).is_dir()
            })
            .map(Path::to_path_buf);
        if let Some(prefix) = &prefix {
            check_prefix(prefix)?;
        }
        Ok(Self { program, prefix })
    }

    /// The binary QEMU runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The QEMU in the prefix that environment variable `variable` names,
    /// for a test tier that needs a QEMU other than the system's; `None`,
    /// after a line on stderr saying that the calling test is skipped and
    /// that `installer` provides the prefix, if the variable is unset or
    /// empty. A set variable that names no usable prefix panics. (The line
    /// goes straight to stderr: the test harness captures the output of a
    /// passing test, and a skip must not look like a pass.)
    pub fn from_prefix_variable(variable: &str, installer: &str) -> Option<Self> {
        match std::env::var_os(variable) {
            Some(prefix) if !prefix.is_empty() => Some(
                Self::from_prefix(&prefix).unwrap_or_else(|error| panic!("{variable}: {error}")),
            ),
            _ => {
                // libtest names each test's thread after the test.
                let thread = std::thread::current();
                let test = thread.name().unwrap_or("test");
                eprintln!("{test}: skipped: {variable} is not set ({installer})");
                None
            }
        }
    }

    /// The unpacked prefix, if this QEMU lives in one.
    pub fn prefix(&self) -> Option<&Path> {
        self.prefix.as_deref()
    }

    /// A command that runs this QEMU with what its prefix needs: the
    /// prefix's module directory, or QEMU loads the system's modules of
    /// another build and aborts ("Only modules from the same build can be
    /// loaded"); and its firmware directories ahead of the compiled-in ones.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        if let Some(prefix) = &self.prefix {
            command.env("QEMU_MODULE_DIR", prefix.join(PREFIX_MODULE_DIR));
            for dir in PREFIX_DATA_DIRS {
                command.arg("-L").arg(prefix.join(dir));
            }
        }
        command
    }

    /// The version QEMU reports (`10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)`),
    /// from `--version`.
    pub fn version(&self) -> Result<String, RunError> {
        let output = self
            .command()
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|error| RunError::NoQemu(self.program.clone(), error))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text.lines().next().unwrap_or_default();
        Ok(line
            .strip_prefix("QEMU emulator version ")
            .unwrap_or(line)
            .to_string())
    }
}

/// Checks that `prefix` has the directories a QEMU unpacked there needs.
fn check_prefix(prefix: &Path) -> Result<(), QemuPathError> {
    if !prefix.is_dir() {
        return Err(QemuPathError::NotADirectory(prefix.to_path_buf()));
    }
    for part in [PREFIX_MODULE_DIR].into_iter().chain(PREFIX_DATA_DIRS) {
        if !prefix.join(part).is_dir() {
            return Err(QemuPathError::PrefixLacks {
                prefix: prefix.to_path_buf(),
                part,
            });
        }
    }
    Ok(())
}

/// The first `PATH` entry that holds a file named `name`.
fn find_in_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Why a QEMU binary or prefix was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QemuPathError {
    NotInPath(PathBuf),
    NotAFile(PathBuf),
    NotADirectory(PathBuf),
    /// The prefix has no `part` (one of the paths Debian's packages create).
    PrefixLacks {
        prefix: PathBuf,
        part: &'static str,
    },
}

impl std::fmt::Display for QemuPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotInPath(name) => write!(f, "no {} in PATH", name.display()),
            Self::NotAFile(path) => write!(f, "{} is not a file", path.display()),
            Self::NotADirectory(path) => write!(f, "{} is not a directory", path.display()),
            Self::PrefixLacks { prefix, part } => write!(
                f,
                "{} is not an unpacked QEMU prefix: it has no {part} \
                 (.ci/qemu10 makes one from bookworm-backports' qemu-system-* and seabios packages)",
                prefix.display()
            ),
        }
    }
}

impl std::error::Error for QemuPathError {}

/// Everything that describes one QEMU run.
#[derive(Clone, Debug)]
pub struct QemuConfig {
    /// Which QEMU runs.
    pub qemu: Qemu,
    pub cpus: u32,
    /// `None`: EPYC-Milan under TCG, `host,-arch-capabilities` under KVM.
    pub cpu_model: Option<String>,
    pub memory: String,
    pub accelerator: Accelerator,
    pub firmware: Firmware,
    /// Start QEMU's GDB stub on tcp::1234 and wait for the debugger.
    pub gdb: bool,
    pub timeout: Duration,
    /// Kill the run if the kernel, once entered, prints nothing for this
    /// long: a hung kernel is silent, so this catches hangs long before
    /// `timeout` (which alone bounds the silent boot before it).
    pub stall_timeout: Option<Duration>,
    /// The kernel command line, passed through fw_cfg.
    pub cmdline: String,
    /// Copy the serial output to our stdout as it arrives.
    pub echo: bool,
}

impl Default for QemuConfig {
    fn default() -> Self {
        Self {
            qemu: Qemu::system(),
            cpus: 4,
            cpu_model: None,
            memory: String::from("512M"),
            accelerator: Accelerator::Tcg,
            firmware: Firmware::Bios,
            gdb: false,
            timeout: Duration::from_secs(120),
            stall_timeout: None,
            cmdline: String::new(),
            echo: false,
        }
    }
}

impl QemuConfig {
    pub fn qemu(mut self, qemu: Qemu) -> Self {
        self.qemu = qemu;
        self
    }

    /// The QEMU CPU model, with features (`EPYC-Milan,+x2apic`, `max`).
    pub fn cpu_model(mut self, model: impl Into<String>) -> Self {
        self.cpu_model = Some(model.into());
        self
    }

    pub fn cpus(mut self, cpus: u32) -> Self {
        self.cpus = cpus;
        self
    }

    pub fn cmdline(mut self, cmdline: impl Into<String>) -> Self {
        self.cmdline = cmdline.into();
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn stall_timeout(mut self, silence: Duration) -> Self {
        self.stall_timeout = Some(silence);
        self
    }

    pub fn firmware(mut self, firmware: Firmware) -> Self {
        self.firmware = firmware;
        self
    }

    pub fn memory(mut self, memory: impl Into<String>) -> Self {
        self.memory = memory.into();
        self
    }

    /// The CPU model QEMU is asked for.
    pub fn effective_cpu_model(&self) -> &str {
        match (&self.cpu_model, self.accelerator) {
            (Some(model), _) => model,
            (None, Accelerator::Tcg) => "EPYC-Milan",
            (None, Accelerator::Kvm) => "host,-arch-capabilities",
        }
    }

    /// Whether the kernel command line asks for the in-kernel tests
    /// (`run=tests`, `run=list` or `test=...`), which only the
    /// `kernel-tests` image has.
    pub fn wants_tests(&self) -> bool {
        crate::cmdline_wants_tests(&self.cmdline)
    }

    /// The disk image to boot: the test image when the command line asks
    /// for tests, else the kernel as `cargo run` boots it.
    pub fn image(&self) -> &'static str {
        match (self.wants_tests(), self.firmware) {
            (false, Firmware::Bios) => crate::BIOS_IMAGE,
            (false, Firmware::Uefi) => crate::UEFI_IMAGE,
            (true, Firmware::Bios) => crate::TESTS_BIOS_IMAGE,
            (true, Firmware::Uefi) => crate::TESTS_UEFI_IMAGE,
        }
    }

    /// The full QEMU argument list (without the program name, and without
    /// what [`Qemu::command`] adds for a prefix).
    pub fn qemu_args(&self) -> Result<Vec<String>, RunError> {
        let image = self.image();
        let mut args: Vec<String> = [
            "-machine",
            "q35",
            "-cpu",
            self.effective_cpu_model(),
            "-smp",
            &self.cpus.to_string(),
            "-m",
            &self.memory,
            // snapshot=on: writes go to a temporary overlay, so parallel runs can
            // share the image (QEMU locks images opened for writing).
            "-drive",
            &format!("format=raw,file={image},snapshot=on"),
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
        .collect();
        // QEMU rejects an empty fw_cfg string; no file means no options.
        if !self.cmdline.is_empty() {
            args.push("-fw_cfg".into());
            // Commas separate QEMU's sub-options; a literal one is doubled.
            args.push(format!(
                "name=opt/shootdown/cmdline,string={}",
                self.cmdline.replace(',', ",,")
            ));
        }
        args.push("-accel".into());
        args.push(match self.accelerator {
            Accelerator::Tcg => "tcg,thread=multi".into(),
            Accelerator::Kvm => "kvm".into(),
        });
        if self.firmware == Firmware::Uefi {
            args.push("-bios".into());
            args.push(ovmf_path()?.display().to_string());
        }
        if self.gdb {
            // -s: GDB stub on tcp::1234; -S: wait for the debugger to continue.
            args.extend(["-s".into(), "-S".into()]);
        }
        Ok(args)
    }
}

fn ovmf_path() -> Result<PathBuf, RunError> {
    OVMF_PATHS
        .iter()
        .map(Path::new)
        .find(|path| path.exists())
        .map(Path::to_path_buf)
        .ok_or(RunError::NoOvmf)
}

/// Why a run could not even start.
#[derive(Debug)]
pub enum RunError {
    /// The QEMU binary could not be started.
    NoQemu(PathBuf, std::io::Error),
    NoOvmf,
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoQemu(program, error) if program == Path::new(QEMU_PROGRAM) => write!(
                f,
                "cannot start {QEMU_PROGRAM} ({error}); install it with `apt-get install qemu-system-x86`"
            ),
            Self::NoQemu(program, error) => {
                write!(f, "cannot start QEMU at {} ({error})", program.display())
            }
            Self::NoOvmf => write!(
                f,
                "UEFI firmware not found at {}; install it with `apt-get install ovmf`",
                OVMF_PATHS.join(" or ")
            ),
        }
    }
}

impl std::error::Error for RunError {}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The kernel reported success (status 33).
    Success,
    /// The kernel reported failure (status 35).
    Failure,
    /// QEMU exited without the kernel reporting (triple fault, QEMU error).
    UnexpectedExit(Option<i32>),
    /// The run outlived its timeout and was killed.
    Timeout(Duration),
    /// The kernel printed nothing for this long and was killed.
    Stalled(Duration),
}

impl Outcome {
    fn from_status(status: Option<i32>) -> Self {
        match status {
            Some(EXIT_SUCCESS) => Self::Success,
            Some(EXIT_FAILURE) => Self::Failure,
            other => Self::UnexpectedExit(other),
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Success => write!(f, "success (QEMU exit status {EXIT_SUCCESS})"),
            Self::Failure => write!(
                f,
                "the kernel reported failure (QEMU exit status {EXIT_FAILURE})"
            ),
            Self::UnexpectedExit(Some(0)) => {
                write!(
                    f,
                    "QEMU exited with status 0 without a kernel report (a triple fault or reset?)"
                )
            }
            Self::UnexpectedExit(Some(code)) => {
                write!(f, "QEMU exited with status {code} without a kernel report")
            }
            Self::UnexpectedExit(None) => write!(f, "QEMU was killed by a signal"),
            Self::Stalled(silence) => write!(
                f,
                "no output for {} s (hung?); QEMU was killed",
                silence.as_secs_f64()
            ),
            Self::Timeout(limit) => write!(
                f,
                "timed out after {} s; QEMU was killed",
                limit.as_secs_f64()
            ),
        }
    }
}

/// What a finished run produced.
#[derive(Debug)]
pub struct Run {
    pub outcome: Outcome,
    /// Every line the kernel printed on the serial console.
    pub serial: Vec<String>,
    /// What QEMU itself printed on stderr.
    pub qemu_stderr: String,
    /// From QEMU's start to the kernel's first line.
    pub kernel_entry: Option<Duration>,
    /// From QEMU's start to its exit.
    pub elapsed: Duration,
}

impl Run {
    /// The kernel's in-kernel test results.
    pub fn test_report(&self) -> TestReport {
        TestReport::parse(&self.serial)
    }

    /// The coherence stress's summary, if the run printed one.
    pub fn coherence(&self) -> Option<CoherenceSummary> {
        CoherenceSummary::find(&self.serial)
    }

    /// Whether any serial line contains `text`.
    pub fn printed(&self, text: &str) -> bool {
        report::printed(&self.serial, text)
    }

    /// The value of `key=` in the first serial line that starts with
    /// `prefix` (`tlb-counters:`, `tlbtest promote:`, ...), if both exist.
    pub fn value(&self, prefix: &str, key: &str) -> Option<&str> {
        let line = self.serial.iter().find(|line| line.starts_with(prefix))?;
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
    }

    /// [`Run::value`] as a number; panics with the run's description if the
    /// line, the key or a number is missing (for tests).
    pub fn number(&self, prefix: &str, key: &str) -> u64 {
        self.value(prefix, key)
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "no number {key}= in a line starting with '{prefix}'\n{}",
                    self.describe()
                )
            })
    }

    /// The outcome, the last serial lines and QEMU's stderr, for failure
    /// messages.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "run ended: {}\n{}",
            self.outcome,
            report::serial_tail(&self.serial)
        );
        if !self.qemu_stderr.trim().is_empty() {
            text.push_str("QEMU stderr:\n");
            text.push_str(&self.qemu_stderr);
        }
        text
    }
}

/// Boots the kernel as `config` describes and waits for the run to end.
pub fn run(config: &QemuConfig) -> Result<Run, RunError> {
    let start = Instant::now();
    let mut child = config
        .qemu
        .command()
        .args(config.qemu_args()?)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| RunError::NoQemu(config.qemu.program.clone(), error))?;

    let serial = Arc::new(Mutex::new(Vec::new()));
    let last_output = Arc::new(Mutex::new(Instant::now()));
    let kernel_entry = Arc::new(Mutex::new(None));
    let stdout = child.stdout.take().expect("stdout is piped");
    let stdout_reader = {
        let (serial, kernel_entry, last_output, echo) = (
            Arc::clone(&serial),
            Arc::clone(&kernel_entry),
            Arc::clone(&last_output),
            config.echo,
        );
        thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
                let line = String::from_utf8_lossy(&line)
                    .trim_end_matches('\r')
                    .to_string();
                if line.contains(KERNEL_ENTRY_LINE) {
                    kernel_entry.lock().unwrap().get_or_insert(start.elapsed());
                }
                *last_output.lock().unwrap() = Instant::now();
                if echo {
                    println!("{line}");
                }
                serial.lock().unwrap().push(line);
            }
        })
    };
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let stderr_reader = thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    let outcome = loop {
        let waited = if config.gdb {
            child.wait().map(Some)
        } else {
            child.wait_timeout(POLL_INTERVAL)
        };
        let give_up = match waited {
            Ok(Some(status)) => break Outcome::from_status(status.code()),
            Err(_) => Outcome::UnexpectedExit(None),
            Ok(None) if start.elapsed() >= config.timeout => Outcome::Timeout(config.timeout),
            Ok(None) => match config.stall_timeout {
                // The bootloader loads the kernel silently, and slowly on a
                // loaded host: silence counts only once the kernel is in.
                Some(silence)
                    if kernel_entry.lock().unwrap().is_some()
                        && last_output.lock().unwrap().elapsed() >= silence =>
                {
                    Outcome::Stalled(silence)
                }
                _ => continue,
            },
        };
        let _ = child.kill();
        let _ = child.wait();
        break give_up;
    };
    let elapsed = start.elapsed();
    let _ = stdout_reader.join();
    let qemu_stderr = stderr_reader.join().unwrap_or_default();
    let serial = std::mem::take(&mut *serial.lock().unwrap());
    let kernel_entry = *kernel_entry.lock().unwrap();
    Ok(Run {
        outcome,
        serial,
        qemu_stderr,
        kernel_entry,
        elapsed,
    })
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A fresh directory under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shootdown-qemu-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A prefix laid out as `dpkg-deb -x` of Debian's packages leaves it,
    /// without `missing`.
    fn fake_prefix(name: &str, missing: Option<&str>) -> PathBuf {
        let prefix = scratch(name);
        for dir in [PREFIX_MODULE_DIR].into_iter().chain(PREFIX_DATA_DIRS) {
            if Some(dir) != missing {
                fs::create_dir_all(prefix.join(dir)).unwrap();
            }
        }
        fs::create_dir_all(prefix.join("usr/bin")).unwrap();
        if missing != Some(PREFIX_BINARY) {
            fs::write(prefix.join(PREFIX_BINARY), "").unwrap();
        }
        prefix
    }

    fn env_of(command: &Command, key: &str) -> Option<PathBuf> {
        command
            .get_envs()
            .find(|(name, _)| *name == key)
            .and_then(|(_, value)| value.map(PathBuf::from))
    }

    #[test]
    fn a_prefix_sets_the_module_dir_and_firmware_paths() {
        let prefix = fake_prefix("complete", None);
        let qemu = Qemu::from_prefix(&prefix).unwrap();
        assert_eq!(qemu.program(), prefix.join(PREFIX_BINARY));
        let command = qemu.command();
        assert_eq!(
            env_of(&command, "QEMU_MODULE_DIR"),
            Some(prefix.join("usr/lib/x86_64-linux-gnu/qemu"))
        );
        let args: Vec<PathBuf> = command.get_args().map(PathBuf::from).collect();
        assert_eq!(
            args,
            [
                PathBuf::from("-L"),
                prefix.join("usr/share/qemu"),
                PathBuf::from("-L"),
                prefix.join("usr/share/seabios"),
            ]
        );
        fs::remove_dir_all(prefix).unwrap();
    }

    #[test]
    fn an_incomplete_prefix_is_rejected_naming_what_it_lacks() {
        for part in [PREFIX_BINARY, PREFIX_MODULE_DIR, "usr/share/seabios"] {
            let prefix = fake_prefix("incomplete", Some(part));
            let error = Qemu::from_prefix(&prefix).unwrap_err();
            assert_eq!(
                error,
                QemuPathError::PrefixLacks {
                    prefix: prefix.clone(),
                    part
                }
            );
            assert!(error.to_string().contains(part), "{error}");
            fs::remove_dir_all(prefix).unwrap();
        }
        let nowhere = PathBuf::from("/nonexistent/qemu10");
        assert_eq!(
            Qemu::from_prefix(&nowhere),
            Err(QemuPathError::NotADirectory(nowhere))
        );
    }

    #[test]
    fn a_binary_inside_a_prefix_is_run_as_the_prefix() {
        let prefix = fake_prefix("binary", None);
        let qemu = Qemu::from_program(prefix.join(PREFIX_BINARY)).unwrap();
        assert_eq!(qemu.prefix(), Some(prefix.as_path()));
        assert!(env_of(&qemu.command(), "QEMU_MODULE_DIR").is_some());
        fs::remove_dir_all(prefix).unwrap();
    }

    #[test]
    fn other_binaries_run_as_they_are() {
        let dir = scratch("plain");
        let program = dir.join("qemu-system-x86_64");
        fs::write(&program, "").unwrap();
        let qemu = Qemu::from_program(&program).unwrap();
        assert_eq!(qemu.prefix(), None);
        assert_eq!(qemu.command().get_args().count(), 0);
        assert_eq!(env_of(&qemu.command(), "QEMU_MODULE_DIR"), None);
        assert_eq!(
            Qemu::from_program(dir.join("missing")),
            Err(QemuPathError::NotAFile(dir.join("missing")))
        );
        assert_eq!(
            Qemu::from_program("no-such-qemu-anywhere"),
            Err(QemuPathError::NotInPath("no-such-qemu-anywhere".into()))
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
