//! Booting the kernel under Bochs, for the instructions QEMU's TCG lacks.
//!
//! QEMU's TCG has no PCID and no INVPCID, so under QEMU the kernel's PCID
//! paths (CR4.PCIDE, CR3 loads carrying a PCID and the no-flush bit, the
//! four INVPCID types, the CR4.PGE toggle) never run. Bochs 2.7 (Debian's
//! `bochs`, an SMP build; `.ci/bochs` installs it) emulates CPUs that have
//! both. Bochs drops every non-global TLB entry on every CR3 load and
//! ignores the no-flush bit, so a run here proves that the instructions
//! are legal where the kernel uses them and that the paths run to the end,
//! not that any entry is kept.
//!
//! Bochs differs from QEMU in three ways the runner works around:
//!
//! - **No fw_cfg**, so no way to pass the kernel command line at boot. The
//!   kernel image carries a fixed-size, empty command-line slot
//!   (`kernel::cmdline::SLOT`, found by its two markers); the runner writes
//!   the command line into the slot of its own temporary copy of the disk
//!   image ([`write_slot`]), and the kernel, finding no fw_cfg, reads it
//!   from its ELF file as the bootloader loaded it. The images `cargo`
//!   builds are never modified, and QEMU runs never read the slot.
//! - **No `isa-debug-exit`**: the kernel's final write to port 0xf4 does
//!   nothing, so the kernel prints that it halts, with the outcome
//!   ([`HALT_SUCCESS`], [`HALT_FAILURE`]), and Bochs runs on. The runner
//!   watches the serial output, a file, for that line and then kills Bochs,
//!   which ignores SIGTERM (and SIGINT only drops it into its debugger).
//! - **A terminal**: Debian ships only the `term` and `rfb` displays, and
//!   `term` needs a terminal, so Bochs runs under `script`, in a session of
//!   its own (`setsid`). The bootloader then picks a 24-bit VBE mode `term`
//!   cannot draw; `panic: action=fatal, term=report` lets the boot go on.
//!
//! Other details of the configuration ([`bochsrc`]): the disk is a flat
//! image padded to whole cylinders of 16 heads x 63 sectors (Bochs wants
//! the geometry to cover the file exactly), `ignore_bad_msrs` (an MSR Bochs
//! does not model reads as 0 with a warning in its log instead of raising
//! #GP), `ips=100000000`
//! (the TSC then reads about 100 MHz), and Bochs's start-up debugger prompt
//! is answered with `c` (continue) from a file.

use std::{
    fmt,
    fs::{self, File},
    io::Read,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    thread,
    time::{Duration, Instant},
};

use crate::coherence::CoherenceSummary;
use crate::report::{self, TestReport};

/// What the kernel prints last when the run passed and nothing ends the
/// emulator for it (`hal::qemu_exit::exit_qemu`).
pub const HALT_SUCCESS: &str = "no isa-debug-exit device: halting this CPU (Success)";
/// The same when it failed (a failed workload, a panic, a fault).
pub const HALT_FAILURE: &str = "no isa-debug-exit device: halting this CPU (Failure)";

/// The first line the kernel prints; its arrival times the boot.
const KERNEL_ENTRY_LINE: &str = "shootdown: kernel entered";

/// The command-line slot, as `kernel::cmdline` lays it out: these markers
/// around [`SLOT_CAPACITY`] bytes, NUL-padded. The kernel's constants are
/// the originals; the test `every_bios_image_has_one_empty_slot` checks
/// that these match them.
const SLOT_START: &[u8; 16] = b"<shootdown-cmdl:";
const SLOT_END: &[u8; 16] = b":shootdown-cmdl>";
const SLOT_CAPACITY: usize = 1024;

/// The disk geometry: heads and sectors per track (the image is padded to
/// whole cylinders of these).
const HEADS: u64 = 16;
const SECTORS_PER_TRACK: u64 = 63;
const SECTOR_SIZE: u64 = 512;

/// Where Debian's `bochsbios` and `vgabios` put the firmware.
const BIOS: &str = "/usr/share/bochs/BIOS-bochs-latest";
const VGA_BIOS: &str = "/usr/share/vgabios/vgabios.bin";

