//! Global ASIDs: promotion, the transition protocol, and broadcast flushes (Linux 6.15:
//! `consider_global_asid`, `use_global_asid`, `finish_asid_transition`,
//! `broadcast_tlb_flush`).
//!
//! ## Why
//! An IPI costs the target an interrupt and the sender a wait for the slowest CPU. For an
//! address space running on many CPUs at once, one broadcast invalidation (INVLPGB, then
//! TLBSYNC to wait) replaces them all. But a broadcast is tagged with *one* PCID, so the
//! address space needs the same ASID on every CPU: a **global ASID**. There are only ~4k, so
//! only address spaces that really run on many CPUs get one.
//!
//! ## Policy
//! Checked only on the IPI flush path (that is where the cost is), at most once per
//! `promotion_interval` per address space, and granted when at least `promotion_threshold`
//! CPUs (4 by default, never fewer than 2) have it loaded and are not lazy. A single-threaded
//! process therefore never gets one. Exhaustion is not an error: the address space stays on
//! IPIs and `exhaustion_fallbacks` counts it. A global ASID is kept for the address space's
//! whole life.
//!
//! ## Transition
//! At the moment of promotion other CPUs still run the address space on their dynamic ASIDs,
//! which a broadcast for the global PCID does not reach. So promotion first sets
//! `asid_transition`, then publishes the ASID with a release store; readers load the ASID
//! with acquire, so **whoever sees the ASID also sees the flag**. While the flag is set:
//! - every broadcast flush also runs `finish_asid_transition`: for each CPU in the set it
//!   waits while the CPU is SWITCHING (it may have read "no global ASID" just before the
//!   publication and be about to load a dynamic one), then, if any CPU has the address space
//!   loaded on a non-global ASID, sends the IPI flush to the set and keeps the flag;
//!   only when none does is the flag cleared;
//! - IPI flushes reach lazy CPUs too, which may sit on a stale dynamic ASID; a lazy CPU
//!   reached by a flush leaves for the kernel address space, so it no longer counts;
//! - a running CPU moves over at its next switch or when a flush IPI reaches it, loading the
//!   global PCID **without** a flush. That is safe because every flush since publication went to the
//!   global PCID on every CPU, and the PCID holds nothing of a previous owner (it was never
//!   used since the last rollover flush).

use crate::asid::Asid;
use crate::context::{AddressSpaceTlb, CTX_NONE, CTX_SWITCHING};
use crate::counters::{Counters, TraceEvent, TraceReason};
use crate::faults::Fault;
use crate::flush::PAGE_SHIFT;
use crate::hardware::{BroadcastBackend, BroadcastOp, FlushRange, FlushRequest, TlbHardware};
use crate::instructions::LocalOp;
use crate::sync::{Ordering, spin_loop};
use crate::system::TlbSystem;
use tlb_types::{CpuId, CpuSet};

