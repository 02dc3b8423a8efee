//! The system-call ABI between the kernel and its ring-3 programs.
//!
//! A program enters the kernel with the `syscall` instruction: the number in
//! `rax`, up to six arguments in `rdi`, `rsi`, `rdx`, `r10`, `r8`, `r9` (the
//! Linux x86-64 convention; `rcx` and `r11` are clobbered by the instruction
//! itself). The result comes back in `rax`: a value `>= 0` on success, or a
//! negated [`Errno`] on failure.
//!
//! The ABI is Linux's x86-64 one wherever Linux has the call: its numbers
//! ([`Syscall`]), argument order and structures ([`Timespec`], the
//! [`wait_status`] encoding), errno values, and `PROT_*`, `MAP_*`, `MADV_*`
//! and `CLOCK_*` values, so a program written against Linux's manual pages
//! makes the same calls here. The few calls Linux has no counterpart for
//! are numbered from [`OWN_CALLS`] on. This crate is shared by the kernel
//! and the user library so the two can never disagree about a number.

#![no_std]
#![forbid(unsafe_code)]

pub mod auxv;
pub mod console;
pub mod identity;
mod syscall;
mod threads;
mod time;
pub mod wait_status;

pub use console::CONSOLE_FDS;
pub use syscall::{OWN_CALLS, Syscall};
pub use threads::{CloneFlags, arch_prctl, futex};
pub use time::{Timespec, clock};

/// Error numbers (Linux values), returned negated in `rax`.
#[repr(i64)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Errno {
    /// Operation not permitted.
    Perm = 1,
    /// No such program.
    NoEnt = 2,
    /// No such thread or process.
    Srch = 3,
    /// Interrupted (a futex wait that something other than a wake ended).
    Intr = 4,
    /// Bad file descriptor.
    BadF = 9,
    /// No child to wait for.
    Child = 10,
    /// Try again (a limit was reached).
    Again = 11,
    /// Out of memory.
    NoMem = 12,
    /// Bad address: a pointer outside the caller's memory.
    Fault = 14,
    /// Exists already (`MAP_FIXED_NOREPLACE` over a mapping).
    Exist = 17,
    /// Invalid argument.
    Inval = 22,
    /// Not a terminal (an `ioctl` the console does not answer).
    NoTty = 25,
    /// No space left (swap).
    NoSpc = 28,
    /// Unknown system call.
    NoSys = 38,
    /// Not supported (a flag `MAP_SHARED_VALIDATE` does not know).
    OpNotSupp = 95,
    /// Timed out (a futex wait whose timeout passed).
    TimedOut = 110,
}

impl Errno {
    /// The error encoded in a raw return value, if it is one.
    pub fn from_return(value: i64) -> Option<Self> {
        Some(match -value {
            1 => Self::Perm,
            2 => Self::NoEnt,
            3 => Self::Srch,
            4 => Self::Intr,
            9 => Self::BadF,
            10 => Self::Child,
            11 => Self::Again,
            12 => Self::NoMem,
            14 => Self::Fault,
            17 => Self::Exist,
            22 => Self::Inval,
            25 => Self::NoTty,
            28 => Self::NoSpc,
            38 => Self::NoSys,
            95 => Self::OpNotSupp,
            110 => Self::TimedOut,
            _ => return None,
        })
    }
}

/// "Any CPU": what the user library's `set_affinity` takes for a mask of
/// every CPU, and how the kernel marks a thread that is not pinned.
pub const ANY_CPU: u64 = u64::MAX;

/// The CPUs a `sched_setaffinity` mask can name here: the kernel's limit
/// (`tlb_types::MAX_CPUS`, which the kernel checks is the same). The mask
/// is a bit per CPU, CPU 0 the lowest bit of the first byte; bits beyond
/// are ignored, as Linux ignores CPUs it does not have.
pub const AFFINITY_CPUS: usize = 256;

bitflags::bitflags! {
    /// Page protections for `mmap` and `mprotect`: Linux's `PROT_*` bits.
    ///
    /// The system calls take them as [`Prot::bits`]; the kernel refuses any
    /// other bit with [`Errno::Inval`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Prot: u64 {
        /// `PROT_READ`.
        const READ = 1;
        /// `PROT_WRITE`.
        const WRITE = 2;
        /// `PROT_EXEC`.
        const EXEC = 4;
    }
}

