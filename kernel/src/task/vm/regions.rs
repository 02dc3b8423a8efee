//! The region table of an address space: finding, splitting and counting
//! the regions a range operation touches, and the limits on how many there
//! may be.

use alloc::vec::Vec;

use abi::{Errno, PAGE_SIZE, USER_END};

use super::{AddressSpace, Memory, region::Region, sync::WriteGuard};
use crate::memory::heap;

/// Where `mmap` without a fixed address starts looking.
const MMAP_BASE: u64 = 0x1000_0000_0000;
/// The largest single region a program may ask for.
pub(super) const MAX_REGION: u64 = 1 << 40;
/// What one region record may cost on the heap (its share of a B-tree
/// node), for the heap budget.
const REGION_RECORD_BYTES: usize = 64;

fn is_page_aligned(value: u64) -> bool {
    value.is_multiple_of(PAGE_SIZE)
}

/// Checks `[start, start+len)`: page-aligned start, non-zero length that
/// rounds up to pages without overflow, entirely in user space. Returns the
/// page-rounded end.
pub(super) fn user_range(start: u64, len: u64) -> Result<u64, Errno> {
    if !is_page_aligned(start) || len == 0 || len > MAX_REGION {
        return Err(Errno::Inval);
    }
    let end = start
        .checked_add(len)
        .and_then(|end| end.checked_next_multiple_of(PAGE_SIZE))
        .ok_or(Errno::Inval)?;
    if start < PAGE_SIZE || end > USER_END {
        return Err(Errno::Inval);
    }
    Ok(end)
}

/// Whether a range operation accepts addresses no region covers.
pub(super) enum Holes {
    /// `munmap` and `mmap(MAP_FIXED)`: the range may have gaps.
    Allowed,
    /// `mprotect` and `madvise`: every page must be mapped (`NoMem` if not).
    Refused,
}

/// What becomes of the regions inside a range operation's range.
pub(super) enum Inside {
    /// They stay (with whatever the operation then changes in them).
    Stay,
    /// They are removed.
    Go,
}

impl AddressSpace {
    /// Step 1 of every range operation that changes regions: checks
    /// `[start, start+len)` (see [`user_range`]) and takes the lock
    /// exclusive; with [`Holes::Refused`], also that regions cover the
    /// range. Returns the page-rounded end and the lock.
    pub(super) fn lock_range(
        &self,
        start: u64,
        len: u64,
        holes: Holes,
    ) -> Result<(u64, WriteGuard<'_, Memory>), Errno> {
        let end = user_range(start, len)?;
        let memory = self.exclusive();
        if matches!(holes, Holes::Refused) && !memory.covers(start, end) {
            return Err(Errno::NoMem);
        }
        Ok((end, memory))
    }
}

impl Memory {
    /// Step 2 of a range operation: splits the regions at `start` and `end`
    /// and removes those inside if `inside` says so, once it is sure the
    /// table has room for the result and `added` regions more (`NoMem`
    /// otherwise, with nothing changed). Returns the start of every region
    /// that was inside.
    pub(super) fn cut_out(
        &mut self,
        start: u64,
        end: u64,
        inside: Inside,
        added: usize,
    ) -> Result<Vec<u64>, Errno> {
        let (splits, count_inside) = self.cut(start, end);
        let removed = match inside {
            Inside::Stay => 0,
            Inside::Go => count_inside,
        };
        self.room_for_regions(self.regions.len() + splits - removed + added)?;
        let starts = self.isolate(start, end);
        if let Inside::Go = inside {
            for region_start in &starts {
                self.regions.remove(region_start);
            }
        }
        Ok(starts)
    }

    /// Whether the table may grow to `count` regions: within
    /// [`abi::MAX_REGIONS`] and, for the records added, the heap budget.
    /// Checked before a change, so that a refused call changes nothing.
    pub(super) fn room_for_regions(&self, count: usize) -> Result<(), Errno> {
        let growth = count.saturating_sub(self.regions.len());
        if growth == 0 {
            return Ok(());
        }
        if count > abi::MAX_REGIONS {
            return Err(Errno::NoMem);
        }
        heap::check_budget(growth * REGION_RECORD_BYTES)
    }

    /// What a change to `[start, end)` does to the region count: how many
    /// regions it splits (one for each end that falls inside a region) and
    /// how many regions lie inside it once split.
    fn cut(&self, start: u64, end: u64) -> (usize, usize) {
        let splits = [start, end]
            .into_iter()
            .filter(|&at| {
                self.region_at(at)
                    .is_some_and(|(region_start, _)| region_start != at)
            })
            .count();
        let inside = self
            .regions
            .range(..end)
            .rev()
            .take_while(|(_, region)| region.end > start)
            .count();
        (splits, inside)
    }

    /// The region containing `va`, and where it starts.
    pub(super) fn region_at(&self, va: u64) -> Option<(u64, Region)> {
        let (&start, region) = self.regions.range(..=va).next_back()?;
        (va < region.end).then(|| (start, region.clone()))
    }

    pub(super) fn overlaps(&self, start: u64, end: u64) -> bool {
        self.regions
            .range(..end)
            .next_back()
            .is_some_and(|(_, region)| region.end > start)
    }

    /// A free gap of `len` bytes at or above `MMAP_BASE`.
    pub(super) fn find_gap(&self, len: u64) -> Option<u64> {
        let mut candidate = MMAP_BASE;
        for (&start, region) in self.regions.range(MMAP_BASE..) {
            if start >= candidate.checked_add(len)? {
                break;
            }
            candidate = candidate.max(region.end);
        }
        (candidate.checked_add(len)? <= USER_END).then_some(candidate)
    }

    /// Splits regions so that `at` is a region boundary.
    fn split_at(&mut self, at: u64) {
        if let Some((start, region)) = self.region_at(at)
            && start != at
        {
            self.regions.insert(start, region.head(at));
            self.regions.insert(at, region.tail(start, at));
        }
    }

    /// The region starts inside `[start, end)` after splitting at both ends.
    fn isolate(&mut self, start: u64, end: u64) -> Vec<u64> {
        self.split_at(start);
        self.split_at(end);
        self.regions
            .range(start..end)
            .map(|(&start, _)| start)
            .collect()
    }

    /// Whether regions cover all of `[start, end)`.
    pub(super) fn covers(&self, start: u64, end: u64) -> bool {
        let mut covered = start;
        while covered < end {
            match self.region_at(covered) {
                Some((_, region)) => covered = region.end,
                None => return false,
            }
        }
        true
    }
}
