//! Scenarios 8 to 11: the address space's own locking (issue 33), where many threads of one
//! process fault and discard pages at once (`kernel/src/task/vm/`, whose module docs give
//! the rules).
//!
//! Scenario 8 runs the real `mm` flush on the simulated machine of `machine.rs`. Scenarios 9
//! to 11 need no TLB: they are about who may touch a frame or a page table when, and they
//! model the kernel's steps on loom atomics, one operation per step of the kernel's code,
//! with the same memory orderings (the kernel's page-table entries are atomics in
//! `hal::phys`, its frame references in `kernel/src/memory/shared_frames.rs`). A frame or a
//! page table is a loom `UnsafeCell` with a `freed` flag: a use that races with the free is
//! a causality violation, a use ordered after it fails the flag's assertion. Each scenario
//! has mutated twins, each one step of the kernel's discipline left out, which loom must
//! reject.

use super::{RACE, STALE, explore, rejected};
use crate::machine::{Cfg, World};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use loom::sync::{Arc, RwLock};
use mm::FlushRange;

/// What the frame and table checks say when a use comes after the free.
const USE_AFTER_FREE: &str = "use after free";

/// A frame, or a page-table page, that can be used and freed once.
struct Memory {
    cell: UnsafeCell<()>,
    freed: AtomicBool,
}

impl Memory {
    fn new() -> Self {
        Self {
            cell: UnsafeCell::new(()),
            freed: AtomicBool::new(false),
        }
    }

    /// A read or write of the memory by `who`.
    fn used_by(&self, who: &str) {
        self.cell.with_mut(|_| ());
        assert!(
            !self.freed.load(Ordering::Relaxed),
            "{USE_AFTER_FREE}: {who} uses memory already freed"
        );
    }

    fn free(&self) {
        self.cell.with_mut(|_| ());
        assert!(!self.freed.swap(true, Ordering::Relaxed), "double free");
    }
}

// ---------------------------------------------------------------------------------------
// 8. Two discards of one page.

/// What the discard that finds the entry already empty does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Loser {
    /// Flushes anyway (`AddressSpace::discard` always calls `flush_then_free`).
    Flushes,
    /// Mutation: returns at once, having taken nothing.
    Returns,
}

/// CPUs 0 and 1 run threads of `mm`, and both may hold a translation of its page. Each
/// calls `madvise(DONTNEED)` on the page at once: both swap the entry out, only one gets
/// the frame. The winner flushes and frees the frame. The other must flush too, although
/// it took nothing: its own TLB (or a third CPU's) may still hold the translation that the
/// winner's flush has not reached yet, and its thread, back in user mode, would read the
/// old frame instead of zeroes, perhaps after the winner freed it.
fn two_discards(loser: Loser) {
    let w = World::boot();
    for cpu in [0, 1] {
        w.sys.switch_mm(&w.setup(cpu, Cfg::IPI), &w.mm);
    }
    // A first flush uses up the periodic CPU-set trim (it would interrupt the other anyway).
    w.setup_flush(0, Cfg::IPI);
    let returned = Arc::new(AtomicUsize::new(0));
    let discard = move |cpu, returned: Arc<AtomicUsize>| {
        let hw = w.cpu(cpu, Cfg::IPI);
        hw.begin();
        let (took, version) = w.take_page_entry();
        if took || loser == Loser::Flushes {
            w.sys
                .flush_tlb_mm_range(&hw, &w.mm, FlushRange::pages(0x4000, 0x5000), false);
            w.flush_returned(version);
        }
        if took {
            w.free_page();
        }
        hw.return_after_revoking("madvise(DONTNEED)");
        // Interrupts stay on until the other discard is back too.
        returned.fetch_add(1, Ordering::Release);
        while returned.load(Ordering::Acquire) < 2 {
            hw.interrupts_on();
            loom::thread::yield_now();
        }
    };
    let other = {
        let returned = returned.clone();
        loom::thread::spawn(move || discard(1, returned))
    };
    discard(0, returned);
    other.join().unwrap();
    w.check();
}

#[test]
fn two_discards_are_safe() {
    explore(
        "two discards of one page",
        3,
        |_| two_discards(Loser::Flushes),
        super::CLEAN_IPI,
    );
}

#[test]
fn two_discards_reject_a_loser_that_skips_its_flush() {
    rejected(
        "two discards / the loser skips its flush",
        3,
        |_| two_discards(Loser::Returns),
        super::CLEAN_IPI,
        STALE,
    );
}

// ---------------------------------------------------------------------------------------
// 9. A kernel copy into user memory versus `madvise(DONTNEED)`.

/// How the kernel's copy holds on to the frame it writes through the physical window.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pin {
    /// `for_each_page`: take a reference, fence, check that the page still maps the frame.
    Checked,
    /// Mutation: the reference and the check without the fence between them.
    Unfenced,
    /// Mutation: a reference, but no check that the page still maps the frame.
    Unchecked,
    /// Mutation: no reference at all.
    None,
}