impl Prot {
    /// `PROT_NONE`: no access at all. Defined outside `bitflags!` because a
    /// flag with no bits would be "contained" in every value.
    pub const NONE: Self = Self::empty();
}

bitflags::bitflags! {
    /// `mmap` flags: Linux's `MAP_*` bits.
    ///
    /// The system call takes them as [`MapFlags::bits`]. As Linux does, the
    /// kernel ignores bits it does not know, except under
    /// [`SHARED_VALIDATE`](Self::SHARED_VALIDATE), where they are
    /// [`Errno::OpNotSupp`]. It refuses a mapping without
    /// [`ANONYMOUS`](Self::ANONYMOUS) with [`Errno::BadF`] (there are no
    /// files) and one that is neither [`SHARED`](Self::SHARED) nor
    /// [`PRIVATE`](Self::PRIVATE) with [`Errno::Inval`].
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MapFlags: u64 {
        /// `MAP_SHARED`: shared with the children `fork` makes (a private
        /// mapping is copied, copy-on-write, instead).
        const SHARED = 0x01;
        /// `MAP_PRIVATE`.
        const PRIVATE = 0x02;
        /// `MAP_SHARED_VALIDATE`: `MAP_SHARED`, refusing unknown flags.
        const SHARED_VALIDATE = 0x03;
        /// `MAP_FIXED`: map exactly at `addr`, replacing what is there.
        const FIXED = 0x10;
        /// `MAP_ANONYMOUS`: not backed by a file, demand-zero memory.
        /// Required.
        const ANONYMOUS = 0x20;
        /// `MAP_NORESERVE`: accepted; nothing is reserved ahead anyway.
        const NORESERVE = 0x4000;
        /// `MAP_POPULATE`: accepted; pages still come at the first touch.
        const POPULATE = 0x8000;
        /// `MAP_STACK`: accepted (a hint on Linux too).
        const STACK = 0x2_0000;
        /// `MAP_FIXED_NOREPLACE`: exactly at `addr`, or [`Errno::Exist`] if
        /// anything is mapped there.
        const FIXED_NOREPLACE = 0x10_0000;
    }
}

/// `madvise` advice values (Linux's `MADV_*`): one value per call, not a
/// set of bits.
pub mod advice {
    /// Drop the pages; the next touch sees zeroes.
    pub const DONTNEED: u64 = 4;
    /// Reclaim the pages now: write them to swap and free the frames.
    /// Pages another process maps too (shared copy-on-write with a `fork`
    /// child, or a `MAP_SHARED` page both map) stay resident.
    pub const PAGEOUT: u64 = 21;
}

/// Page size for every user mapping.
pub const PAGE_SIZE: u64 = 4096;

/// User programs are linked to start here; the lower half up to
/// [`USER_END`] belongs to user space.
pub const USER_IMAGE_BASE: u64 = 0x40_0000;

/// One past the highest user address (the lower canonical half).
pub const USER_END: u64 = 0x0000_8000_0000_0000;

/// Most processes that may exist at once, zombies (ended, not yet waited
/// for) included; `spawn` beyond that fails with [`Errno::Again`].
pub const MAX_PROCESSES: usize = 64;

/// Most threads one process may have at once, its first thread included;
/// a thread `clone` beyond that fails with [`Errno::Again`].
pub const MAX_THREADS: usize = 64;

/// Most regions (mappings with one protection) one process may have; an
/// `mmap`, `mprotect` or `munmap` that would leave more (splitting a region
/// makes two) fails with [`Errno::NoMem`], as Linux does beyond
/// `vm.max_map_count`.
pub const MAX_REGIONS: usize = 1024;

/// How many pages swap holds (16 MiB); `madvise(PAGEOUT)` beyond that
/// leaves the rest resident and fails with [`Errno::NoSpc`].
pub const SWAP_SLOTS: usize = 4096;

