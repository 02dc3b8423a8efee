//! The global ASID allocator: which system-wide ASIDs are free, in use, or waiting for a
//! rollover flush.
//!
//! A global ASID given back by a dying address space cannot be handed out again at once:
//! CPUs may still hold TLB entries tagged with its PCID (a global ASID is never flushed at
//! switch-in, that is its point), and the next owner would read them. Flushing that one PCID
//! everywhere on every free would be expensive, so freed ASIDs wait in a `freed` bitmap and
//! stay marked in `used`. Only when no never-used ASID is left does a **rollover** happen:
//! one broadcast flush of every non-global entry on every CPU, after which the freed ASIDs are
//! returned to the pool all at once. The flush is paid once per wrap, not once per process.
//!
//! The bookkeeping, and the three upstream bugs it avoids (reference §7 item 8):
//! - `available` counts never-used plus freed ASIDs **exactly** (upstream started one short);
//! - an allocation never returns an ASID outside `FIRST_GLOBAL_ASID..limit` (upstream could
//!   hand out `MAX_ASID_AVAILABLE` itself when the forward search failed);
//! - nothing is stranded below the search cursor (upstream only searched forward from its
//!   cursor and reset only at the top, so ASIDs freed below it waited a whole wrap). Here the
//!   invariant "every ASID below the cursor is marked used" holds at all times, and a rollover
//!   restarts the search at the bottom, so a forward search finds every allocatable ASID;
//! - the bound is named and used as an exclusive bound everywhere, never as a count.
//!
//! The allocator is a plain value; [`crate::TlbSystem`] keeps it under a lock and supplies the
//! rollover flush as a closure, so the flush provably runs before any recycled ASID exists.

use crate::asid::{Asid, FIRST_GLOBAL_ASID, MAX_ASID_AVAILABLE};

/// The bitmaps and the cursor count in plain numbers; ASIDs are made at the boundary.
const FIRST: u16 = FIRST_GLOBAL_ASID.get();

const WORDS: usize = (MAX_ASID_AVAILABLE as usize).div_ceil(64);

/// Used/freed bitmaps over the global ASID space (see the module docs).
#[derive(Clone)]
pub struct GlobalAsidAllocator {
    used: [u64; WORDS],
    freed: [u64; WORDS],
    /// Where the next search starts.
    cursor: u16,
    /// Never-used plus freed ASIDs in `FIRST_GLOBAL_ASID..limit`.
    available: usize,
    /// Exclusive upper bound; `MAX_ASID_AVAILABLE` unless shrunk for tests or policy.
    limit: u16,
}

impl Default for GlobalAsidAllocator {
    fn default() -> Self {
        Self::new(MAX_ASID_AVAILABLE)
    }
}

fn bit(map: &[u64; WORDS], asid: u16) -> bool {
    map[asid as usize / 64] & (1 << (asid % 64)) != 0
}

fn set(map: &mut [u64; WORDS], asid: u16, on: bool) {
    let m = 1u64 << (asid % 64);
    if on {
        map[asid as usize / 64] |= m;
    } else {
        map[asid as usize / 64] &= !m;
    }
}

impl GlobalAsidAllocator {
    /// An allocator over `FIRST_GLOBAL_ASID..limit`. `limit` may be lowered (tests use tiny
    /// spaces to force rollovers and exhaustion) but never raised past `MAX_ASID_AVAILABLE`.
    pub fn new(limit: u16) -> Self {
        assert!(
            limit > FIRST && limit <= MAX_ASID_AVAILABLE,
            "global ASID limit {limit} outside {FIRST_GLOBAL_ASID}+1..={MAX_ASID_AVAILABLE}"
        );
        Self {
            used: [0; WORDS],
            freed: [0; WORDS],
            cursor: FIRST,
            available: usize::from(limit - FIRST),
            limit,
        }
    }

    /// ASIDs that can still be handed out (never used since the last rollover, or freed).
    pub fn available(&self) -> usize {
        self.available
    }

    /// The exclusive upper bound of this allocator's range.
    pub fn limit(&self) -> u16 {
        self.limit
    }

