//! The kernel command line: `key=value` words separated by spaces.
//!
//! The runner hands it over through QEMU's fw_cfg (see
//! [`hal::fw_cfg`]), so changing an option needs no new image. A machine
//! without fw_cfg (Bochs) gets it through the [`SLOT`] instead. Every
//! word must be a known option with a valid value: a typo is rejected with a
//! message naming the known options, because a silently ignored option makes
//! an experiment measure something else than the student thinks. The parser
//! is hand-written (no argument-parsing crate is no_std and this small): its
//! table of options is the list of the kernel's knobs, in one place.

use alloc::{string::String, vec::Vec};
use core::fmt;

use log::LevelFilter;

use crate::{tlb_mode::TlbOptions, vm_bug::VmBug, vm_lock::VmLock};

use options::OPTIONS;

/// The fw_cfg file the runner writes the command line into (the machine
/// side, `boot`, reads it).
pub const FW_CFG_FILE: &str = "opt/shootdown/cmdline";

/// The longest command line accepted.
pub const MAX_LENGTH: usize = 4096;

/// The most frames `frames.quarantine=` may hold back (256 MiB).
pub const MAX_QUARANTINE_FRAMES: usize = 65536;

/// What the kernel does after booting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Print the banner and the guided demo, then power off.
    Demo,
    /// Run the in-kernel tests selected by `test=`.
    Tests,
    /// Print the names of all in-kernel tests.
    ListTests,
    /// Run one user program from the ramdisk and wait for it.
    Program,
}

/// Everything the command line can set.
#[derive(Debug, PartialEq, Eq)]
pub struct Options {
    pub workload: Workload,
    /// Substring filters for test names (`test=a,b`); empty means all.
    pub test_filters: Vec<String>,
    pub log_level: LevelFilter,
    /// The program for [`Workload::Program`] and its argument string.
    pub program: Option<(String, String)>,
    /// `tlb=` and `tlb.*=`.
    pub tlb: TlbOptions,
    /// `profile=`: the sampling rate per CPU, if profiling is on.
    pub profile_hz: Option<u32>,
    /// `frames.quarantine=`: how many freed user frames wait before they
    /// can be handed out again (0: none wait).
    pub quarantine_frames: usize,
    /// `vm.bug=`: a deliberately broken address-space operation.
    pub vm_bug: Option<VmBug>,
    /// `vm.lock=`: how threads of one process share its address space.
    pub vm_lock: VmLock,
    /// `ipi.wait=`: whether a cross-call's caller halts while it waits for
    /// the answers (`true`) or spins.
    pub ipi_halt: bool,
    /// `syscall.unknown=log`: name each system call a program makes that
    /// this kernel does not offer (and the program) in the log.
    pub log_unknown_syscalls: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            workload: Workload::Demo,
            test_filters: Vec::new(),
            log_level: LevelFilter::Info,
            program: None,
            tlb: TlbOptions::default(),
            profile_hz: None,
            quarantine_frames: 0,
            vm_bug: None,
            vm_lock: VmLock::Fine,
            ipi_halt: true,
            log_unknown_syscalls: false,
        }
    }
}

/// Why the command line was rejected.
#[derive(Debug, PartialEq, Eq)]
pub enum CmdlineError {
    UnknownOption(String),
    MissingValue(&'static str),
    BadValue { option: &'static str, value: String },
    Repeated(&'static str),
    NotUtf8,
    TooLong { size: usize },
}

impl fmt::Display for CmdlineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownOption(word) => write!(f, "unknown option '{word}'")?,
            Self::MissingValue(name) => write!(f, "option '{name}' needs a value ({name}=...)")?,
            Self::BadValue { option, value } => {
                write!(f, "invalid value '{value}' for option '{option}'")?
            }
            Self::Repeated(name) => write!(f, "option '{name}' given more than once")?,
            Self::NotUtf8 => return write!(f, "the command line is not valid UTF-8"),
            Self::TooLong { size } => {
                return write!(
                    f,
                    "the command line is {size} bytes; the limit is {MAX_LENGTH}"
                );
            }
        }
        write!(f, "; known options:")?;
        for option in OPTIONS {
            write!(f, "\n    {}=<{}>", option.name, option.values)?;
        }
        Ok(())
    }
}

/// Parses a command line.
pub fn parse(text: &str) -> Result<Options, CmdlineError> {
    let mut options = Options::default();
    let mut seen: Vec<&'static str> = Vec::new();
    for word in text.split_ascii_whitespace() {
        let (name, value) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (word, None),
        };
        let spec = OPTIONS
            .iter()
            .find(|spec| spec.name == name)
            .ok_or_else(|| CmdlineError::UnknownOption(String::from(word)))?;
        if seen.contains(&spec.name) {
            return Err(CmdlineError::Repeated(spec.name));
        }
        seen.push(spec.name);
        let value = value
            .filter(|value| !value.is_empty())
            .ok_or(CmdlineError::MissingValue(spec.name))?;
        (spec.apply)(&mut options, value).map_err(|()| CmdlineError::BadValue {
            option: spec.name,
            value: String::from(value),
        })?;
    }
    Ok(options)
}

/// Parses the command line as the runner stored it: UTF-8, perhaps with the
/// trailing NUL that QEMU's `string=` files carry.
pub fn parse_bytes(bytes: &[u8]) -> Result<Options, CmdlineError> {
    let text = core::str::from_utf8(bytes).map_err(|_| CmdlineError::NotUtf8)?;
    parse(text.trim_end_matches('\0'))
}

mod options;
mod slot;
#[cfg(test)]
mod tests;

pub use slot::{SLOT, SLOT_CAPACITY, SLOT_END, SLOT_START, Slot, find_in_slot};
