//! The TLB side of one address space: [`AddressSpaceTlb`] (Linux: `mm->context` plus
//! `mm_cpumask`).
//!
//! The kernel embeds one of these in each process (and the [`crate::TlbSystem`] owns one for
//! the kernel's own address space). It is shared by every CPU, so every field is atomic.
//!
//! * `ctx_id` is unique for the life of the system and never reused. Per-CPU ASID slots
//!   remember *which* address space they cached by this id, so a slot left behind by a dead
//!   process can never be mistaken for a new one (a pointer could be reused; the id cannot).
//! * `tlb_gen` is the **flush generation**. Whoever changes the page tables in a way that
//!   needs a flush increments it, and each CPU remembers, per ASID slot, the generation its
//!   TLB is known to be up to date with. "My slot says 7, the address space says 9" means
//!   "I may hold translations that two changes ago became stale". The generation is what lets
//!   a CPU that was not interrupted (lazy, or not running the address space) catch up later.
//! * `cpus` is a superset of the CPUs that may hold translations of this address space: a
//!   CPU sets its bit when it switches in and only clears it itself, when a flush reaches it
//!   after it has switched away.
//! * `global_asid` and `asid_transition` are the promotion state (see `global_asid.rs`).
//!   The flag is published *before* the ASID (release), and read *after* it (acquire), so
//!   anyone who sees the ASID also knows that stragglers on dynamic ASIDs may exist.

use crate::asid::Asid;
use crate::cpu_set::AtomicCpuSet;
use crate::sync::{AtomicBool, AtomicU16, AtomicU64, Ordering};
use tlb_types::PageTableRoot;

/// Context id meaning "no address space" (an empty ASID slot).
pub const CTX_NONE: u64 = 0;
/// Context id of the kernel's own address space (Linux: `init_mm`).
pub const CTX_KERNEL: u64 = 1;
/// Marker stored in a CPU's "loaded" field while it changes CR3 (Linux:
/// `LOADED_MM_SWITCHING`). Never a real id.
pub const CTX_SWITCHING: u64 = u64::MAX;

/// Whether a CPU whose `loaded` field holds `ctx` runs on no user address space: the
/// kernel's own, or none yet. (`CTX_SWITCHING` is neither: the CPU is on its way to one.)
pub(crate) const fn no_user_space(ctx: u64) -> bool {
    matches!(ctx, CTX_KERNEL | CTX_NONE)
}

/// Per-address-space TLB state (see the module docs).
pub struct AddressSpaceTlb {
    pub(crate) ctx_id: u64,
    pub(crate) root: PageTableRoot,
    pub(crate) tlb_gen: AtomicU64,
    pub(crate) cpus: AtomicCpuSet,
    /// The global ASID's number, 0 for none (ASID 0 is a dynamic slot, never global).
    pub(crate) global_asid: AtomicU16,
    pub(crate) asid_transition: AtomicBool,
    /// Earliest time (in [`crate::TlbHardware::now`] ticks) of the next CPU-set trim.
    pub(crate) next_trim: AtomicU64,
    /// Earliest time of the next promotion check (the rate limit).
    pub(crate) next_promotion_check: AtomicU64,
}

impl AddressSpaceTlb {
    /// Built by [`crate::TlbSystem::new_address_space`], which hands out the unique id.
    pub(crate) fn new(ctx_id: u64, root: PageTableRoot) -> Self {
        Self {
            ctx_id,
            root,
            tlb_gen: AtomicU64::new(1),
            cpus: AtomicCpuSet::new(),
            global_asid: AtomicU16::new(0),
            asid_transition: AtomicBool::new(false),
            next_trim: AtomicU64::new(0),
            next_promotion_check: AtomicU64::new(0),
        }
    }

    /// The unique, never-reused context id.
    pub fn ctx_id(&self) -> u64 {
        self.ctx_id
    }

    /// The page-table root the kernel gave at creation; opaque to this crate and handed
    /// back in the CR3 load of a switch to it.
    pub fn root(&self) -> PageTableRoot {
        self.root
    }

    /// The current flush generation.
    pub fn tlb_gen(&self) -> u64 {
        self.tlb_gen.load(Ordering::Acquire)
    }

    /// The global ASID, if this address space has been promoted.
    ///
    /// Acquire pairs with the release in promotion: a caller that sees `Some` also sees the
    /// transition flag that was set before it.
    pub fn global_asid(&self) -> Option<Asid> {
        match self.global_asid.load(Ordering::Acquire) {
            0 => None,
            asid => Some(Asid::new(asid)),
        }
    }

    /// Whether some CPU may still run this address space on a dynamic ASID after promotion.
    pub fn in_asid_transition(&self) -> bool {
        self.asid_transition.load(Ordering::Acquire)
    }

    /// The CPUs that may hold translations of this address space (a superset).
    pub fn cpus(&self) -> crate::CpuSet {
        self.cpus.snapshot(Ordering::Acquire)
    }
}

impl core::fmt::Debug for AddressSpaceTlb {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AddressSpaceTlb")
            .field("ctx_id", &self.ctx_id)
            .field("tlb_gen", &self.tlb_gen())
            .field("cpus", &self.cpus())
            .field("global_asid", &self.global_asid())
            .field("asid_transition", &self.in_asid_transition())
            .finish()
    }
}