/// How often the runner looks at the serial file and the clock.
const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// How many lines of Bochs's log a failure shows.
const LOG_TAIL_LINES: usize = 15;

/// Everything that describes one Bochs run.
#[derive(Clone, Debug)]
pub struct BochsConfig {
    /// The emulator binary (`bochs-bin`; `/usr/bin/bochs` is a wrapper
    /// script around it).
    pub binary: PathBuf,
    pub cpus: u32,
    /// A Bochs CPU model (`bochs-bin -help cpu` lists them).
    pub cpu_model: String,
    /// Extra `cpuid:` options (for example `x2apic=0`), if any.
    pub cpuid: Option<String>,
    pub memory_mib: u32,
    /// The kernel command line, written into the image's slot.
    pub cmdline: String,
    /// The whole run, boot included, must end within this.
    pub timeout: Duration,
    /// Copy the serial output to our stdout as it arrives.
    pub echo: bool,
}

impl Default for BochsConfig {
    fn default() -> Self {
        Self {
            binary: PathBuf::from("bochs-bin"),
            cpus: 2,
            // PCID, INVPCID, PGE, x2APIC, SMEP and SMAP.
            cpu_model: String::from("corei7_haswell_4770"),
            cpuid: None,
            memory_mib: 512,
            cmdline: String::new(),
            timeout: Duration::from_secs(300),
            echo: false,
        }
    }
}

impl BochsConfig {
    pub fn binary(mut self, binary: impl Into<PathBuf>) -> Self {
        self.binary = binary.into();
        self
    }

    pub fn cpus(mut self, cpus: u32) -> Self {
        self.cpus = cpus;
        self
    }

    pub fn cpu_model(mut self, model: impl Into<String>) -> Self {
        self.cpu_model = model.into();
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

    /// The BIOS image to boot: the test image when the command line asks
    /// for the in-kernel tests (as in [`crate::qemu::QemuConfig::image`]).
    pub fn image(&self) -> &'static str {
        if crate::cmdline_wants_tests(&self.cmdline) {
            crate::TESTS_BIOS_IMAGE
        } else {
            crate::BIOS_IMAGE
        }
    }
}

/// Why a run could not even start.
#[derive(Debug)]
pub enum BochsError {
    /// Reading the image or writing the run's files failed.
    Io(String, std::io::Error),
    /// The image has no empty command-line slot, or more than one.
    Slot(String),
    /// The command line does not fit into the slot.
    CommandLineTooLong(usize),
    /// `setsid script ... bochs-bin` could not be started.
    Spawn(std::io::Error),
}

impl fmt::Display for BochsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(what, error) => write!(f, "{what}: {error}"),
            Self::Slot(problem) => write!(f, "the kernel image's command-line slot: {problem}"),
            Self::CommandLineTooLong(length) => write!(
                f,
                "the command line is {length} bytes; the image's slot holds {SLOT_CAPACITY}"
            ),
            Self::Spawn(error) => write!(
                f,
                "cannot start `setsid script` for Bochs ({error}); they come with util-linux and bsdutils"
            ),
        }
    }
}

impl std::error::Error for BochsError {}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The kernel printed [`HALT_SUCCESS`].
    Success,
    /// The kernel printed [`HALT_FAILURE`].
    Failure,
    /// Bochs stopped by itself before the kernel's last line (a triple
    /// fault, a Bochs panic, a bad configuration): `script`'s status.
    BochsExited(Option<i32>),
    /// No closing line within the timeout; Bochs was killed.
    Timeout(Duration),
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Success => write!(f, "success (the kernel halted reporting success)"),
            Self::Failure => write!(f, "the kernel halted reporting failure"),
            Self::BochsExited(Some(code)) => write!(
                f,
                "Bochs exited (status {code}) before the kernel's last line; see its log"
            ),
            Self::BochsExited(None) => write!(f, "Bochs was killed by a signal"),
            Self::Timeout(limit) => write!(
                f,
                "no closing line within {} s; Bochs was killed",
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
    /// The last lines of Bochs's log file.
    pub log_tail: Vec<String>,
    /// From Bochs's start to the kernel's first line.
    pub kernel_entry: Option<Duration>,
    /// From Bochs's start to the closing line (or to giving up).
    pub elapsed: Duration,
    /// The run's directory (bochsrc, disk, serial file, log), kept when
    /// the run did not succeed.
    pub kept: Option<PathBuf>,
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

    /// The outcome, the last serial lines and the end of Bochs's log, for
    /// failure messages.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "Bochs run ended after {:.1} s: {}\n{}",
            self.elapsed.as_secs_f64(),
            self.outcome,
            report::serial_tail(&self.serial)
        );
        if !self.log_tail.is_empty() {
            text.push_str("end of Bochs's log:\n");
            for line in &self.log_tail {
                text.push_str("  | ");
                text.push_str(line);
                text.push('\n');
            }
        }
        if let Some(dir) = &self.kept {
            text.push_str(&format!("the run's files are in {}\n", dir.display()));
        }
        text
    }
}

