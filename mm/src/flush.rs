//! Flush requests and target selection (Linux: `flush_tlb_mm_range`,
//! `native_flush_tlb_multi`, `should_flush_tlb`, `flush_tlb_kernel_range`). What each target
//! then does is `flush_handler.rs`.
//!
//! ## The request path
//! 1. **Bump the generation** with a sequentially consistent read-modify-write and a full
//!    fence. The caller has already changed the page tables; the fence orders those writes
//!    (and the bump) before every read that decides whom to flush. It pairs with the switch
//!    path's fence (see `switch.rs`): without it, a CPU that is switching in could be missed
//!    *and* miss the new generation.
//! 2. **Widen** a request of more than the ceiling (33 units by default) to a full flush.
//! 3. **Decide**: a global ASID means broadcast (`global_asid.rs`); otherwise, if the CPU set
//!    holds a CPU other than the caller, IPIs to the *targets* among them; otherwise, if the
//!    caller has the address space loaded, a local flush and no IPI at all (the one-CPU
//!    shortcut: a single-threaded process never pays for an interrupt); otherwise nothing:
//!    the bumped generation makes the next switch-in flush.
//!
//! ## Who is a target
//! A CPU in the set is interrupted if it is SWITCHING (it may already have loaded CR3
//! without seeing our bump), if it has the address space loaded and is not lazy, if this is
//! a kernel flush, if this is a batch flush and it has some user address space loaded, or if
//! the request carries the periodic *trim* flag (so CPUs that left can drop their bit). A
//! batch names no address space, but a CPU on the kernel's own has none of the batch's
//! loaded: it catches up by generation when it loads one (Linux interrupts it for a handler
//! with nothing to do). Lazy CPUs are skipped, because they catch up by generation when
//! they return, **unless** page tables are being freed (a lazy CPU can still walk the old
//! tables speculatively) or the address space is in an ASID transition (a lazy CPU may sit on
//! a dynamic ASID that the broadcast does not reach); then every CPU in the set is a target.
//!
//! ## Interrupts
//! Request paths (`flush_tlb_mm_range`, `flush_kernel_range`, `batch_flush`) run with
//! interrupts **on**: they wait for other CPUs, which may at that moment be waiting for
//! this one. The handler runs with interrupts **off** (in the IPI, or locally through
//! [`TlbHardware::without_interrupts`]): it updates the same per-CPU state as `switch_mm`.

use crate::context::{AddressSpaceTlb, CTX_SWITCHING, no_user_space};
use crate::counters::{Counters, TraceEvent, TraceReason};
use crate::faults::Fault;
use crate::hardware::{BroadcastBackend, FlushRange, FlushRequest, FlushTarget, TlbHardware};
use crate::sync::{Ordering, fence};
use crate::system::TlbSystem;
use tlb_types::{CpuId, CpuSet};

/// Shift of a 4 KiB page.
pub const PAGE_SHIFT: u8 = 12;

