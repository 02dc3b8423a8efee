//! ASIDs and PCIDs: the numbers that tag TLB entries.
//!
//! An x86 TLB entry is tagged with the 12-bit PCID that was in CR3 when it was filled (when
//! CR4.PCIDE is on). Switching CR3 to another PCID keeps the old entries, so coming back to an
//! address space can skip the flush, *if* nothing about that address space changed meanwhile.
//! This crate names the per-address-space tag an **ASID** and derives the PCID from it:
//!
//! * **Dynamic ASIDs** `0..DYN_ASIDS` are per CPU. Each CPU caches the last few address
//!   spaces it ran in [`DYN_ASIDS`] slots; slot *i* uses ASID *i*. The same ASID means
//!   different address spaces on different CPUs, which is fine because each CPU flushes its
//!   own TLB (by IPI) when an address space changes.
//! * **Global ASIDs** `FIRST_GLOBAL_ASID..MAX_ASID_AVAILABLE` are system wide: one address
//!   space owns the ASID on every CPU. That is what lets a single *broadcast* invalidation
//!   (INVLPGB) tagged with that PCID reach every CPU without interrupting it.
//!
//! **PCID = ASID + 1.** PCID 0 is never used for a user address space. Code that knows nothing
//! about PCIDs (early boot, a firmware call, a debugger) may load CR3 with PCID 0, use it, and
//! put the old CR3 back; with the +1 it cannot pollute a live address space's entries. It also
//! makes a bug that loads a PCID-tagged CR3 while PCIDs are off fault every time instead of
//! only for ASID 0.
//!
//! Without PCID support (QEMU's TCG has none) the kernel still tracks ASIDs here, every
//! address-space load flushes, and nothing else changes.
//!
//! This kernel has no page-table isolation (PTI), so all 12 PCID bits are available; Linux
//! loses one bit to PTI's user PCIDs and stops at 2046.

use core::fmt;

use tlb_types::{PCID_BITS, Pcid};

use crate::sync::{AtomicU16, Ordering};

/// Number of per-CPU dynamic ASID slots (Linux: `TLB_NR_DYN_ASIDS`).
pub const DYN_ASIDS: usize = 6;

/// One past the largest ASID: `2^PCID_BITS - 2`, so that the largest PCID (ASID + 1) is
/// `2^PCID_BITS - 2` and still fits in 12 bits. This is an exclusive bound, never a count,
/// and so a number, not an [`Asid`]: no ASID has this value.
pub const MAX_ASID_AVAILABLE: u16 = (1 << PCID_BITS) - 2;

/// The first global ASID: global ASIDs never collide with the dynamic slots.
pub const FIRST_GLOBAL_ASID: Asid = Asid::new(DYN_ASIDS as u16);

/// Number of global ASIDs: `FIRST_GLOBAL_ASID..MAX_ASID_AVAILABLE`.
pub const GLOBAL_ASID_COUNT: usize = (MAX_ASID_AVAILABLE - FIRST_GLOBAL_ASID.get()) as usize;

/// Tag of an address space in this crate's bookkeeping (see the module docs), always below
/// [`MAX_ASID_AVAILABLE`]. Its own type, apart from [`Pcid`], because the two are one apart:
/// the only way from one to the other is [`Asid::pcid`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Asid(u16);

impl Asid {
    /// ASID `value`. Panics on an ASID outside the space.
    pub const fn new(value: u16) -> Asid {
        assert!(value < MAX_ASID_AVAILABLE, "ASID out of range");
        Asid(value)
    }

    /// The ASID of dynamic slot `slot`. Panics past the last slot.
    pub const fn of_slot(slot: usize) -> Asid {
        assert!(slot < DYN_ASIDS, "no such dynamic ASID slot");
        Asid(slot as u16)
    }

    /// The number.
    pub const fn get(self) -> u16 {
        self.0
    }

    /// The PCID that tags this ASID's entries: ASID + 1.
    pub const fn pcid(self) -> Pcid {
        Pcid::new(self.0 + 1)
    }

    /// Whether this is a global (system-wide) ASID rather than a per-CPU dynamic one.
    pub const fn is_global(self) -> bool {
        self.0 >= FIRST_GLOBAL_ASID.0
    }

    /// The dynamic slot this ASID names, or `None` for a global ASID.
    pub const fn slot(self) -> Option<usize> {
        if self.is_global() {
            None
        } else {
            Some(self.0 as usize)
        }
    }
}

impl fmt::Display for Asid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// An [`Asid`] other CPUs read (a CPU's loaded ASID). The orderings are the caller's, as with
/// any atomic.
pub(crate) struct AtomicAsid(AtomicU16);

impl AtomicAsid {
    pub(crate) fn new(asid: Asid) -> Self {
        Self(AtomicU16::new(asid.0))
    }

    pub(crate) fn load(&self, order: Ordering) -> Asid {
        Asid(self.0.load(order))
    }

    pub(crate) fn store(&self, asid: Asid, order: Ordering) {
        self.0.store(asid.0, order);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference checklist item 1 and 2: the whole ASID space, one row at a time.
    #[test]
    fn pcid_mapping_table() {
        let table: &[(u16, u16, bool)] = &[
            (0, 1, false),
            (1, 2, false),
            (5, 6, false),
            (6, 7, true),
            (7, 8, true),
            (2046, 2047, true),
            (4093, 4094, true),
        ];
        for &(asid, pcid, global) in table {
            let asid = Asid::new(asid);
            assert_eq!(asid.pcid(), Pcid::new(pcid), "asid {asid}");
            assert_eq!(asid.is_global(), global, "asid {asid}");
            assert_eq!(asid.slot().is_some(), !global, "asid {asid}");
        }
    }

    #[test]
    fn every_asid_maps_to_a_valid_nonzero_pcid() {
        for asid in (0..MAX_ASID_AVAILABLE).map(Asid::new) {
            let pcid = asid.pcid();
            assert_ne!(pcid, Pcid::ZERO, "PCID 0 is reserved");
            assert!(
                u32::from(pcid.get()) < (1 << PCID_BITS),
                "PCID {pcid} exceeds 12 bits"
            );
        }
        assert_eq!(MAX_ASID_AVAILABLE, 4094);
        assert_eq!(FIRST_GLOBAL_ASID.get(), 6);
        assert_eq!(GLOBAL_ASID_COUNT, 4088);
    }

    #[test]
    fn slots_are_the_dynamic_asids() {
        for slot in 0..DYN_ASIDS {
            assert_eq!(Asid::of_slot(slot).slot(), Some(slot));
        }
        assert_eq!(FIRST_GLOBAL_ASID.slot(), None);
    }

    #[test]
    #[should_panic(expected = "ASID out of range")]
    fn asid_past_the_space_panics() {
        Asid::new(MAX_ASID_AVAILABLE);
    }
}