    /// First ASID in `from..to` whose `used` bit is clear.
    fn find_unused(&self, from: u16, to: u16) -> Option<u16> {
        (from..to).find(|&a| !bit(&self.used, a))
    }

    /// Hands out a global ASID, or `None` when the space is exhausted (the caller then stays
    /// on IPIs). If only freed ASIDs are left, calls `rollover_flush` first; it must flush
    /// every non-global TLB entry on every CPU and wait for completion before returning.
    pub fn allocate(&mut self, rollover_flush: impl FnOnce()) -> Option<Asid> {
        if self.available == 0 {
            return None;
        }
        // Invariant: every ASID in `FIRST_GLOBAL_ASID..cursor` is marked used, so searching
        // forward from the cursor finds every never-used ASID (nothing is stranded below it).
        debug_assert!(self.find_unused(FIRST, self.cursor).is_none());
        let asid = match self.find_unused(self.cursor, self.limit) {
            Some(a) => a,
            None => {
                // Every ASID is used or freed, and `available > 0` says some are freed.
                rollover_flush();
                for (u, f) in self.used.iter_mut().zip(self.freed.iter_mut()) {
                    *u &= !*f;
                    *f = 0;
                }
                self.find_unused(FIRST, self.limit)
                    .expect("available > 0 but no freed ASID: accounting broken")
            }
        };
        debug_assert!((FIRST..self.limit).contains(&asid));
        set(&mut self.used, asid, true);
        self.available -= 1;
        self.cursor = if asid + 1 >= self.limit {
            FIRST
        } else {
            asid + 1
        };
        Some(Asid::new(asid))
    }

    /// Gives `asid` back. It becomes allocatable only after the next rollover flush. The
    /// caller guarantees that no CPU still has an address space loaded with this ASID.
    pub fn free(&mut self, asid: Asid) {
        let number = asid.get();
        assert!(
            (FIRST..self.limit).contains(&number),
            "freeing ASID {asid} outside the global range"
        );
        assert!(
            bit(&self.used, number),
            "freeing global ASID {asid} that is not allocated"
        );
        assert!(
            !bit(&self.freed, number),
            "double free of global ASID {asid}"
        );
        set(&mut self.freed, number, true);
        self.available += 1;
    }

    /// The bug [`crate::Fault::ReuseGlobalAsidBeforeRollover`]: makes `asid` allocatable at
    /// once, so its next owner may meet the previous owner's TLB entries.
    #[doc(hidden)]
    pub fn free_without_rollover(&mut self, asid: Asid) {
        self.free(asid);
        set(&mut self.freed, asid.get(), false);
        set(&mut self.used, asid.get(), false);
        // Keep the cursor invariant (everything below it is used).
        self.cursor = self.cursor.min(asid.get());
    }

