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
//! pointed to. It is the caller's lock (the address space's) that serialises
//! edits; the hardware may set accessed/dirty bits concurrently, which is why
//! entries are read and replaced atomically.

use alloc::vec::Vec;

use tlb_types::PageTableRoot;
use x86_64::{PhysAddr, structures::paging::PageTableFlags};

use crate::frames::{self, Frame};
use crate::{paging::ENTRY_ADDRESS_MASK, phys};

/// In a non-present entry (which the CPU ignores entirely): the page is in
/// swap slot `entry >> 12`. Bit 9 is one of the bits left to software.
const SWAPPED: PageTableFlags = PageTableFlags::BIT_9;
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
                Frame::from_entry(PhysAddr::new(entry & ENTRY_ADDRESS_MASK))
            } else if create {
                let child = frames::allocate().ok_or(OutOfFrames)?;
                phys::zero_frame(child);
                phys::store_entry(table, index, child.address().as_u64() | TABLE_FLAGS.bits());
                child
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
    pub fn map(&mut self, va: u64, frame: Frame, flags: PageTableFlags) -> Result<(), OutOfFrames> {
        let (table, index) = self.leaf_slot(va, true)?.ok_or(OutOfFrames)?;
        let flags = flags | PageTableFlags::PRESENT;
        let old = phys::swap_entry(table, index, frame.address().as_u64() | flags.bits());
        assert!(
            !flags_of(old).contains(PageTableFlags::PRESENT),
            "mapping over a present page at {va:#x}"
        );
        Ok(())
    }

    /// Empties the entry of `va`, returning what it held.
    pub fn take(&mut self, va: u64) -> Leaf {
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
    pub fn protect(&mut self, va: u64, flags: PageTableFlags) -> bool {
        let Ok(Some((table, index))) = self.leaf_slot(va, false) else {
            return false;
        };
        let entry = phys::load_entry(table, index);
        if !flags_of(entry).contains(PageTableFlags::PRESENT) {
            return false;
        }
        let hardware_set = PageTableFlags::ACCESSED | PageTableFlags::DIRTY;
        let kept = entry & (ENTRY_ADDRESS_MASK | hardware_set.bits());
        phys::store_entry(
            table,
            index,
            kept | (flags | PageTableFlags::PRESENT).bits(),
        );
        true
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
            (_, Leaf::Swapped { .. }) => unreachable!("swap entries are leaves"),
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
            (_, Leaf::Present { frame: child, .. }) => {
                collect(child, level - 1, ENTRIES, cleared);
                cleared.tables.push(child);
            }
            (_, Leaf::Swapped { .. }) => unreachable!("swap entries are leaves"),
        }
    }
}