/// The Bochs configuration for `config`, with the run's files named
/// relative to its directory; `cylinders` of the padded disk.
pub fn bochsrc(config: &BochsConfig, cylinders: u64) -> String {
    let mut rc = String::new();
    let mut line = |text: &str| {
        rc.push_str(text);
        rc.push('\n');
    };
    line(
        "plugin_ctrl: unmapped=1, biosdev=1, speaker=0, extfpuirq=1, parallel=0, serial=1, iodebug=1",
    );
    line("config_interface: textconfig");
    line("display_library: term");
    line(&format!("memory: guest={0}, host={0}", config.memory_mib));
    line(&format!("romimage: file={BIOS}"));
    line(&format!("vgaromimage: file={VGA_BIOS}"));
    line("vga: extension=vbe, update_freq=5");
    line("pci: enabled=1, chipset=i440fx");
    line(&format!(
        "cpu: model={}, count={}, ips=100000000, quantum=16, reset_on_triple_fault=0, ignore_bad_msrs=1",
        config.cpu_model, config.cpus
    ));
    if let Some(cpuid) = &config.cpuid {
        line(&format!("cpuid: {cpuid}"));
    }
    line("clock: sync=none, time0=local");
    line("ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14");
    line(&format!(
        "ata0-master: type=disk, mode=flat, path=disk.img, cylinders={cylinders}, heads={HEADS}, spt={SECTORS_PER_TRACK}"
    ));
    line("boot: disk");
    line("com1: enabled=1, mode=file, dev=serial.txt");
    line("log: bochs.log");
    // Fatal for every device but the term display, whose complaint about
    // the bootloader's 24-bit framebuffer mode is only reported.
    line("panic: action=fatal, term=report");
    line("error: action=report");
    line("info: action=report");
    line("debug: action=ignore");
    line("mouse: enabled=0");
    rc
}

/// The empty command-line slots in `image`: where each one's field starts.
fn empty_slots(image: &[u8]) -> Vec<usize> {
    let length = SLOT_START.len() + SLOT_CAPACITY + SLOT_END.len();
    image
        .windows(SLOT_START.len())
        .enumerate()
        .filter(|&(at, window)| {
            window == SLOT_START
                && image.len() >= at + length
                && image[at + SLOT_START.len()..][..SLOT_CAPACITY]
                    .iter()
                    .all(|&byte| byte == 0)
                && image[at + SLOT_START.len() + SLOT_CAPACITY..].starts_with(SLOT_END)
        })
        .map(|(at, _)| at + SLOT_START.len())
        .collect()
}

/// Writes `cmdline` into the one empty command-line slot of `image`.
pub fn write_slot(image: &mut [u8], cmdline: &str) -> Result<(), BochsError> {
    if cmdline.len() > SLOT_CAPACITY || cmdline.contains('\0') {
        return Err(BochsError::CommandLineTooLong(cmdline.len()));
    }
    let field = match empty_slots(image)[..] {
        [field] => field,
        [] => {
            return Err(BochsError::Slot(String::from(
                "none found (an image from before the slot, or its field split by the file system)",
            )));
        }
        ref several => {
            return Err(BochsError::Slot(format!(
                "{} found; the runner cannot tell which one the kernel reads",
                several.len()
            )));
        }
    };
    image[field..][..cmdline.len()].copy_from_slice(cmdline.as_bytes());
    Ok(())
}