impl TlbSystem<'_> {
    /// Makes every CPU stop using translations of `range` in `mm`. Call **after** changing
    /// the page tables, with preemption off and **interrupts on** (the call waits for other
    /// CPUs, which may be waiting for us). Returns when no CPU can use the old translations.
    pub fn flush_tlb_mm_range(
        &self,
        hw: &impl TlbHardware,
        mm: &AddressSpaceTlb,
        range: FlushRange,
        freed_tables: bool,
    ) {
        let me = hw.current_cpu();
        let new_gen = self.bump_generation(mm);
        let mut request = FlushRequest {
            target: FlushTarget::AddressSpace { mm, new_gen },
            range: self.apply_ceiling(me, range),
            freed_tables,
            trim: false,
            initiator: me,
        };

        if let Some(backend) = hw.broadcast()
            && let Some(asid) = mm.global_asid()
        {
            self.broadcast_flush(hw, backend, mm, asid, &request);
            return;
        }
        let cpus = mm.cpus.snapshot(Ordering::Relaxed);
        if cpus.has_other_than(me) {
            request.trim = self.should_trim(hw, mm);
            self.flush_multi(hw, &cpus, &request);
            self.consider_global_asid(hw, mm);
        } else if self.cpus[me].loaded.load(Ordering::Relaxed) == mm.ctx_id {
            self.flush_local(hw, &request);
            self.trace(hw, &request, CpuSet::new(), TraceReason::LocalOnly);
        } else {
            self.trace(hw, &request, CpuSet::new(), TraceReason::GenerationOnly);
        }
    }

    /// Flushes all of `mm` and assumes page tables were freed (Linux: `flush_tlb_mm`), e.g.
    /// after tearing down a whole range of page tables. Same rules as
    /// [`TlbSystem::flush_tlb_mm_range`].
    pub fn flush_tlb_mm(&self, hw: &impl TlbHardware, mm: &AddressSpaceTlb) {
        self.flush_tlb_mm_range(hw, mm, FlushRange::All, true);
    }

    /// Step 1 of every flush request (and of `batch_add_pending`): bump `mm`'s generation,
    /// then a full fence, the flusher's side of the Dekker pattern (module docs). Returns
    /// the new generation.
    pub(crate) fn bump_generation(&self, mm: &AddressSpaceTlb) -> u64 {
        let new_gen = mm.tlb_gen.fetch_add(1, Ordering::SeqCst) + 1;
        fence(if self.faults.has(Fault::BumpFenceAcqRel) {
            Ordering::AcqRel
        } else {
            Ordering::SeqCst
        });
        new_gen
    }

    fn apply_ceiling(&self, me: CpuId, range: FlushRange) -> FlushRange {
        match range.units() {
            Some(units) if units > self.flush_ceiling() => {
                Counters::bump(&self.cpus[me].counters().ceiling_full_flushes, 1);
                FlushRange::All
            }
            _ => range,
        }
    }

    /// True at most once per trim interval per address space.
    fn should_trim(&self, hw: &impl TlbHardware, mm: &AddressSpaceTlb) -> bool {
        let now = hw.now();
        let due = mm.next_trim.load(Ordering::Relaxed);
        now >= due
            && mm
                .next_trim
                .compare_exchange(
                    due,
                    now + self.trim_interval.load(Ordering::Relaxed),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }

    /// Whether CPU `cpu` must get `request` (the target test; see the module docs). The
    /// "freed tables / ASID transition" override is applied by the caller.
    pub fn should_flush(&self, cpu: CpuId, request: &FlushRequest<'_>) -> bool {
        let st = &self.cpus[cpu];
        // Acquire on `loaded`, then `is_lazy`: laziness is read at least as new as `loaded`.
        let loaded = st.loaded.load(Ordering::Acquire);
        if st.is_lazy.load(Ordering::Acquire) {
            return false;
        }
        let switching = loaded == CTX_SWITCHING && !self.faults.has(Fault::SkipSwitchingCpus);
        match request.target {
            FlushTarget::Kernel => true,
            // A CPU on the kernel's address space has no user one loaded: it catches up by
            // generation when it loads one, as a lazy CPU does.
            FlushTarget::LoadedUser => match loaded {
                CTX_SWITCHING => switching,
                _ => !no_user_space(loaded),
            },
            FlushTarget::AddressSpace { mm, .. } => {
                switching || loaded == mm.ctx_id || request.trim
            }
        }
    }

    /// Sends `request` to the targets among `cpus` (the caller included, run locally).
    pub(crate) fn flush_multi(
        &self,
        hw: &impl TlbHardware,
        cpus: &CpuSet,
        request: &FlushRequest<'_>,
    ) {
        let me = request.initiator;
        let everyone = match request.target {
            FlushTarget::AddressSpace { mm, .. } => {
                (request.freed_tables && !self.faults.has(Fault::SkipLazyWhenFreeingTables))
                    || mm.in_asid_transition()
            }
            _ => false,
        };
        let targets: CpuSet = cpus
            .iter()
            .filter(|&c| everyone || self.should_flush(c, request))
            .collect();
        let remote = targets.without(me);
        if !remote.is_empty() {
            Counters::bump(&self.cpus[me].counters().ipis_sent, remote.count() as u64);
            hw.send_flush_ipis(&remote, request);
        }
        if targets.contains(me) {
            self.flush_local(hw, request);
        }
        let reason = match request.target {
            FlushTarget::LoadedUser => TraceReason::Batch,
            _ => TraceReason::Ipi,
        };
        self.trace_decision(hw, request, targets, cpus.difference(&targets), reason);
    }

    /// Flushes kernel addresses `start..end` (4 KiB pages, global entries) on **every**
    /// online CPU, lazy ones included. Preemption off, interrupts on. More than the ceiling
    /// flushes everything. With a broadcast backend no IPI is sent.
    pub fn flush_kernel_range(&self, hw: &impl TlbHardware, start: u64, end: u64) {
        let range = FlushRange::Range {
            start,
            end,
            stride_shift: PAGE_SHIFT,
        };
        self.flush_kernel(hw, range);
    }

    /// Flushes everything, global entries included, on every online CPU.
    pub fn flush_tlb_all(&self, hw: &impl TlbHardware) {
        self.flush_kernel(hw, FlushRange::All);
    }

    fn flush_kernel(&self, hw: &impl TlbHardware, range: FlushRange) {
        let me = hw.current_cpu();
        let range = self.apply_ceiling(me, range);
        let request = FlushRequest {
            target: FlushTarget::Kernel,
            range,
            freed_tables: false,
            trim: false,
            initiator: me,
        };
        if let Some(backend) = hw.broadcast() {
            match range {
                FlushRange::All => backend.flush_all_including_global(),
                FlushRange::Range { start, end, .. } => backend.flush_kernel_range(start, end),
            }
            backend.sync();
            let counters = self.cpus[me].counters();
            Counters::bump(&counters.broadcast_ops, 1);
            Counters::bump(&counters.broadcast_syncs, 1);
            self.trace(hw, &request, CpuSet::new(), TraceReason::Kernel);
            return;
        }
        let targets = hw.online_cpus();
        let remote = targets.without(me);
        if !remote.is_empty() {
            Counters::bump(&self.cpus[me].counters().ipis_sent, remote.count() as u64);
            hw.send_flush_ipis(&remote, &request);
        }
        self.flush_local(hw, &request);
        self.trace(hw, &request, targets, TraceReason::Kernel);
    }

    /// Reports a decision that skipped no CPU of a CPU set.
    pub(crate) fn trace(
        &self,
        hw: &impl TlbHardware,
        request: &FlushRequest<'_>,
        targets: CpuSet,
        reason: TraceReason,
    ) {
        self.trace_decision(hw, request, targets, CpuSet::new(), reason);
    }

    fn trace_decision(
        &self,
        hw: &impl TlbHardware,
        request: &FlushRequest<'_>,
        targets: CpuSet,
        skipped: CpuSet,
        reason: TraceReason,
    ) {
        hw.trace(&TraceEvent {
            initiator: request.initiator,
            ctx_id: match request.target {
                FlushTarget::AddressSpace { mm, .. } => Some(mm.ctx_id),
                _ => None,
            },
            range: request.range.bounds(),
            targets,
            skipped,
            reason,
        });
    }
}
