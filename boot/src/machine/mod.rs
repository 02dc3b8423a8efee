//! Booting the kernel in an emulator and judging how the run ended.
//!
//! Two emulators run the kernel: QEMU (`qemu.rs`), for every test tier and
//! `cargo run`, and Bochs (`bochs.rs`), for the PCID and INVPCID paths
//! QEMU's TCG cannot run. They used to have a runner family
//! each (a configuration, an outcome, a run, a description, a loop that
//! watched the clock and one that read the serial output), and the two
//! drifted: only QEMU's had a stall limit, only Bochs's said how long a
//! failed run took, and each split serial bytes into lines its own way.
//! What a run *is* does not depend on the emulator: a machine (CPUs,
//! memory, firmware, a kernel command line), limits on time and silence,
//! and at the end the kernel's serial lines and how the run ended. So
//! there is one of each:
//!
//! - [`Config`]: the machine and the limits, with [`Emulator`] for what
//!   only one emulator needs (which QEMU binary, which Bochs binary);
//! - [`Outcome`] and [`Run`]: how the run ended, what the kernel printed,
//!   and what the emulator said besides ([`Diagnostics`]);
//! - one place that turns serial bytes into lines (`serial.rs`) and one
//!   loop that enforces the timeout and the stall limit (`watch.rs`).
//!
//! What differs stays with its emulator: how the kernel command line gets
//! in (QEMU's fw_cfg, a slot in Bochs's copy of the image), how the kernel
//! ends the run (QEMU's `isa-debug-exit` status, a closing line under
//! Bochs), and where the serial output arrives (a pipe, a file). A machine
//! an emulator cannot provide (Bochs with UEFI, KVM, a GDB stub, or memory
//! that is not whole MiB) is refused with a [`RunError`] before anything
//! starts.

mod bochs;
mod config;
mod qemu;
mod run;
mod serial;
mod watch;

use std::path::{Path, PathBuf};

pub use bochs::{Bochs, Refusal};
pub use config::{Accelerator, Config, Echo, Emulator, Firmware, Guest};
pub use qemu::{Qemu, QemuPathError, linux_panic_before_init};
pub use run::{Diagnostics, Outcome, Run};

/// Boots the kernel as `config` describes and waits for the run to end.
pub fn run(config: &Config) -> Result<Run, RunError> {
    match &config.emulator {
        Emulator::Qemu(qemu) => qemu::run(config, qemu),
        Emulator::Bochs(bochs) => bochs::run(config, bochs),
    }
}

/// Why a run could not even start.
#[derive(Debug)]
pub enum RunError {
    /// The QEMU binary could not be started.
    NoQemu(PathBuf, std::io::Error),
    /// UEFI was asked for and OVMF is not installed.
    NoOvmf,
    /// Bochs cannot provide the machine the configuration describes.
    BochsRefuses(Refusal),
    /// Reading the image or writing a Bochs run's files failed.
    Io(String, std::io::Error),
    /// The image has no empty command-line slot, or more than one.
    Slot(String),
    /// The command line does not fit into the image's slot.
    CommandLineTooLong(usize),
    /// `setsid script ... bochs-bin` could not be started.
    NoScript(std::io::Error),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoQemu(program, error) if program == Path::new(qemu::PROGRAM) => write!(
                f,
                "cannot start {} ({error}); install it with `apt-get install qemu-system-x86`",
                qemu::PROGRAM
            ),
            Self::NoQemu(program, error) => {
                write!(f, "cannot start QEMU at {} ({error})", program.display())
            }
            Self::NoOvmf => write!(
                f,
                "UEFI firmware not found at {}; install it with `apt-get install ovmf`",
                qemu::OVMF_PATHS.join(" or ")
            ),
            Self::BochsRefuses(refusal) => write!(f, "Bochs cannot run this machine: {refusal}"),
            Self::Io(what, error) => write!(f, "{what}: {error}"),
            Self::Slot(problem) => write!(f, "the kernel image's command-line slot: {problem}"),
            Self::CommandLineTooLong(length) => write!(
                f,
                "the command line is {length} bytes; the image's slot holds {}",
                bochs::slot::CAPACITY
            ),
            Self::NoScript(error) => write!(
                f,
                "cannot start `setsid script` for Bochs ({error}); they come with util-linux and bsdutils"
            ),
        }
    }
}

impl std::error::Error for RunError {}
