//! `vm.bug=`: a deliberate bug in the address-space code, so that a student
//! (and CI) can watch a ring-3 test catch it, as `tlb.bug=` does for the
//! shootdown protocol ([`crate::tlb_mode::BUGS`]).
//!
//! `cowdirty` races a copy-on-write write against `madvise(DONTNEED)` and
//! checks that neither side of a fork ever sees the other's data; on a
//! correct kernel it prints `violations=0` for ever, and a test that has
//! never failed proves little. The bug here is the one it is named after.
//!
//! Pure apart from one flag: the names are parsed with the rest of the
//! command line (unit-tested on the host), and `task::vm` asks [`is_on`].

use spin::Once;

/// The bugs `vm.bug=` can switch on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmBug {
    /// The kernel's own writes to user memory (a system call filling a
    /// buffer) go to whatever frame the page maps, without breaking
    /// copy-on-write first: the write lands in a frame the other side of a
    /// fork still reads. Linux's Dirty COW (CVE-2016-5195) was this, on the
    /// path that lets the kernel write a process's pages for it.
    KernelWriteSkipsCopyOnWrite,
    /// A page fault that finds an entry *busy* (a copy-on-write break
    /// between taking the old frame out and mapping the copy) fills it
    /// with a fresh zeroed page, as if it were a hole: the breaker then
    /// finds its entry taken, and every word written to the page before
    /// the fork is lost. `vmstress`, whose threads break copy-on-write of
    /// the same pages at once after each fork, reads the zeroes.
    FillBusyEntry,
    /// A missing page table is installed by a plain store instead of a
    /// compare-exchange (`hal::page_table::install_tables_racily`): two
    /// threads that fault on neighbouring pages at once may each install
    /// a table, and the mapping made in the loser's is lost.
    RacyTableInstall,
}

/// Names for `vm.bug=`.
pub const VM_BUGS: &[(&str, VmBug)] = &[
    ("kernel-write-skips-cow", VmBug::KernelWriteSkipsCopyOnWrite),
    ("fill-busy-entry", VmBug::FillBusyEntry),
    ("racy-table-install", VmBug::RacyTableInstall),
];

/// The bug this boot runs with, if any: set once, before any process runs.
static SWITCHED_ON: Once<VmBug> = Once::new();

/// Switches on `bug` for the rest of the boot, and says so.
pub fn switch_on(bug: VmBug) {
    SWITCHED_ON.call_once(|| bug);
    log::warn!("vm: deliberate bug {bug:?} is switched on (vm.bug=)");
}

/// Whether `bug` is switched on.
pub fn is_on(bug: VmBug) -> bool {
    SWITCHED_ON.get() == Some(&bug)
}
