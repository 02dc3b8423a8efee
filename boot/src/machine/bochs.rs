//! Running the machine under Bochs, for the instructions QEMU's TCG lacks.
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
//! Bochs differs from QEMU in the ways the runner works around:
//!
//! - **No fw_cfg**, so no way to pass the kernel command line at boot: the
//!   runner writes it into a slot of its own copy of the image ([`slot`]).
//! - **No `isa-debug-exit`**: the kernel's final write to port 0xf4 does
//!   nothing, so the kernel prints that it halts, with the outcome
//!   ([`HALT_SUCCESS`], [`HALT_FAILURE`]), and Bochs runs on. The runner
//!   watches the serial output, a file, for that line and then kills Bochs,
//!   which ignores SIGTERM (and SIGINT only drops it into its debugger).
//! - **A terminal**: Debian ships only the `term` and `rfb` displays, and
//!   `term` needs a terminal, so Bochs runs under `script`, in a session of
//!   its own ([`process`]). The bootloader then picks a 24-bit VBE mode
//!   `term` cannot draw; `panic: action=fatal, term=report` lets the boot
//!   go on.
//! - **Less to choose from**: Debian's build boots the BIOS image with
//!   Bochs's own BIOS, emulates every instruction itself and has no GDB
//!   stub, and its memory is whole MiB; a configuration that asks for
//!   UEFI, KVM, a debugger or other memory is refused ([`Refusal`]).
//!
//! Other details of the configuration ([`bochsrc`]): the disk is a flat
//! image padded to whole cylinders of 16 heads x 63 sectors (Bochs wants
//! the geometry to cover the file exactly), `ignore_bad_msrs` (an MSR Bochs
//! does not model reads as 0 with a warning in its log instead of raising
//! #GP), `ips=100000000` (the TSC then reads about 100 MHz), and Bochs's
//! start-up debugger prompt is answered with `c` (continue) from a file.

mod process;
pub mod slot;

use std::{
    fmt,
    fs::{self, File},
    path::{Path, PathBuf},
    process::Child,
    sync::atomic::{AtomicU32, Ordering},
    thread,
    time::{Duration, Instant},
};

use super::{
    Accelerator, Config, Diagnostics, Firmware, Guest, Outcome, Run, RunError, serial::Serial,
    watch::watch,
};

/// What the kernel prints last when the run passed and nothing ends the
/// emulator for it (`hal::qemu_exit::exit_qemu`).
const HALT_SUCCESS: &str = "no isa-debug-exit device: halting this CPU (Success)";
/// The same when it failed (a failed workload, a panic, a fault).
const HALT_FAILURE: &str = "no isa-debug-exit device: halting this CPU (Failure)";

/// The CPU model when the configuration names none: PCID, INVPCID, PGE,
/// x2APIC, SMEP and SMAP.
pub const DEFAULT_CPU_MODEL: &str = "corei7_haswell_4770";

/// The disk geometry: heads and sectors per track (the image is padded to
/// whole cylinders of these).
const HEADS: u64 = 16;
const SECTORS_PER_TRACK: u64 = 63;
const SECTOR_SIZE: u64 = 512;

/// Where Debian's `bochsbios` and `vgabios` put the firmware.
const BIOS: &str = "/usr/share/bochs/BIOS-bochs-latest";
const VGA_BIOS: &str = "/usr/share/vgabios/vgabios.bin";

/// How many lines of Bochs's log a failure shows.
const LOG_TAIL_LINES: usize = 15;

/// What only a Bochs run needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bochs {
    /// The emulator binary (`bochs-bin`; `/usr/bin/bochs` is a wrapper
    /// script around it).
    pub binary: PathBuf,
    /// Extra `cpuid:` options (for example `x2apic=0`), if any.
    pub cpuid: Option<String>,
}

impl Default for Bochs {
    /// `bochs-bin` from `PATH`.
    fn default() -> Self {
        Self::new("bochs-bin")
    }
}

impl Bochs {
    /// The Bochs binary at `binary` (a path, or a name in `PATH`).
    pub fn new(binary: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            cpuid: None,
        }
    }
}