impl TlbSystem<'_> {
    /// The promotion check, after an IPI flush of `mm` (see the module docs).
    pub(crate) fn consider_global_asid(&self, hw: &impl TlbHardware, mm: &AddressSpaceTlb) {
        let Some(backend) = hw.broadcast() else {
            return;
        };
        if mm.global_asid().is_some() {
            return;
        }
        let now = hw.now();
        let due = mm.next_promotion_check.load(Ordering::Relaxed);
        let next = now + self.promotion_interval.load(Ordering::Relaxed);
        if now < due
            || mm
                .next_promotion_check
                .compare_exchange(due, next, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        let threshold = self.promotion_threshold();
        let cpus = mm.cpus.snapshot(Ordering::Relaxed);
        if cpus.count() < threshold {
            return;
        }
        let active = cpus
            .iter()
            .filter(|&c| {
                let st = &self.cpus[c];
                st.loaded.load(Ordering::Acquire) == mm.ctx_id
                    && !st.is_lazy.load(Ordering::Acquire)
            })
            .count();
        if active >= threshold {
            self.promote(hw, backend, mm);
        }
    }

    /// Gives `mm` a global ASID now, if it has none and one is available; returns its global
    /// ASID, or `None` without a broadcast backend or when the space is exhausted.
    ///
    /// Normally called by the promotion policy; the kernel may call it directly (a "promote
    /// now" knob for demonstrations). Interrupts on: a rollover may broadcast while holding
    /// the allocator lock.
    pub fn use_global_asid(&self, hw: &impl TlbHardware, mm: &AddressSpaceTlb) -> Option<Asid> {
        let backend = hw.broadcast()?;
        self.promote(hw, backend, mm)
    }

    fn promote<B: BroadcastBackend>(
        &self,
        hw: &impl TlbHardware<Broadcast = B>,
        backend: &B,
        mm: &AddressSpaceTlb,
    ) -> Option<Asid> {
        let me = hw.current_cpu();
        let counters = self.cpus[me].counters();
        let mut asids = self.asids.lock();
        if let Some(asid) = mm.global_asid() {
            return Some(asid);
        }
        let allocated = asids.allocate(|| {
            // Rollover: every PCID may hold entries of freed ASIDs' old owners.
            backend.flush_all_nonglobal();
            backend.sync();
            Counters::bump(&counters.rollovers, 1);
            Counters::bump(&counters.broadcast_ops, 1);
            Counters::bump(&counters.broadcast_syncs, 1);
            hw.trace(&TraceEvent {
                initiator: me,
                ctx_id: None,
                range: None,
                targets: CpuSet::new(),
                skipped: CpuSet::new(),
                reason: TraceReason::Rollover,
            });
        });
        let Some(asid) = allocated else {
            Counters::bump(&counters.exhaustion_fallbacks, 1);
            return None;
        };
        // Flag first, then the ASID with release (module docs).
        mm.asid_transition.store(true, Ordering::Relaxed);
        let publish = if self.faults.has(Fault::PublishGlobalAsidRelaxed) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        mm.global_asid.store(asid.get(), publish);
        Counters::bump(&counters.promotions, 1);
        hw.trace(&TraceEvent {
            initiator: me,
            ctx_id: Some(mm.ctx_id),
            range: None,
            targets: mm.cpus.snapshot(Ordering::Relaxed),
            skipped: CpuSet::new(),
            reason: TraceReason::Promotion,
        });
        Some(asid)
    }

    /// Flushes `mm` (global ASID `asid`) by broadcast, finishes a transition, then syncs.
    pub(crate) fn broadcast_flush<B: BroadcastBackend>(
        &self,
        hw: &impl TlbHardware<Broadcast = B>,
        backend: &B,
        mm: &AddressSpaceTlb,
        asid: Asid,
        request: &FlushRequest<'_>,
    ) {
        let pcid = asid.pcid();
        match request.range {
            FlushRange::All => backend.flush_pcid(pcid),
            FlushRange::Range {
                start,
                end,
                stride_shift,
            } => backend.flush_pcid_range(pcid, start, end, stride_shift),
        }
        // IPIs for stragglers go out while the broadcast is in flight.
        self.finish_asid_transition(hw, mm, request);
        backend.sync();
        let counters = self.cpus[request.initiator].counters();
        Counters::bump(&counters.broadcast_ops, 1);
        Counters::bump(&counters.broadcast_syncs, 1);
        self.trace(hw, request, CpuSet::new(), TraceReason::Broadcast);
    }

    /// Closes `mm`'s ASID transition if every CPU that has it loaded is on the global ASID;
    /// otherwise IPIs the set so the stragglers flush and move over.
    fn finish_asid_transition(
        &self,
        hw: &impl TlbHardware,
        mm: &AddressSpaceTlb,
        request: &FlushRequest<'_>,
    ) {
        if !mm.in_asid_transition() {
            return;
        }
        let Some(global) = mm.global_asid() else {
            return;
        };
        if self.faults.has(Fault::NoIpiDuringTransition) {
            mm.asid_transition.store(false, Ordering::Release);
            return;
        }
        let cpus = mm.cpus.snapshot(Ordering::Acquire);
        for cpu in cpus.iter() {
            let st = &self.cpus[cpu];
            let loaded = loop {
                let loaded = st.loaded.load(Ordering::Acquire);
                if loaded != CTX_SWITCHING || self.faults.has(Fault::TransitionIgnoresSwitching) {
                    break loaded;
                }
                spin_loop();
            };
            if loaded == mm.ctx_id && st.loaded_asid.load(Ordering::Acquire) != global {
                self.flush_multi(hw, &cpus, request);
                return;
            }
        }
        mm.asid_transition.store(false, Ordering::Release);
        Counters::bump(
            &self.cpus[request.initiator].counters().transitions_finished,
            1,
        );
    }

    /// A software broadcast backend's IPI handler calls this on every online CPU with the
    /// operation it broadcast (interrupts off). It gives the operation INVLPGB's meaning on
    /// this CPU: entries of the current PCID are invalidated page by page; another PCID is
    /// flushed whole (INVPCID can name it); without PCID only the current address space can
    /// hold non-global entries at all, so other PCIDs need nothing.
    pub fn handle_broadcast_ipi(&self, hw: &impl TlbHardware, op: &BroadcastOp) {
        let st = &self.cpus[hw.current_cpu()];
        let counters = st.counters();
        Counters::bump(&counters.ipis_received, 1);
        let current = match st.loaded.load(Ordering::Relaxed) {
            CTX_NONE => None,
            _ => Some(st.loaded_asid.load(Ordering::Relaxed).pcid()),
        };
        match *op {
            BroadcastOp::PcidRange {
                pcid,
                start,
                end,
                stride_shift,
            } => {
                if current == Some(pcid) || self.faults.has(Fault::InvlpgForOtherPcid) {
                    let mut addr = start;
                    while addr < end {
                        self.local(hw, LocalOp::UserPage { va: addr });
                        Counters::bump(&counters.pages_invalidated, 1);
                        addr = addr.saturating_add(1 << stride_shift);
                    }
                } else if hw.local_tlb().pcide {
                    self.local(hw, LocalOp::Pcid(pcid));
                }
            }
            BroadcastOp::Pcid(pcid) => {
                if current == Some(pcid) || hw.local_tlb().pcide {
                    self.local(hw, LocalOp::Pcid(pcid));
                }
            }
            BroadcastOp::AllNonGlobal => self.local(hw, LocalOp::AllNonGlobal),
            BroadcastOp::KernelRange { start, end } => {
                let mut addr = start;
                while addr < end {
                    self.local(hw, LocalOp::KernelPage { va: addr });
                    Counters::bump(&counters.pages_invalidated, 1);
                    addr = addr.saturating_add(1 << PAGE_SHIFT);
                }
            }
            BroadcastOp::AllIncludingGlobal => self.local(hw, LocalOp::Everything),
        }
    }

    /// Whether CPU `cpu` currently runs on a global ASID (for the kernel's statistics).
    pub fn cpu_on_global_asid(&self, cpu: CpuId) -> bool {
        let st = &self.cpus[cpu];
        st.loaded.load(Ordering::Acquire) != CTX_NONE
            && st.loaded_asid.load(Ordering::Acquire).is_global()
    }
}