const EMPTY: u64 = 0;
const PRESENT: u64 = 1;

/// One page, mapped, and its frame with the references beyond the page's own
/// (`shared_frames`' counter).
struct MappedPage {
    entry: AtomicU64,
    extra: AtomicU64,
    frame: Memory,
}

impl MappedPage {
    fn new() -> Self {
        Self {
            entry: AtomicU64::new(PRESENT),
            extra: AtomicU64::new(0),
            frame: Memory::new(),
        }
    }

    /// `shared_frames::share`.
    fn share(&self) {
        self.extra.fetch_add(1, Ordering::AcqRel);
    }

    /// `shared_frames::release`: the last reference frees the frame.
    fn release(&self) {
        let mut seen = self.extra.load(Ordering::Acquire);
        loop {
            if seen == 0 {
                self.frame.free();
                return;
            }
            match self
                .extra
                .compare_exchange(seen, seen - 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(now) => seen = now,
            }
        }
    }
}

/// A system call's `copy_out` (shared lock) writes the page through the kernel's window on
/// physical memory while another thread discards it (shared lock too). The discard's flush
/// does not wait for the copy: no TLB holds the window's translation for this process. So
/// the copy pins the frame, then checks that the page still maps it; the discard swaps the
/// entry out, flushes (whose generation bump ends with a SeqCst fence) and releases its
/// reference. Pin-then-check against take-then-release is the store-buffering pattern: a
/// SeqCst fence on each side keeps both from reading the other's old value, which would
/// let the discard free the frame while the copy, having seen the page still mapped,
/// writes into it.
fn copy_vs_discard(pin: Pin) {
    let page = Arc::new(MappedPage::new());
    let discard = {
        let page = page.clone();
        loom::thread::spawn(move || {
            if page.entry.swap(EMPTY, Ordering::AcqRel) == PRESENT {
                // The flush: `mm` bumps the generation and fences (SeqCst).
                fence(Ordering::SeqCst);
                page.release();
            }
        })
    };
    if page.entry.load(Ordering::Acquire) == PRESENT {
        match pin {
            Pin::None => page.frame.used_by("the kernel's copy"),
            Pin::Checked | Pin::Unfenced | Pin::Unchecked => {
                page.share();
                if pin == Pin::Checked {
                    fence(Ordering::SeqCst);
                }
                if pin == Pin::Unchecked || page.entry.load(Ordering::Acquire) == PRESENT {
                    page.frame.used_by("the kernel's copy");
                }
                page.release();
            }
        }
    }
    discard.join().unwrap();
}

#[test]
fn copy_vs_discard_is_safe() {
    explore(
        "kernel copy vs discard",
        3,
        |_| copy_vs_discard(Pin::Checked),
        super::CLEAN_IPI,
    );
}

#[test]
fn copy_vs_discard_rejects_an_unpinned_copy() {
    rejected(
        "kernel copy vs discard / no reference",
        3,
        |_| copy_vs_discard(Pin::None),
        super::CLEAN_IPI,
        RACE,
    );
}

#[test]
fn copy_vs_discard_rejects_an_unchecked_pin() {
    rejected(
        "kernel copy vs discard / no check after the reference",
        3,
        |_| copy_vs_discard(Pin::Unchecked),
        super::CLEAN_IPI,
        RACE,
    );
}

#[test]
fn copy_vs_discard_rejects_an_unfenced_pin() {
    rejected(
        "kernel copy vs discard / no fence between reference and check",
        3,
        |_| copy_vs_discard(Pin::Unfenced),
        super::CLEAN_IPI,
        RACE,
    );
}

// ---------------------------------------------------------------------------------------
// 10. `munmap`'s pruning versus a fault in a neighbouring region.

/// How `munmap` holds the region table while it prunes page-table pages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PruneLock {
    /// Exclusive (`AddressSpace::unmap` through `lock_range`).
    Exclusive,
    /// Mutation: shared, as a fault or a discard holds it.
    Shared,
}

/// The last-level table that two neighbouring regions share: `present` is the upper
/// entry pointing to it, `used` counts the entries it holds.
struct SharedTable {
    present: AtomicBool,
    used: AtomicUsize,
    table: Memory,
}