/// What a configuration asks for that Bochs cannot provide.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Uefi,
    Kvm,
    Gdb,
    /// The memory size, which is not a whole number of MiB.
    Memory(String),
    /// A Linux guest (only QEMU loads a kernel and an initramfs itself).
    Linux,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uefi => write!(f, "it boots the BIOS image only (no UEFI firmware)"),
            Self::Kvm => write!(f, "it emulates every instruction itself (no KVM)"),
            Self::Gdb => write!(f, "Debian's build has no GDB stub"),
            Self::Memory(memory) => write!(f, "its memory is whole MiB, and {memory} is not"),
            Self::Linux => write!(f, "it boots this kernel's image only, not Linux"),
        }
    }
}

/// The memory `config` asks for, in MiB, if Bochs can run the machine.
fn check(config: &Config) -> Result<u32, Refusal> {
    if config.firmware == Firmware::Uefi {
        return Err(Refusal::Uefi);
    }
    if config.accelerator == Accelerator::Kvm {
        return Err(Refusal::Kvm);
    }
    if config.gdb {
        return Err(Refusal::Gdb);
    }
    if config.guest != Guest::Shootdown {
        return Err(Refusal::Linux);
    }
    memory_mib(&config.memory).ok_or_else(|| Refusal::Memory(config.memory.clone()))
}

/// A size in QEMU's `-m` syntax (`512M`, `2G`, `65536K`; a plain number
/// is MiB) as whole MiB.
fn memory_mib(memory: &str) -> Option<u32> {
    let (digits, kib_per_unit) = match memory.char_indices().last()? {
        (at, 'K' | 'k') => (&memory[..at], 1),
        (at, 'M' | 'm') => (&memory[..at], 1024),
        (at, 'G' | 'g') => (&memory[..at], 1024 * 1024),
        _ => (memory, 1024),
    };
    let kib = digits.parse::<u64>().ok()?.checked_mul(kib_per_unit)?;
    match u32::try_from(kib / 1024) {
        Ok(mib) if mib > 0 && kib % 1024 == 0 => Some(mib),
        _ => None,
    }
}

