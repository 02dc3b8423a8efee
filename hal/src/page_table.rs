//! A user address space's page tables: the four-level x86-64 radix tree.
//!
//! The lower half (PML4 slots 0-255) belongs to the process and is built on
//! demand. The upper half (slots 256-511) is copied from the kernel's PML4
//! when the table is created, so every address space shares the kernel's
//! level-3 tables and with them every kernel mapping, present and future
//! (the kernel never adds a new PML4 slot after boot).
//!
//! This module only edits entries. It never flushes a TLB: whoever removes or
//! weakens a mapping must flush (through `mm`) before reusing what the entry
//! pointed to.
//!
//! ## Many CPUs at once
//!
//! Threads of one process fault and discard pages on several CPUs at the
//! same time, so every edit that may run beside another is one atomic
//! operation on one entry (the hardware sets accessed and dirty bits
//! concurrently too):
//! - a missing table is installed by compare-exchange: of two CPUs that
//!   create the same table at once, one wins and the other frees its page
//!   and walks the winner's, so no mapping made in either is lost;
//! - a leaf is replaced only if it still holds what the caller saw
//!   ([`PageTable::install`], [`PageTable::mark_busy`]), or taken out by an
//!   atomic swap ([`PageTable::take`]), so two CPUs never both think they
//!   own the frame an entry held;
//! - a *busy* leaf ([`Leaf::Busy`]) is a mapping between its old frame and
//!   its new one: taken out, being flushed, not yet replaced. A fault that
//!   finds it waits instead of filling the hole with a zeroed page.
//!
//! Only the edits that take tables away ([`PageTable::prune`],
//! [`PageTable::destroy`]) or that park a page in swap need the table to
//! themselves (`&mut self`): no CPU may be walking a table that goes.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use tlb_types::PageTableRoot;
use x86_64::{PhysAddr, structures::paging::PageTableFlags};

use crate::frames::{self, Frame};
use crate::{paging::ENTRY_ADDRESS_MASK, phys};

/// In a non-present entry (which the CPU ignores entirely): the page is in
/// swap slot `entry >> 12`. Bit 9 is one of the bits left to software.
const SWAPPED: PageTableFlags = PageTableFlags::BIT_9;
/// In a non-present entry: the page is between two frames (see
/// [`Leaf::Busy`]). Bit 10 is left to software too.
const BUSY: PageTableFlags = PageTableFlags::BIT_10;
/// Flags of intermediate tables: the leaf decides the real permissions.
const TABLE_FLAGS: PageTableFlags = PageTableFlags::PRESENT
    .union(PageTableFlags::WRITABLE)
    .union(PageTableFlags::USER_ACCESSIBLE);

/// The flags of a raw entry.
fn flags_of(entry: u64) -> PageTableFlags {
    PageTableFlags::from_bits_retain(entry)
}
const KERNEL_HALF_FIRST_SLOT: usize = 256;
const ENTRIES: usize = 512;

/// The table indices of `va` from level 4 down to level 1.
fn indices(va: u64) -> [usize; 4] {
    [39, 30, 21, 12].map(|shift| ((va >> shift) & 0x1FF) as usize)
}

/// What [`PageTable::used_pages`] returns: the addresses, inline up to 8.
/// Most calls find one or a few (every `madvise` of `tlb_flush2`'s loop
/// finds one), and a heap allocation per call showed in its profile.
pub type UsedPages = smallvec::SmallVec<[u64; 8]>;

/// The page tables of one user address space.
pub struct PageTable {
    /// `None` once [`PageTable::destroy`] gave it back.
    root: Option<Frame>,
}

/// What a leaf entry held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaf {
    Empty,
    /// Mapped; `writable` says whether the entry lets ring 3 write (a
    /// writable region's page without it is shared copy-on-write).
    Present {
        frame: Frame,
        writable: bool,
    },
    Swapped {
        slot: u64,
    },
    /// Being replaced: its old frame is out and being flushed, the new one
    /// not yet in. Whoever marked it finishes it; others wait and look again.
    Busy,
}

impl Leaf {
    fn decode(entry: u64) -> Self {
        let flags = flags_of(entry);
        if flags.contains(PageTableFlags::PRESENT) {
            Self::Present {
                frame: Frame::from_entry(PhysAddr::new(entry & ENTRY_ADDRESS_MASK)),
                writable: flags.contains(PageTableFlags::WRITABLE),
            }
        } else if flags.contains(SWAPPED) {
            Self::Swapped { slot: entry >> 12 }
        } else if flags.contains(BUSY) {
            Self::Busy
        } else {
            Self::Empty
        }
    }
}