/// A new directory for one run's files.
fn run_directory() -> Result<PathBuf, BochsError> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shootdown-bochs-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)
        .map_err(|error| BochsError::Io(format!("creating {}", dir.display()), error))?;
    Ok(dir)
}

/// Writes the disk image (with the command line, padded to whole
/// cylinders), the configuration and the debugger's `c` into `dir`.
fn prepare(config: &BochsConfig, dir: &Path) -> Result<(), BochsError> {
    let image_path = config.image();
    let mut image = fs::read(image_path)
        .map_err(|error| BochsError::Io(format!("reading {image_path}"), error))?;
    write_slot(&mut image, &config.cmdline)?;
    let cylinder = HEADS * SECTORS_PER_TRACK * SECTOR_SIZE;
    let cylinders = (image.len() as u64).div_ceil(cylinder);
    image.resize((cylinders * cylinder) as usize, 0);
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        fs::write(&path, bytes)
            .map_err(|error| BochsError::Io(format!("writing {}", path.display()), error))
    };
    write("disk.img", &image)?;
    write("bochsrc", bochsrc(config, cylinders).as_bytes())?;
    // Bochs's debugger stops before the first instruction; `c` continues.
    write("continue", b"c\n")?;
    write("serial.txt", b"")
}

/// Quotes `text` for the shell `script` runs the command with.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            // The parent is the second field after the command, which is
            // in parentheses and may contain spaces.
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let after = &stat[stat.rfind(')')? + 1..];
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// Kills `script` and Bochs. `script` leads the session `setsid` made for
/// it (its pid is its process group); Bochs runs in a session of its own
/// on `script`'s terminal, so its group is killed by its own pid.
fn kill(script: &mut Child) {
    let mut groups: Vec<u32> = children(script.id());
    groups.push(script.id());
    for group in groups {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .stderr(Stdio::null())
            .status();
    }
    let _ = script.kill();
    let _ = script.wait();
}

/// Splits the text read so far into lines; the last, unfinished one stays
/// in `pending`.
fn take_lines(pending: &mut Vec<u8>, lines: &mut Vec<String>, echo: bool) {
    while let Some(newline) = pending.iter().position(|&byte| byte == b'\n') {
        let line: Vec<u8> = pending.drain(..=newline).collect();
        let line = String::from_utf8_lossy(&line[..line.len() - 1])
            .trim_end_matches('\r')
            .to_string();
        if echo {
            println!("{line}");
        }
        lines.push(line);
    }
}

/// The last [`LOG_TAIL_LINES`] lines of Bochs's log.
fn log_tail(dir: &Path) -> Vec<String> {
    let log = fs::read(dir.join("bochs.log")).unwrap_or_default();
    let log = String::from_utf8_lossy(&log);
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..]
        .iter()
        .map(|line| line.to_string())
        .collect()
}