/// The Bochs configuration for `config` with `memory_mib` of memory, with
/// the run's files named relative to its directory; `cylinders` of the
/// padded disk.
fn bochsrc(config: &Config, bochs: &Bochs, memory_mib: u32, cylinders: u64) -> String {
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
    line(&format!("memory: guest={memory_mib}, host={memory_mib}"));
    line(&format!("romimage: file={BIOS}"));
    line(&format!("vgaromimage: file={VGA_BIOS}"));
    line("vga: extension=vbe, update_freq=5");
    line("pci: enabled=1, chipset=i440fx");
    line(&format!(
        "cpu: model={}, count={}, ips=100000000, quantum=16, reset_on_triple_fault=0, ignore_bad_msrs=1",
        config.effective_cpu_model(),
        config.cpus
    ));
    if let Some(cpuid) = &bochs.cpuid {
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

/// A new directory for one run's files.
fn run_directory() -> Result<PathBuf, RunError> {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "shootdown-bochs-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)
        .map_err(|error| RunError::Io(format!("creating {}", dir.display()), error))?;
    Ok(dir)
}

/// Writes the disk image (with the command line, padded to whole
/// cylinders), the configuration and the debugger's `c` into `dir`.
fn prepare(config: &Config, bochs: &Bochs, memory_mib: u32, dir: &Path) -> Result<(), RunError> {
    let image_path = config.image();
    let mut image = fs::read(image_path)
        .map_err(|error| RunError::Io(format!("reading {image_path}"), error))?;
    slot::write(&mut image, &config.cmdline)?;
    let cylinder = HEADS * SECTORS_PER_TRACK * SECTOR_SIZE;
    let cylinders = (image.len() as u64).div_ceil(cylinder);
    image.resize((cylinders * cylinder) as usize, 0);
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        fs::write(&path, bytes)
            .map_err(|error| RunError::Io(format!("writing {}", path.display()), error))
    };
    write("disk.img", &image)?;
    write(
        "bochsrc",
        bochsrc(config, bochs, memory_mib, cylinders).as_bytes(),
    )?;
    // Bochs's debugger stops before the first instruction; `c` continues.
    write("continue", b"c\n")?;
    write("serial.txt", b"")
}

/// One look at the run: reads what Bochs added to the serial file, and
/// says how the run ended if the kernel's closing line came or Bochs
/// stopped; else waits `interval`.
fn poll(
    script: &mut Child,
    file: &mut File,
    serial: &Serial,
    interval: Duration,
) -> Option<Outcome> {
    // Asked first, so that a Bochs that printed the closing line and
    // then exited counts as the kernel's report.
    let exited = script.try_wait();
    serial.catch_up(file);
    if serial.printed(HALT_SUCCESS) {
        return Some(Outcome::Success);
    }
    if serial.printed(HALT_FAILURE) {
        return Some(Outcome::Failure);
    }
    match exited {
        Ok(Some(status)) => Some(Outcome::UnexpectedExit(status.code())),
        Err(_) => Some(Outcome::UnexpectedExit(None)),
        Ok(None) => {
            thread::sleep(interval);
            None
        }
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

/// Boots `config` under `bochs` and waits for the kernel's closing line,
/// the end of Bochs, or a limit.
pub fn run(config: &Config, bochs: &Bochs) -> Result<Run, RunError> {
    let memory_mib = check(config).map_err(RunError::BochsRefuses)?;
    let dir = run_directory()?;
    prepare(config, bochs, memory_mib, &dir)?;
    let start = Instant::now();
    let mut script = process::spawn(bochs, &dir)?;
    let serial_path = dir.join("serial.txt");
    let mut file = File::open(&serial_path)
        .map_err(|error| RunError::Io(format!("opening {}", serial_path.display()), error))?;
    let serial = Serial::new(start, config.echo);
    let outcome = watch(config, start, &serial, |interval| {
        poll(&mut script, &mut file, &serial, interval)
    });
    let elapsed = start.elapsed();
    process::kill(&mut script);
    // Whatever the kernel printed after the line that ended the run.
    serial.catch_up(&mut file);
    let (serial, kernel_entry) = serial.finish();
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
        kernel_entry,
        elapsed,
        diagnostics: Diagnostics::Bochs { log_tail, kept },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bochs_config() -> Config {
        Config::default().emulator(Bochs::default()).cpus(2)
    }

    #[test]
    fn the_configuration_names_the_geometry_and_the_cpu() {
        let rc = bochsrc(&bochs_config(), &Bochs::default(), 512, 12);
        assert!(rc.contains("cylinders=12, heads=16, spt=63"), "{rc}");
        assert!(
            rc.contains("cpu: model=corei7_haswell_4770, count=2,"),
            "{rc}"
        );
        assert!(rc.contains("memory: guest=512, host=512\n"), "{rc}");
        assert!(!rc.contains("cpuid:"), "{rc}");
    }

    #[test]
    fn what_bochs_cannot_provide_is_refused() {
        assert_eq!(check(&bochs_config()), Ok(512));
        let uefi = bochs_config().firmware(Firmware::Uefi);
        let kvm = Config {
            accelerator: Accelerator::Kvm,
            ..bochs_config()
        };
        let gdb = Config {
            gdb: true,
            ..bochs_config()
        };
        let odd = bochs_config().memory("1000K");
        assert_eq!(check(&uefi), Err(Refusal::Uefi));
        assert_eq!(check(&kvm), Err(Refusal::Kvm));
        assert_eq!(check(&gdb), Err(Refusal::Gdb));
        assert_eq!(check(&odd), Err(Refusal::Memory("1000K".into())));
        // Refused before anything is written or started.
        let error = run(&uefi, &Bochs::new("/nonexistent/bochs-bin")).unwrap_err();
        assert!(matches!(error, RunError::BochsRefuses(Refusal::Uefi)));
        assert_eq!(
            error.to_string(),
            "Bochs cannot run this machine: it boots the BIOS image only (no UEFI firmware)"
        );
    }

    #[test]
    fn memory_sizes_become_whole_mib() {
        for (memory, mib) in [
            ("512M", Some(512)),
            ("64", Some(64)),
            ("2g", Some(2048)),
            ("65536K", Some(64)),
            ("1000K", None),
            ("0M", None),
            ("5000000G", None),
            ("lots", None),
            ("", None),
        ] {
            assert_eq!(memory_mib(memory), mib, "{memory}");
        }
    }
}