/// What [`PageTable::destroy`] took out of the table.
#[derive(Debug, Default)]
pub struct Cleared {
    /// The frames the leaves mapped (some may be shared with other
    /// address spaces: their owner decides when each is free).
    pub pages: Vec<Frame>,
    /// The page-table pages below the root, this table's own.
    pub tables: Vec<Frame>,
    /// The swap slots the leaves referred to.
    pub slots: Vec<u64>,
}

/// Not enough memory for a page-table page.
#[derive(Debug)]
pub struct OutOfFrames;

impl PageTable {
    /// A table with an empty lower half and the kernel's upper half.
    pub fn new(kernel_root: PageTableRoot) -> Result<Self, OutOfFrames> {
        let root = frames::allocate().ok_or(OutOfFrames)?;
        phys::zero_frame(root);
        let mut upper_half = [0u8; (ENTRIES - KERNEL_HALF_FIRST_SLOT) * 8];
        phys::read_bytes(
            PhysAddr::new(kernel_root.address()) + (KERNEL_HALF_FIRST_SLOT * 8) as u64,
            &mut upper_half,
        );
        phys::write_frame(root, KERNEL_HALF_FIRST_SLOT * 8, &upper_half);
        Ok(Self { root: Some(root) })
    }

    /// The level-4 table (what CR3 points at).
    pub fn root(&self) -> PageTableRoot {
        PageTableRoot::new(self.root_frame().address().as_u64())
    }

    /// The level-1 table and index for `va`, creating missing tables if
    /// `create`.
    fn leaf_slot(&self, va: u64, create: bool) -> Result<Option<(Frame, usize)>, OutOfFrames> {
        let [l4, l3, l2, l1] = indices(va);
        assert!(
            l4 < KERNEL_HALF_FIRST_SLOT,
            "user page table asked about kernel address {va:#x}"
        );
        let mut table = self.root_frame();
        for index in [l4, l3, l2] {
            let entry = phys::load_entry(table, index);
            table = if flags_of(entry).contains(PageTableFlags::PRESENT) {
                table_of(entry)
            } else if create {
                install_table(table, index, entry)?
            } else {
                return Ok(None);
            };
        }
        Ok(Some((table, l1)))
    }

    /// What the leaf entry for `va` holds.
    pub fn leaf(&self, va: u64) -> Leaf {
        match self.leaf_slot(va, false) {
            Ok(Some((table, index))) => Leaf::decode(phys::load_entry(table, index)),
            _ => Leaf::Empty,
        }
    }

    /// Maps `va` to `frame` with `flags` (PRESENT is added), replacing an
    /// empty or swapped entry.
    pub fn map(&self, va: u64, frame: Frame, flags: PageTableFlags) -> Result<(), OutOfFrames> {
        let (table, index) = self.leaf_slot(va, true)?.ok_or(OutOfFrames)?;
        let old = phys::swap_entry(table, index, present_entry(frame, flags));
        assert!(
            !flags_of(old).contains(PageTableFlags::PRESENT),
            "mapping over a present page at {va:#x}"
        );
        Ok(())
    }

    /// Maps `va` to `frame` with `flags` if its entry still holds
    /// `expected` (creating missing tables); returns whether it did. A
    /// `false` means another CPU changed the entry first: the caller looks
    /// again.
    pub fn install(
        &self,
        va: u64,
        expected: Leaf,
        frame: Frame,
        flags: PageTableFlags,
    ) -> Result<bool, OutOfFrames> {
        let (table, index) = self.leaf_slot(va, true)?.ok_or(OutOfFrames)?;
        Ok(replace_if(
            table,
            index,
            expected,
            present_entry(frame, flags),
        ))
    }

    /// Marks the entry of `va` busy if it still holds `expected`; returns
    /// whether it did. The caller then flushes the old translation and
    /// finishes with [`PageTable::install`] (expecting [`Leaf::Busy`]).
    pub fn mark_busy(&self, va: u64, expected: Leaf) -> bool {
        match self.leaf_slot(va, false) {
            Ok(Some((table, index))) => replace_if(table, index, expected, BUSY.bits()),
            _ => false,
        }
    }