/// Boots the kernel under Bochs as `config` describes and waits for the
/// kernel's closing line, the end of Bochs, or the timeout.
pub fn run(config: &BochsConfig) -> Result<Run, BochsError> {
    let dir = run_directory()?;
    prepare(config, &dir)?;
    let command = format!(
        "exec {} -q -f bochsrc -rc continue",
        shell_quote(&config.binary.display().to_string())
    );
    let start = Instant::now();
    let mut script = Command::new("setsid")
        .args(["script", "-qec", &command, "/dev/null"])
        .current_dir(&dir)
        .stdin(Stdio::null())
        // The term display's screen; nothing the kernel prints.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(BochsError::Spawn)?;

    let serial_path = dir.join("serial.txt");
    let mut serial_file = File::open(&serial_path)
        .map_err(|error| BochsError::Io(format!("opening {}", serial_path.display()), error))?;
    let (mut pending, mut serial) = (Vec::new(), Vec::new());
    let mut kernel_entry = None;
    let mut read_serial = |serial: &mut Vec<String>| {
        let mut fresh = Vec::new();
        // The file only grows: each read takes up where the last one
        // stopped. A failed read is retried at the next poll.
        let _ = serial_file.read_to_end(&mut fresh);
        pending.extend_from_slice(&fresh);
        take_lines(&mut pending, serial, config.echo);
    };
    let outcome = loop {
        let exited = script.try_wait();
        read_serial(&mut serial);
        if kernel_entry.is_none() && serial.iter().any(|line| line.contains(KERNEL_ENTRY_LINE)) {
            kernel_entry = Some(start.elapsed());
        }
        if serial.iter().any(|line| line.contains(HALT_SUCCESS)) {
            break Outcome::Success;
        }
        if serial.iter().any(|line| line.contains(HALT_FAILURE)) {
            break Outcome::Failure;
        }
        match exited {
            Ok(Some(status)) => break Outcome::BochsExited(status.code()),
            Err(_) => break Outcome::BochsExited(None),
            Ok(None) if start.elapsed() >= config.timeout => {
                break Outcome::Timeout(config.timeout);
            }
            Ok(None) => thread::sleep(POLL_INTERVAL),
        }
    };
    let elapsed = start.elapsed();
    kill(&mut script);
    // Whatever the kernel printed after the line that ended the run.
    read_serial(&mut serial);
    if !pending.is_empty() {
        serial.push(String::from_utf8_lossy(&pending).into_owned());
    }
    let log_tail = log_tail(&dir);
    let kept = if outcome == Outcome::Success {
        let _ = fs::remove_dir_all(&dir);
        None
    } else {
        Some(dir)
    };
    Ok(Run {
        outcome,
        serial,
        log_tail,
        kernel_entry,
        elapsed,
        kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image of `size` bytes of 0xcc with an empty slot at `at`.
    fn image_with_slot(size: usize, at: usize) -> Vec<u8> {
        let mut image = vec![0xcc; size];
        image[at..][..16].copy_from_slice(SLOT_START);
        image[at + 16..][..SLOT_CAPACITY].fill(0);
        image[at + 16 + SLOT_CAPACITY..][..16].copy_from_slice(SLOT_END);
        image
    }

    #[test]
    fn the_command_line_goes_into_the_slot() {
        let mut image = image_with_slot(4096, 100);
        write_slot(&mut image, "exec=coherence:100,2").unwrap();
        assert_eq!(&image[116..][..20], b"exec=coherence:100,2");
        assert_eq!(image[136], 0);
        // Written once, the slot is no longer empty: a second write fails.
        assert!(matches!(
            write_slot(&mut image, "x=y"),
            Err(BochsError::Slot(_))
        ));
    }

    #[test]
    fn no_slot_two_slots_and_long_lines_are_refused() {
        assert!(matches!(
            write_slot(&mut [0; 64], ""),
            Err(BochsError::Slot(_))
        ));
        let mut two = image_with_slot(8192, 0);
        two[4000..].copy_from_slice(&image_with_slot(4192, 0));
        assert!(matches!(write_slot(&mut two, ""), Err(BochsError::Slot(_))));
        let mut image = image_with_slot(4096, 0);
        let long = "x".repeat(SLOT_CAPACITY + 1);
        assert!(matches!(
            write_slot(&mut image, &long),
            Err(BochsError::CommandLineTooLong(_))
        ));
    }

    /// Both images carry exactly one empty slot, so the runner's markers
    /// and capacity match the kernel's (`kernel::cmdline::SLOT`), and the
    /// file system keeps the slot in one piece.
    #[test]
    fn every_bios_image_has_one_empty_slot() {
        for image in [crate::BIOS_IMAGE, crate::TESTS_BIOS_IMAGE] {
            let bytes = fs::read(image).unwrap_or_else(|error| panic!("{image}: {error}"));
            assert_eq!(empty_slots(&bytes).len(), 1, "{image}");
        }
    }

    #[test]
    fn the_configuration_names_the_geometry_and_the_cpu() {
        let rc = bochsrc(&BochsConfig::default(), 12);
        assert!(rc.contains("cylinders=12, heads=16, spt=63"), "{rc}");
        assert!(
            rc.contains("cpu: model=corei7_haswell_4770, count=2,"),
            "{rc}"
        );
        assert!(!rc.contains("cpuid:"), "{rc}");
    }
}
