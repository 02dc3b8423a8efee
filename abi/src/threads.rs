//! Threads: `clone`'s flags, `futex`'s operations, `arch_prctl`'s codes.
//!
//! A Linux thread is a `clone` that shares the address space
//! (`CLONE_VM`) and joins the caller's thread group (`CLONE_THREAD`). Its
//! library keeps the thread's descriptor at the FS base (`arch_prctl`, or
//! `CLONE_SETTLS`), and learns that the thread has ended from the kernel's
//! write of 0 to the thread's id word and a futex wake there
//! (`CLONE_CHILD_CLEARTID`, `set_tid_address`).

bitflags::bitflags! {
    /// `clone`'s flags: Linux's `CLONE_*` bits (the low byte is the signal
    /// sent to the parent when a child process ends, [`EXIT_SIGNAL`](Self::EXIT_SIGNAL)).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct CloneFlags: u64 {
        /// The exit-signal byte.
        const EXIT_SIGNAL = 0xff;
        /// `CLONE_VM`: share the address space.
        const VM = 0x100;
        /// `CLONE_FS`: share the working directory (there is none here).
        const FS = 0x200;
        /// `CLONE_FILES`: share the file table (the console is all).
        const FILES = 0x400;
        /// `CLONE_SIGHAND`: share signal handlers (there are none here).
        const SIGHAND = 0x800;
        /// `CLONE_VFORK`: not offered.
        const VFORK = 0x4000;
        /// `CLONE_THREAD`: a thread of the caller's process.
        const THREAD = 0x1_0000;
        /// `CLONE_SYSVSEM`: share System V semaphore undo (none here).
        const SYSVSEM = 0x4_0000;
        /// `CLONE_SETTLS`: the child's FS base is the `tls` argument.
        const SETTLS = 0x8_0000;
        /// `CLONE_PARENT_SETTID`: store the child's id at `parent_tid`.
        const PARENT_SETTID = 0x10_0000;
        /// `CLONE_CHILD_CLEARTID`: at the child's end, 0 and a futex wake
        /// at `child_tid`.
        const CHILD_CLEARTID = 0x20_0000;
        /// `CLONE_DETACHED`: ignored by Linux too.
        const DETACHED = 0x40_0000;
        /// `CLONE_CHILD_SETTID`: store the child's id at `child_tid`, in
        /// the child's memory.
        const CHILD_SETTID = 0x100_0000;
    }
}

impl CloneFlags {
    /// What a thread needs: the address space, its process, and the
    /// sharing that comes with them (`pthread_create` passes these, plus
    /// the tid and TLS flags).
    pub const THREAD_FLAGS: Self = Self::VM
        .union(Self::FS)
        .union(Self::FILES)
        .union(Self::SIGHAND)
        .union(Self::THREAD)
        .union(Self::SYSVSEM);
    /// `SIGCHLD`, the exit signal of a `fork`-like child.
    pub const SIGCHLD: u64 = 17;
}

/// `futex` operations (Linux's `FUTEX_*`): the low bits of `op` name the
/// operation, [`PRIVATE`](futex::PRIVATE) and
/// [`CLOCK_REALTIME`](futex::CLOCK_REALTIME) modify it.
pub mod futex {
    /// Sleep if the `u32` at `addr` still holds `value`, until woken or
    /// until the relative timeout.
    pub const WAIT: u64 = 0;
    /// Wake at most `value` sleepers at `addr`; returns how many woke.
    pub const WAKE: u64 = 1;
    /// Wake at most `value` sleepers at `addr` and move at most `timeout`
    /// (a count here, not a pointer) of the rest to sleep at `addr2`;
    /// returns how many were woken or moved.
    pub const REQUEUE: u64 = 3;
    /// [`REQUEUE`] if the word at `addr` still holds `value3`, else
    /// `EAGAIN`.
    pub const CMP_REQUEUE: u64 = 4;
    /// [`WAIT`] with an absolute timeout and a bitset (`value3`) that a
    /// [`WAKE_BITSET`] must share to wake it.
    pub const WAIT_BITSET: u64 = 9;
    /// [`WAKE`] of the sleepers whose bitset shares a bit with `value3`.
    pub const WAKE_BITSET: u64 = 10;
    /// The futex is private to the process (every futex here is keyed by
    /// address space and address, so this changes nothing).
    pub const PRIVATE: u64 = 128;
    /// An absolute timeout is on `CLOCK_REALTIME` (here the same clock).
    pub const CLOCK_REALTIME: u64 = 256;
    /// The bitset [`WAIT`] and [`WAKE`] use: every bit.
    pub const BITSET_MATCH_ANY: u32 = u32::MAX;
}

/// `arch_prctl` codes (`asm/prctl.h`).
pub mod arch_prctl {
    /// Set the GS base: not offered (the kernel's per-CPU data owns GS).
    pub const SET_GS: u64 = 0x1001;
    /// Set the FS base to `addr`.
    pub const SET_FS: u64 = 0x1002;
    /// Store the FS base at `addr`.
    pub const GET_FS: u64 = 0x1003;
    /// Store the GS base at `addr`: not offered.
    pub const GET_GS: u64 = 0x1004;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values are Linux's (`include/uapi/linux/sched.h`,
    /// `linux/futex.h`, `asm/prctl.h`).
    #[test]
    fn values_are_linux_values() {
        assert_eq!(CloneFlags::THREAD_FLAGS.bits(), 0x5_0f00);
        assert_eq!(CloneFlags::SETTLS.bits(), 0x8_0000);
        assert_eq!(CloneFlags::CHILD_CLEARTID.bits(), 0x20_0000);
        assert_eq!(CloneFlags::CHILD_SETTID.bits(), 0x100_0000);
        // What glibc 2.36's pthread_create passes.
        let glibc = 0x3d_0f00;
        assert!(
            CloneFlags::from_bits(glibc)
                .is_some_and(|flags| flags.contains(CloneFlags::THREAD_FLAGS))
        );
        assert_eq!((futex::WAIT, futex::WAKE, futex::PRIVATE), (0, 1, 128));
        assert_eq!(arch_prctl::SET_FS, 0x1002);
    }
}
