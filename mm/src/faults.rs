//! Deliberate bugs, switched on at run time, so tests can prove they catch each one.
//!
//! A test suite that never fails proves nothing. The host model (`mm/tests/model/`) turns
//! each of these on in turn and checks that its oracle reports a stale translation; the unit
//! tests do the same for the decision functions; the loom checks (`mm/tests/loom/`, see
//! [`crate::races`]) catch the weak-memory ones, which no real-thread test can. The QEMU kernel can turn them on too, so a student
//! can watch a broken kernel misbehave. With no fault set, each check is one relaxed load of
//! a word that is always zero.

use crate::sync::{AtomicU32, Ordering};

/// One deliberate bug (see each variant for the upstream bug class it reproduces).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Fault {
    /// Flushers skip CPUs whose `loaded` is SWITCHING (CVE-2025-37964).
    SkipSwitchingCpus = 1 << 0,
    /// Flushers skip lazy CPUs even when page tables are freed (CVE-2025-22045 class).
    SkipLazyWhenFreeingTables = 1 << 1,
    /// The broadcast path sends no IPIs during an ASID transition: it closes the transition
    /// at once, so CPUs still running the address space on a dynamic ASID are never flushed.
    NoIpiDuringTransition = 1 << 2,
    /// A freed global ASID goes straight back to the pool, without a rollover flush.
    ReuseGlobalAsidBeforeRollover = 1 << 3,
    /// `switch_mm` reads the generation before publishing SWITCHING and its CPU-set bit
    /// (the missing-barrier bug, CVE-2025-40174, made visible to any scheduler).
    GenerationReadBeforeCpuSet = 1 << 4,
    /// The flush handler does a partial flush whenever the request is a range, without the
    /// `new == local + 1 == current` check.
    PartialFlushWithoutGenerationCheck = 1 << 5,
    /// `switch_mm`'s full fences (after publishing SWITCHING and the CPU-set bit, and after
    /// clearing `is_lazy` on a return from lazy mode) are only acquire-release fences, which
    /// do not order a store before a later load (CVE-2025-40174; only loom can see this one).
    SwitchFenceAcqRel = 1 << 6,
    /// The flusher's full fence after bumping the generation (flush requests and
    /// `batch_add_pending`) is only an acquire-release fence (the other side of the Dekker
    /// pattern; only loom can see this one, since x86's locked increment is a full barrier).
    BumpFenceAcqRel = 1 << 7,
    /// Promotion publishes the global ASID with a relaxed store instead of release, so a CPU
    /// can see the ASID without the transition flag (only loom can see this one).
    PublishGlobalAsidRelaxed = 1 << 8,
    /// `finish_asid_transition` does not wait for SWITCHING CPUs, so a CPU that read "no
    /// global ASID" just before promotion is missed (reference section 7, item 9).
    TransitionIgnoresSwitching = 1 << 9,
    /// "Flush everything" is done by reloading CR3, which drops only the current PCID's
    /// non-global entries: other PCIDs and global (kernel) entries survive (the fallback the
    /// kernel used before instruction choice moved into `mm`).
    EverythingByCr3Reload = 1 << 10,
    /// The broadcast handler flushes a range of a PCID that is not loaded with INVLPG, which
    /// only reaches the current PCID.
    InvlpgForOtherPcid = 1 << 11,
    /// A kernel page is flushed with INVPCID type 0 for the current PCID, which neither drops
    /// global entries nor reaches other PCIDs (a PCID-scoped flush of a kernel range).
    KernelPageByPcidInvpcid = 1 << 12,
}

/// The set of enabled faults.
#[derive(Default)]
pub struct Faults {
    bits: AtomicU32,
}

impl Faults {
    /// No faults.
    pub fn new() -> Self {
        Self {
            bits: AtomicU32::new(0),
        }
    }

    /// Enables or disables `fault`.
    pub fn set(&self, fault: Fault, on: bool) {
        if on {
            self.bits.fetch_or(fault as u32, Ordering::Relaxed);
        } else {
            self.bits.fetch_and(!(fault as u32), Ordering::Relaxed);
        }
    }

    /// Whether `fault` is enabled.
    #[inline]
    pub fn has(&self, fault: Fault) -> bool {
        self.bits.load(Ordering::Relaxed) & fault as u32 != 0
    }
}