    /// Empties the entry of `va`, returning what it held.
    pub fn take(&self, va: u64) -> Leaf {
        match self.leaf_slot(va, false) {
            Ok(Some((table, index))) => Leaf::decode(phys::swap_entry(table, index, 0)),
            _ => Leaf::Empty,
        }
    }

    /// Records that the page at `va` lives in swap slot `slot` (the entry
    /// must be empty).
    pub fn set_swapped(&mut self, va: u64, slot: u64) -> Result<(), OutOfFrames> {
        let (table, index) = self.leaf_slot(va, true)?.ok_or(OutOfFrames)?;
        let old = phys::swap_entry(table, index, (slot << 12) | SWAPPED.bits());
        assert!(old == 0, "swap entry over a used entry at {va:#x}");
        Ok(())
    }

    /// Replaces the permission flags of a mapped `va`; returns whether it was
    /// mapped.
    pub fn protect(&self, va: u64, flags: PageTableFlags) -> bool {
        let Ok(Some((table, index))) = self.leaf_slot(va, false) else {
            return false;
        };
        let hardware_set = PageTableFlags::ACCESSED | PageTableFlags::DIRTY;
        let mut entry = phys::load_entry(table, index);
        loop {
            if !flags_of(entry).contains(PageTableFlags::PRESENT) {
                return false;
            }
            let kept = entry & (ENTRY_ADDRESS_MASK | hardware_set.bits());
            let new = kept | (flags | PageTableFlags::PRESENT).bits();
            match phys::compare_exchange_entry(table, index, entry, new) {
                Ok(_) => return true,
                // The hardware set a bit, or another CPU took the page.
                Err(now) => entry = now,
            }
        }
    }

    /// The addresses in `[start, end)` whose leaf entry is not empty, found
    /// by walking only the tables that exist: the cost follows what is
    /// mapped, not the size of the range (a program may name terabytes).
    pub fn used_pages(&self, start: u64, end: u64) -> UsedPages {
        let mut pages = UsedPages::new();
        collect_used(self.root_frame(), 4, 0, start, end, &mut pages);
        pages
    }

    /// Frees the page-table pages below the root that no longer map
    /// anything and cover part of `[start, end)`, returning their frames for
    /// the caller to free after a flush with `freed_tables` set (a CPU may
    /// still walk them through its paging-structure caches until then).
    pub fn prune(&mut self, start: u64, end: u64) -> Vec<Frame> {
        let mut freed = Vec::new();
        prune_table(self.root_frame(), 4, 0, start, end, &mut freed);
        freed
    }

    /// Frees the root and returns everything the lower half referred to,
    /// for the caller to give back: the end of the table, called once no
    /// CPU can load, walk or use any of it (after the final TLB flush), so
    /// that nothing of a finished process outlives its teardown. Any use of
    /// the table afterwards panics.
    pub fn destroy(&mut self) -> Cleared {
        let mut cleared = Cleared::default();
        if let Some(root) = self.root.take() {
            collect(root, 4, KERNEL_HALF_FIRST_SLOT, &mut cleared);
            frames::free(root);
        }
        cleared
    }

    fn root_frame(&self) -> Frame {
        self.root.expect("a page table used after it was destroyed")
    }
}

impl Drop for PageTable {
    /// Frees the root of a table that was never destroyed. By now the owner
    /// has cleared the lower half and made sure no CPU has it loaded.
    fn drop(&mut self) {
        if let Some(root) = self.root.take() {
            frames::free(root);
        }
    }
}

/// Makes the tables of every page table from now on be installed by a
/// plain store instead of a compare-exchange, so that two CPUs creating the
/// same table at once can lose one's mappings: a deliberate bug
/// (`vm.bug=racy-table-install`) that the concurrency stress must catch.
pub fn install_tables_racily() {
    RACY_TABLE_INSTALL.store(true, Ordering::Relaxed);
}

static RACY_TABLE_INSTALL: AtomicBool = AtomicBool::new(false);

/// The table a present intermediate entry points at.
fn table_of(entry: u64) -> Frame {
    Frame::from_entry(PhysAddr::new(entry & ENTRY_ADDRESS_MASK))
}

/// A present leaf entry mapping `frame` with `flags`.
fn present_entry(frame: Frame, flags: PageTableFlags) -> u64 {
    frame.address().as_u64() | (flags | PageTableFlags::PRESENT).bits()
}