    /// Whether `asid` is allocated to a live address space.
    pub fn is_allocated(&self, asid: Asid) -> bool {
        let number = asid.get();
        (FIRST..self.limit).contains(&number)
            && bit(&self.used, number)
            && !bit(&self.freed, number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asid::GLOBAL_ASID_COUNT;
    use std::collections::BTreeSet;
    use std::vec::Vec;

    #[test]
    fn full_space_count_is_exact_and_in_range() {
        let mut a = GlobalAsidAllocator::default();
        assert_eq!(a.available(), GLOBAL_ASID_COUNT, "no off-by-one at start");
        let mut seen = BTreeSet::new();
        while let Some(asid) = a.allocate(|| panic!("no rollover while never-used remain")) {
            assert!((FIRST..MAX_ASID_AVAILABLE).contains(&asid.get()));
            assert!(seen.insert(asid), "ASID {asid} handed out twice");
        }
        assert_eq!(seen.len(), GLOBAL_ASID_COUNT);
        assert_eq!(a.available(), 0);
        assert_eq!(a.allocate(|| panic!()), None, "exhaustion is graceful");
    }

    /// Checklist item 18: a freed ASID comes back only after a rollover flush.
    #[test]
    fn freed_asid_reused_only_after_rollover() {
        let mut a = GlobalAsidAllocator::new(FIRST + 4);
        let got: Vec<_> = (0..4).map(|_| a.allocate(|| panic!()).unwrap()).collect();
        assert_eq!(got, [6, 7, 8, 9].map(Asid::new));
        a.free(Asid::new(7));
        assert!(!a.is_allocated(Asid::new(7)));
        let mut flushed = false;
        // Space: 6..10 all in use, 7 freed. It must not come back without the flush.
        assert_eq!(a.allocate(|| flushed = true), Some(Asid::new(7)));
        assert!(flushed, "rollover flush ran before 7 was handed out again");
    }

    /// One rollover returns every freed ASID; later allocations need no further flush.
    #[test]
    fn one_rollover_returns_every_freed_asid() {
        let mut a = GlobalAsidAllocator::new(FIRST + 8);
        for _ in 0..3 {
            a.allocate(|| panic!()).unwrap();
        }
        // Cursor is at 9; 9..14 never used. Fill them.
        for _ in 0..5 {
            a.allocate(|| panic!()).unwrap();
        }
        a.free(Asid::new(6));
        let mut flushes = 0;
        assert_eq!(a.allocate(|| flushes += 1), Some(Asid::new(6)));
        assert_eq!(flushes, 1);
        // After the rollover nothing is freed; free two and allocate: one more rollover.
        a.free(Asid::new(10));
        a.free(Asid::new(12));
        assert_eq!(a.allocate(|| flushes += 1), Some(Asid::new(10)));
        assert_eq!(flushes, 2);
        // 12 was returned to the pool by that same rollover: no flush needed now.
        assert_eq!(a.allocate(|| flushes += 1), Some(Asid::new(12)));
        assert_eq!(flushes, 2);
        assert_eq!(a.allocate(|| flushes += 1), None);
    }

    #[test]
    #[should_panic(expected = "double free")]
    fn double_free_panics() {
        let mut a = GlobalAsidAllocator::new(FIRST + 2);
        let x = a.allocate(|| {}).unwrap();
        a.free(x);
        a.free(x);
    }

    /// Checklist item 19: random allocate/free against a reference model.
    #[test]
    fn randomized_against_reference_model() {
        for (seed, limit) in [
            (1u64, 7u16),
            (2, 9),
            (3, 16),
            (4, 70),
            (5, 200),
            (6, MAX_ASID_AVAILABLE),
        ] {
            let mut a = GlobalAsidAllocator::new(limit);
            let size = usize::from(limit - FIRST);
            let mut live: BTreeSet<Asid> = BTreeSet::new();
            let mut pending: BTreeSet<Asid> = BTreeSet::new(); // freed, not yet flushed
            let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
            for step in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let alloc = live.is_empty() || x % 5 < 3;
                if alloc {
                    let mut rolled = false;
                    let got = a.allocate(|| rolled = true);
                    if rolled {
                        pending.clear();
                    }
                    match got {
                        Some(asid) => {
                            assert!(
                                (FIRST..limit).contains(&asid.get()),
                                "seed {seed} step {step}"
                            );
                            assert!(
                                !live.contains(&asid),
                                "seed {seed} step {step}: {asid} live"
                            );
                            assert!(
                                !pending.contains(&asid),
                                "seed {seed} step {step}: {asid} reused before rollover"
                            );
                            live.insert(asid);
                        }
                        None => assert_eq!(
                            live.len(),
                            size,
                            "seed {seed} step {step}: refused with room"
                        ),
                    }
                } else {
                    let idx = (x >> 8) as usize % live.len();
                    let asid = *live.iter().nth(idx).unwrap();
                    live.remove(&asid);
                    pending.insert(asid);
                    a.free(asid);
                }
                assert_eq!(a.available(), size - live.len(), "seed {seed} step {step}");
                if step % 64 == 0 {
                    for asid in (FIRST..limit).map(Asid::new) {
                        assert_eq!(a.is_allocated(asid), live.contains(&asid));
                    }
                }
            }
        }
    }
}
