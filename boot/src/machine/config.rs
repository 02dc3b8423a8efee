//! What one run is: the machine, the kernel command line, the limits, and
//! which emulator provides the machine.
//!
//! The fields describe the machine as a student asks for it (CPUs, memory,
//! BIOS or UEFI, TCG or KVM, a debugger), whichever emulator runs it;
//! [`Emulator`] holds only what one emulator needs and the other has no
//! use for. An emulator that cannot provide what the fields ask for
//! refuses the run before it starts (Bochs: [`super::Refusal`]).

use std::{path::PathBuf, time::Duration};

use super::{Bochs, Qemu, bochs};

/// Which kernel the machine boots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Guest {
    /// This project's kernel, from its disk image, with the command line
    /// through fw_cfg (or Bochs's slot).
    Shootdown,
    /// A Linux kernel and an initramfs, which QEMU loads itself (`-kernel`,
    /// `-initrd`), with the command line appended to Linux's (`-append`):
    /// `bench --against linux` runs the same program on both kernels.
    Linux { kernel: PathBuf, initramfs: PathBuf },
}

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

/// The emulator that runs the machine, with what only it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Emulator {
    /// Which QEMU binary.
    Qemu(Qemu),
    /// Which Bochs binary, and its extra CPUID options.
    Bochs(Bochs),
}

impl From<Qemu> for Emulator {
    fn from(qemu: Qemu) -> Self {
        Self::Qemu(qemu)
    }
}

impl From<Bochs> for Emulator {
    fn from(bochs: Bochs) -> Self {
        Self::Bochs(bochs)
    }
}

/// Everything that describes one run.
#[derive(Clone, Debug)]
pub struct Config {
    pub emulator: Emulator,
    pub cpus: u32,
    /// `None`: the emulator's default ([`Config::effective_cpu_model`]).
    pub cpu_model: Option<String>,
    /// Guest memory in QEMU's `-m` syntax (`512M`, `2G`; a plain number is
    /// MiB).
    pub memory: String,
    pub accelerator: Accelerator,
    pub firmware: Firmware,
    /// Start a GDB stub on tcp::1234 and wait for the debugger (no timeout
    /// or stall limit then).
    pub gdb: bool,
    /// The whole run, boot included, must end within this.
    pub timeout: Duration,
    /// Kill the run if the kernel, once entered, prints nothing for this
    /// long: a hung kernel is silent, so this catches hangs long before
    /// `timeout` (which alone bounds the silent boot before it).
    pub stall_timeout: Option<Duration>,
    /// The kernel command line.
    pub cmdline: String,
    /// Which serial lines to copy to our stdout as they arrive.
    pub echo: Echo,
    /// This kernel, or Linux.
    pub guest: Guest,
}

impl Default for Config {
    /// QEMU from `PATH`, 4 CPUs, 512 MiB, BIOS, TCG; at most 900 s, and
    /// 120 s without output once the kernel runs. Both are safety nets, not
    /// measures: CI runs several emulators on two cores, and a kernel that
    /// hangs is silent, so the stall limit catches it early.
    fn default() -> Self {
        Self {
            emulator: Emulator::Qemu(Qemu::system()),
            cpus: 4,
            cpu_model: None,
            memory: String::from("512M"),
            accelerator: Accelerator::Tcg,
            firmware: Firmware::Bios,
            gdb: false,
            timeout: Duration::from_secs(900),
            stall_timeout: Some(Duration::from_secs(120)),
            cmdline: String::new(),
            echo: Echo::Nothing,
            guest: Guest::Shootdown,
        }
    }
}

/// Which of the kernel's serial lines a run copies to the runner's stdout
/// as they arrive (all of them are recorded either way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Echo {
    #[default]
    Nothing,
    Everything,
    /// Every line but those that start with one of these: records a
    /// program reads back (the timeline's thousands of event lines) rather
    /// than text for a reader.
    AllBut(&'static [&'static str]),
}

impl Echo {
    /// Whether `line` is copied.
    pub fn shows(self, line: &str) -> bool {
        match self {
            Self::Nothing => false,
            Self::Everything => true,
            Self::AllBut(prefixes) => !prefixes.iter().any(|prefix| line.starts_with(prefix)),
        }
    }
}

impl Config {
    /// The emulator: a [`Qemu`], a [`Bochs`] or an [`Emulator`].
    pub fn emulator(mut self, emulator: impl Into<Emulator>) -> Self {
        self.emulator = emulator.into();
        self
    }

    /// The CPU model, in the emulator's naming: with features for QEMU
    /// (`EPYC-Milan,+x2apic`, `max`), one of `bochs-bin -help cpu`'s for
    /// Bochs (`corei7_ivy_bridge_3770k`).
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

    pub fn guest(mut self, guest: Guest) -> Self {
        self.guest = guest;
        self
    }

    pub fn memory(mut self, memory: impl Into<String>) -> Self {
        self.memory = memory.into();
        self
    }

    /// The CPU model the emulator is asked for: [`Config::cpu_model`], or
    /// EPYC-Milan under QEMU's TCG, the host's CPU under KVM, and Bochs's
    /// Haswell (PCID, INVPCID, PGE, x2APIC, SMEP and SMAP).
    pub fn effective_cpu_model(&self) -> &str {
        match (&self.cpu_model, &self.emulator, self.accelerator) {
            (Some(model), _, _) => model,
            (None, Emulator::Qemu(_), Accelerator::Tcg) => "EPYC-Milan",
            (None, Emulator::Qemu(_), Accelerator::Kvm) => "host,-arch-capabilities",
            (None, Emulator::Bochs(_), _) => bochs::DEFAULT_CPU_MODEL,
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_emulator_has_its_default_cpu_model() {
        let qemu = Config::default();
        assert_eq!(qemu.effective_cpu_model(), "EPYC-Milan");
        let kvm = Config {
            accelerator: Accelerator::Kvm,
            ..Config::default()
        };
        assert_eq!(kvm.effective_cpu_model(), "host,-arch-capabilities");
        let bochs = Config::default().emulator(Bochs::default());
        assert_eq!(bochs.effective_cpu_model(), "corei7_haswell_4770");
        assert_eq!(bochs.cpu_model("max").effective_cpu_model(), "max");
    }

    #[test]
    fn tests_boot_the_test_image() {
        let config = Config::default().cmdline("tlb=ipi test=smp::");
        assert_eq!(config.image(), crate::TESTS_BIOS_IMAGE);
        let uefi = config.cmdline("exec=coherence").firmware(Firmware::Uefi);
        assert_eq!(uefi.image(), crate::UEFI_IMAGE);
    }

    #[test]
    fn echo_all_but_hides_only_the_named_records() {
        let echo = Echo::AllBut(&["timeline: ", "timeline-end: "]);
        assert!(!echo.shows("timeline: cpu=0 ns=5 request began=1"));
        assert!(!echo.shows("timeline-end: cpus=4 capacity=4096 recorded=9 dropped=0"));
        assert!(echo.shows("tlb-counters: mode=ipi"));
        assert!(Echo::Everything.shows("timeline: cpu=0"));
        assert!(!Echo::Nothing.shows("shootdown: kernel entered"));
    }
}