/// Installs a new, empty table in entry `index` of `table`, which held
/// `seen` (not present), and returns it; or, if another CPU installed one
/// first, frees the new one and returns the other CPU's.
fn install_table(table: Frame, index: usize, seen: u64) -> Result<Frame, OutOfFrames> {
    let child = frames::allocate().ok_or(OutOfFrames)?;
    phys::zero_frame(child);
    let entry = child.address().as_u64() | TABLE_FLAGS.bits();
    if RACY_TABLE_INSTALL.load(Ordering::Relaxed) {
        phys::store_entry(table, index, entry);
        return Ok(child);
    }
    match phys::compare_exchange_entry(table, index, seen, entry) {
        Ok(_) => Ok(child),
        Err(winner) => {
            // Never reachable by any CPU: it was never in the tree.
            frames::free(child);
            Ok(table_of(winner))
        }
    }
}

/// Replaces entry `index` of `table` by `new` if it still decodes to
/// `expected` (the hardware's accessed and dirty bits do not count as a
/// change); returns whether it did.
fn replace_if(table: Frame, index: usize, expected: Leaf, new: u64) -> bool {
    let mut entry = phys::load_entry(table, index);
    while Leaf::decode(entry) == expected {
        match phys::compare_exchange_entry(table, index, entry, new) {
            Ok(_) => return true,
            Err(now) => entry = now,
        }
    }
    false
}

/// Adds to `pages` the addresses of non-empty leaves below `table` (at
/// `level`, mapping from `base`) in `[start, end)`.
fn collect_used(table: Frame, level: u8, base: u64, start: u64, end: u64, pages: &mut UsedPages) {
    let span = 1u64 << (12 + 9 * u32::from(level - 1));
    let entries = if level == 4 {
        KERNEL_HALF_FIRST_SLOT
    } else {
        ENTRIES
    };
    let first = (start.saturating_sub(base) / span) as usize;
    for index in first..entries {
        let child_base = base + index as u64 * span;
        if child_base >= end {
            break;
        }
        if child_base + span <= start {
            continue;
        }
        match (level, Leaf::decode(phys::load_entry(table, index))) {
            (_, Leaf::Empty) => {}
            (1, _) => pages.push(child_base),
            (_, Leaf::Present { frame: child, .. }) => {
                collect_used(child, level - 1, child_base, start, end, pages)
            }
            (_, Leaf::Swapped { .. } | Leaf::Busy) => unreachable!("leaf markers are leaves"),
        }
    }
}

/// Prunes the children of `table` (at `level`, mapping from `base`) that
/// intersect `[start, end)`; returns whether `table` is now empty.
fn prune_table(
    table: Frame,
    level: u8,
    base: u64,
    start: u64,
    end: u64,
    freed: &mut Vec<Frame>,
) -> bool {
    let span = 1u64 << (12 + 9 * u32::from(level - 1));
    let entries = if level == 4 {
        KERNEL_HALF_FIRST_SLOT
    } else {
        ENTRIES
    };
    for index in 0..entries {
        let child_base = base + index as u64 * span;
        if level == 1 || child_base >= end || child_base + span <= start {
            continue;
        }
        if let Leaf::Present { frame: child, .. } = Leaf::decode(phys::load_entry(table, index))
            && prune_table(child, level - 1, child_base, start, end, freed)
        {
            phys::store_entry(table, index, 0);
            freed.push(child);
        }
    }
    (0..entries).all(|index| phys::load_entry(table, index) == 0)
}

/// Gathers every frame and swap slot below `table` (at `level`), looking at
/// its first `entries` entries.
fn collect(table: Frame, level: u8, entries: usize, cleared: &mut Cleared) {
    for index in 0..entries {
        let entry = phys::load_entry(table, index);
        match (level, Leaf::decode(entry)) {
            (_, Leaf::Empty) => {}
            (1, Leaf::Swapped { slot }) => cleared.slots.push(slot),
            (1, Leaf::Present { frame, .. }) => cleared.pages.push(frame),
            (1, Leaf::Busy) => unreachable!("a table is destroyed with no change under way"),
            (_, Leaf::Present { frame: child, .. }) => {
                collect(child, level - 1, ENTRIES, cleared);
                cleared.tables.push(child);
            }
            (_, Leaf::Swapped { .. } | Leaf::Busy) => unreachable!("leaf markers are leaves"),
        }
    }
}