/// `munmap` of one region empties the last table's entries it owns and, finding the table
/// empty, prunes it: unlinks it under the lock, flushes with the lock dropped (reaching lazy
/// CPUs, since a table goes), then frees it. Meanwhile a thread faults on a page of the
/// neighbouring region whose entry lives in the same table: under the shared lock it walks
/// to the table and installs its entry there. Only the exclusive lock keeps the prune from
/// freeing a table that the fault is walking, or unlinking one the fault has just mapped a
/// page in (whose mapping would then be lost).
fn prune_vs_fault(lock: PruneLock) {
    let regions = Arc::new(RwLock::new(()));
    let shared = Arc::new(SharedTable {
        present: AtomicBool::new(true),
        used: AtomicUsize::new(0),
        table: Memory::new(),
    });
    let fault = {
        let (regions, shared) = (regions.clone(), shared.clone());
        loom::thread::spawn(move || {
            let _held = regions.read().unwrap();
            if shared.present.load(Ordering::Acquire) {
                shared.table.used_by("the neighbouring fault's walk");
                shared.used.fetch_add(1, Ordering::AcqRel);
            }
            // Otherwise the fault installs a new table (not modelled).
        })
    };
    let prune = |_: &()| {
        if shared.used.load(Ordering::Acquire) == 0 {
            shared.present.store(false, Ordering::Release);
            true
        } else {
            false
        }
    };
    let unlinked = match lock {
        PruneLock::Exclusive => prune(&regions.write().unwrap()),
        PruneLock::Shared => prune(&regions.read().unwrap()),
    };
    if unlinked {
        // The flush, with the lock dropped, then the free.
        fence(Ordering::SeqCst);
        shared.table.free();
    }
    fault.join().unwrap();
}

#[test]
fn prune_vs_fault_is_safe() {
    explore(
        "prune vs neighbouring fault",
        3,
        |_| prune_vs_fault(PruneLock::Exclusive),
        super::CLEAN_IPI,
    );
}

#[test]
fn prune_vs_fault_rejects_pruning_under_the_shared_lock() {
    rejected(
        "prune vs neighbouring fault / shared lock",
        3,
        |_| prune_vs_fault(PruneLock::Shared),
        super::CLEAN_IPI,
        RACE,
    );
}

// ---------------------------------------------------------------------------------------
// 11. `madvise(PAGEOUT)` versus a fault.

/// How `madvise(PAGEOUT)` holds the region table.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PageOutLock {
    /// Exclusive, across the whole trip to swap (`AddressSpace::page_out`).
    Exclusive,
    /// Mutation: shared, like a discard.
    Shared,
}

const SWAPPED: u64 = 2;
const ZEROED: u64 = 3;

/// What the page holds before it goes to swap; a fresh demand-zero page holds 0.
const CONTENTS: u64 = 42;

/// PAGEOUT takes the page's entry out, flushes, copies the frame to a swap slot, records
/// the slot in the entry and frees the frame. Between the take and the record the entry is
/// empty although the page has contents: the page is in transit. A fault under the shared
/// lock takes an empty entry for a hole and maps a zeroed page; so PAGEOUT holds the lock
/// exclusive throughout, and a fault that finds the entry swapped brings the page back
/// under the exclusive lock. Either way the faulting thread must read the page's contents.
fn page_out_vs_fault(lock: PageOutLock) {
    let regions = Arc::new(RwLock::new(()));
    let entry = Arc::new(AtomicU64::new(PRESENT));
    let slot = Arc::new(AtomicU64::new(0));
    let page_out = {
        let (regions, entry, slot) = (regions.clone(), entry.clone(), slot.clone());
        loom::thread::spawn(move || {
            let store = || {
                if entry.swap(EMPTY, Ordering::AcqRel) == PRESENT {
                    fence(Ordering::SeqCst); // the batched flush
                    slot.store(CONTENTS, Ordering::Relaxed);
                    entry.store(SWAPPED, Ordering::Release);
                }
            };
            match lock {
                PageOutLock::Exclusive => {
                    let _held = regions.write().unwrap();
                    store();
                }
                PageOutLock::Shared => {
                    let _held = regions.read().unwrap();
                    store();
                }
            }
        })
    };
    let read = {
        let _held = regions.read().unwrap();
        match entry.load(Ordering::Acquire) {
            PRESENT => Some(CONTENTS),
            SWAPPED => None,
            _ => match entry.compare_exchange(EMPTY, ZEROED, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => Some(0),
                // Raced: the kernel's fault looks again; here the swapped case below does.
                Err(_) => None,
            },
        }
    };
    let read = read.unwrap_or_else(|| {
        let _held = regions.write().unwrap();
        match entry.load(Ordering::Acquire) {
            SWAPPED => slot.load(Ordering::Relaxed),
            ZEROED => 0,
            _ => CONTENTS,
        }
    });
    assert_eq!(
        read, CONTENTS,
        "lost page: the fault read a zeroed page where PAGEOUT's page was in transit"
    );
    page_out.join().unwrap();
}

#[test]
fn page_out_vs_fault_is_safe() {
    explore(
        "PAGEOUT vs fault",
        3,
        |_| page_out_vs_fault(PageOutLock::Exclusive),
        super::CLEAN_IPI,
    );
}

#[test]
fn page_out_vs_fault_rejects_paging_out_under_the_shared_lock() {
    rejected(
        "PAGEOUT vs fault / shared lock",
        3,
        |_| page_out_vs_fault(PageOutLock::Shared),
        super::CLEAN_IPI,
        "lost page",
    );
}