/// The TLB counters `tlb_stats` copies, in order, one `u64` each: totals
/// over all CPUs since boot. What each one counts is documented in the `mm`
/// crate (`Counters`); the kernel checks at test time that this list matches.
pub const TLB_COUNTER_NAMES: [&str; 16] = [
    "ipis_sent",
    "ipis_received",
    "flush_handler_runs",
    "local_full_flushes",
    "switch_flushes",
    "local_partial_flushes",
    "pages_invalidated",
    "broadcast_ops",
    "broadcast_syncs",
    "promotions",
    "transitions_finished",
    "rollovers",
    "batch_flushes",
    "exhaustion_fallbacks",
    "cpu_set_trims",
    "ceiling_full_flushes",
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The C programs' header (`user/c/shootdown.h`) names the kernel's own
    /// call and the counters it uses by the numbers this crate gives them.
    #[test]
    fn the_c_header_agrees() {
        extern crate std;
        use std::format;
        let header = include_str!("../../user/c/shootdown.h");
        let define = |name: &str| -> u64 {
            let prefix = format!("#define {name} ");
            let line = header
                .lines()
                .find_map(|line| line.strip_prefix(prefix.as_str()))
                .unwrap_or_else(|| panic!("shootdown.h does not define {name}"));
            line.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: {line}"))
        };
        assert_eq!(define("SHOOTDOWN_SYS_TLB_STATS"), Syscall::TlbStats as u64);
        assert_eq!(define("SHOOTDOWN_COUNTERS"), TLB_COUNTER_NAMES.len() as u64);
        let mut checked = 0;
        for (index, name) in TLB_COUNTER_NAMES.iter().enumerate() {
            let macro_name = format!("SHOOTDOWN_COUNTER_{}", name.to_uppercase());
            if header.contains(&format!("#define {macro_name} ")) {
                assert_eq!(define(&macro_name), index as u64, "{name}");
                checked += 1;
            }
        }
        assert_eq!(
            checked,
            header.matches("#define SHOOTDOWN_COUNTER_").count()
        );
    }

    /// The bits are Linux's (`include/uapi/asm-generic/mman-common.h`).
    #[test]
    fn flag_values_are_linux_values() {
        assert_eq!(Prot::NONE.bits(), 0);
        assert_eq!(Prot::READ.bits(), 0x1);
        assert_eq!(Prot::WRITE.bits(), 0x2);
        assert_eq!(Prot::EXEC.bits(), 0x4);
        assert_eq!(MapFlags::SHARED.bits(), 0x01);
        assert_eq!(MapFlags::PRIVATE.bits(), 0x02);
        assert_eq!(MapFlags::SHARED_VALIDATE.bits(), 0x03);
        assert_eq!(MapFlags::FIXED.bits(), 0x10);
        assert_eq!(MapFlags::ANONYMOUS.bits(), 0x20);
        assert_eq!(MapFlags::NORESERVE.bits(), 0x4000);
        assert_eq!(MapFlags::POPULATE.bits(), 0x8000);
        assert_eq!(MapFlags::STACK.bits(), 0x2_0000);
        assert_eq!(MapFlags::FIXED_NOREPLACE.bits(), 0x10_0000);
        assert_eq!(advice::DONTNEED, 4);
        assert_eq!(advice::PAGEOUT, 21);
    }

    /// What the kernel accepts: exactly the known bits, in any combination.
    #[test]
    fn only_known_bits_decode() {
        assert_eq!(Prot::all().bits(), 0x7);
        assert_eq!(MapFlags::all().bits(), 0x12_c033);
        for raw in 0..=Prot::all().bits() {
            assert_eq!(Prot::from_bits(raw).map(|prot| prot.bits()), Some(raw));
        }
        for raw in [0x8, 0x80, 1 << 63, u64::MAX] {
            assert_eq!(Prot::from_bits(raw), None, "{raw:#x}");
            assert_eq!(Prot::from_bits(raw | 1), None, "{raw:#x} | READ");
        }
        let private_anonymous = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        assert_eq!(MapFlags::from_bits(0x22), Some(private_anonymous));
        for raw in [0x4, 0x8, 0x40, 0x1000, 1 << 63, u64::MAX] {
            assert_eq!(MapFlags::from_bits(raw | 0x22), None, "{raw:#x}");
        }
    }
}
