//! Per-CPU TLB state: [`CpuTlbState`] (Linux: `cpu_tlbstate` and `cpu_tlbstate_shared`).
//!
//! Each CPU owns one of these. Only the owner writes it, always with interrupts off (so a
//! flush IPI never sees the owner half-way through an update of its *own* CPU's state). Other
//! CPUs only **read** three fields, when they decide whom to interrupt:
//!
//! * `loaded`: the context id this CPU's CR3 points at, or [`CTX_SWITCHING`] while CR3 is
//!   being changed. The marker exists because a switching CPU has already decided which
//!   flush generation it caught up to, but has not yet published the new id: a flusher that
//!   saw "still the old address space" would skip it and the new address space would run with
//!   a stale TLB (CVE-2025-37964). Flushers treat SWITCHING as "send it the IPI".
//! * `loaded_asid`: published *before* `loaded` (release), so a reader that sees the id (with
//!   acquire) sees the matching ASID; the transition protocol checks it.
//! * `is_lazy`: the CPU runs a kernel thread on top of a user address space it did not switch
//!   away from. Flushers skip lazy CPUs (they catch up by generation when they return) unless
//!   page tables are being freed.
//!
//! Everything else (the six ASID slots and the round-robin cursor) is private to the owner;
//! the fields are relaxed atomics only because safe Rust needs `Sync` for shared statics.
//! The slots carry the central invariant: *this CPU's TLB holds no entry for slot i that is
//! staler than generation `slots[i].tlb_gen` of address space `slots[i].ctx_id`.*

use crate::asid::{Asid, AtomicAsid, DYN_ASIDS};
use crate::context::CTX_NONE;
#[cfg(doc)]
use crate::context::CTX_SWITCHING;
use crate::counters::Counters;
use crate::sync::{AtomicBool, AtomicU8, AtomicU64, Ordering};

/// One dynamic ASID slot: which address space it caches and how fresh that cache is.
pub(crate) struct AsidSlot {
    pub(crate) ctx_id: AtomicU64,
    pub(crate) tlb_gen: AtomicU64,
}

/// A CPU's TLB state (see the module docs). The kernel allocates one per possible CPU and
/// passes the slice to [`crate::TlbSystem::new`].
///
/// Aligned to a cache line so that one CPU's updates (switches, counters) do not bounce the
/// line that flushers on other CPUs read for its neighbour.
#[repr(align(64))]
pub struct CpuTlbState {
    pub(crate) loaded: AtomicU64,
    pub(crate) loaded_asid: AtomicAsid,
    pub(crate) is_lazy: AtomicBool,
    pub(crate) slots: [AsidSlot; DYN_ASIDS],
    pub(crate) next_asid: AtomicU8,
    counters: Counters,
}

impl Default for CpuTlbState {
    fn default() -> Self {
        Self::new()
    }
}

impl CpuTlbState {
    /// State of a CPU that has not been brought up (nothing loaded, no flushes target it).
    pub fn new() -> Self {
        Self {
            loaded: AtomicU64::new(CTX_NONE),
            loaded_asid: AtomicAsid::new(Asid::of_slot(0)),
            is_lazy: AtomicBool::new(false),
            slots: core::array::from_fn(|_| AsidSlot {
                ctx_id: AtomicU64::new(CTX_NONE),
                tlb_gen: AtomicU64::new(0),
            }),
            next_asid: AtomicU8::new(0),
            counters: Counters::new(),
        }
    }

    /// Context id loaded on this CPU (`CTX_SWITCHING` while switching).
    pub fn loaded_ctx(&self) -> u64 {
        self.loaded.load(Ordering::Acquire)
    }

    /// ASID the loaded context runs under.
    pub fn loaded_asid(&self) -> Asid {
        self.loaded_asid.load(Ordering::Acquire)
    }

    /// Whether the CPU is in lazy-TLB mode.
    pub fn is_lazy(&self) -> bool {
        self.is_lazy.load(Ordering::Acquire)
    }

    /// `(ctx_id, tlb_gen)` of dynamic slot `i` (for tests, debugging and the trace).
    pub fn slot(&self, i: usize) -> (u64, u64) {
        let s = &self.slots[i];
        (
            s.ctx_id.load(Ordering::Relaxed),
            s.tlb_gen.load(Ordering::Relaxed),
        )
    }

    /// This CPU's event counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    pub(crate) fn set_slot(&self, slot: usize, ctx_id: u64, tlb_gen: u64) {
        let s = &self.slots[slot];
        s.ctx_id.store(ctx_id, Ordering::Relaxed);
        s.tlb_gen.store(tlb_gen, Ordering::Relaxed);
    }
}
