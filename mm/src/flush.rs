//! Flush requests, target selection and the per-CPU flush handler (Linux:
//! `flush_tlb_mm_range`, `native_flush_tlb_multi`, `should_flush_tlb`, `flush_tlb_func`,
//! `flush_tlb_kernel_range`).
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
//! a kernel or batch flush, or if the request carries the periodic *trim* flag (so CPUs that
//! left can drop their bit). Lazy CPUs are skipped, because they catch up by generation when
//! they return, **unless** page tables are being freed (a lazy CPU can still walk the old
//! tables speculatively) or the address space is in an ASID transition (a lazy CPU may sit on
//! a dynamic ASID that the broadcast does not reach); then every CPU in the set is a target.
//!
//! ## The handler, in order
//! 1. A request for an address space this CPU no longer has loaded: the CPU removes itself
//!    from the CPU set (its slot's generation will catch it up at switch-in) and returns.
//! 2. Kernel address space loaded: nothing to do.
//! 3. Lazy: switch to the kernel address space and return. (Running a kernel thread, the CPU
//!    needs none of the user mappings, and it must not walk freed tables speculatively.)
//! 4. The address space has a global ASID but this CPU runs it on a dynamic one (an ASID
//!    transition straggler): move to the global ASID without a flush and return.
//! 5. Already on a global ASID: broadcasts keep it current, return.
//! 6. The generation check below.
//!
//! ## The `local + 1` rule
//! Each CPU's slot says "my TLB is current up to generation `local`". A request carries the
//! generation `new` its bump produced. If `new <= local` the CPU has already caught up. A
//! **partial** flush (one INVLPG per unit) is enough only if this request is the *only*
//! change between `local` and the current generation: `new == local + 1 == current`.
//! Otherwise some other change (maybe one that needed a full flush) has not been applied
//! here yet, and the handler flushes everything. Both paths then record `current`. Dropping
//! the rule lets two concurrent flushes handled in reverse order skip a full flush: with
//! `local = 5`, flush A (full, `new = 6`) and flush B (one page, `new = 7`); B arrives first,
//! a partial flush records 7, then A finds `6 <= 7` and does nothing, so A's pages stay.
//!
//! ## Interrupts
//! Request paths (`flush_tlb_mm_range`, `flush_kernel_range`, `batch_flush`) run with
//! interrupts **on**: they wait for other CPUs, which may at that moment be waiting for
//! this one. The handler runs with interrupts **off** (in the IPI, or locally through
//! [`TlbHardware::without_interrupts`]): it updates the same per-CPU state as `switch_mm`.

use crate::asid::{Asid, is_global_asid, pcid_of};
use crate::context::{AddressSpaceTlb, CTX_KERNEL, CTX_NONE, CTX_SWITCHING};
use crate::counters::{Counters, TraceEvent, TraceReason};
use crate::faults::Fault;
use crate::hardware::{BroadcastBackend, FlushRange, FlushRequest, FlushTarget, TlbHardware};
use crate::instructions::LocalOp;
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
        match request.target {
            FlushTarget::Kernel | FlushTarget::LoadedUser => true,
            FlushTarget::AddressSpace { mm, .. } => {
                (loaded == CTX_SWITCHING && !self.faults.has(Fault::SkipSwitchingCpus))
                    || loaded == mm.ctx_id
                    || request.trim
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
        self.trace(hw, request, targets, reason);
    }

    /// Runs the handler on the calling CPU with interrupts off.
    pub(crate) fn flush_local(&self, hw: &impl TlbHardware, request: &FlushRequest<'_>) {
        hw.without_interrupts(&mut || self.handle_flush(hw, request));
    }

    /// The kernel's flush-IPI handler calls this (interrupts are off in a handler).
    pub fn handle_flush_ipi(&self, hw: &impl TlbHardware, request: &FlushRequest<'_>) {
        Counters::bump(&self.cpus[hw.current_cpu()].counters().ipis_received, 1);
        self.handle_flush(hw, request);
    }

    /// The per-CPU flush handler (Linux: `flush_tlb_func`), the steps of the module docs'
    /// "The handler, in order": steps 1 to 5 find whether this CPU runs the address space on
    /// an ASID that it must flush itself, step 6 brings that ASID up to date. Interrupts off.
    fn handle_flush(&self, hw: &impl TlbHardware, request: &FlushRequest<'_>) {
        let st = &self.cpus[hw.current_cpu()];
        Counters::bump(&st.counters().flush_handler_runs, 1);
        match request.target {
            FlushTarget::Kernel => self.flush_kernel_local(hw, request.range),
            FlushTarget::AddressSpace { mm, new_gen } => {
                if let Some(asid) = self.dynamic_asid_to_flush(hw, Some(mm)) {
                    self.catch_up(hw, mm, asid, new_gen, request.range);
                }
            }
            // A batch flush without an address space: flush what is loaded. The slot's
            // generation is left alone, which is conservative (a later switch-in or flush
            // flushes once more) and needs no pointer to the loaded address space.
            FlushTarget::LoadedUser => {
                if let Some(asid) = self.dynamic_asid_to_flush(hw, None) {
                    self.flush_whole_pcid(hw, asid);
                }
            }
        }
    }

    /// Steps 1 to 5 of the handler: the dynamic ASID under which this CPU runs the user
    /// address space the request is about (`mm`, or whatever is loaded if `None`), or `None`
    /// when there is nothing for it to flush: it does not run `mm` (and leaves its CPU set),
    /// runs the kernel, is lazy (and leaves for the kernel address space), or runs `mm` on a
    /// global ASID, which broadcasts keep current (after moving there if it was an ASID
    /// transition's straggler).
    fn dynamic_asid_to_flush(
        &self,
        hw: &impl TlbHardware,
        mm: Option<&AddressSpaceTlb>,
    ) -> Option<Asid> {
        let me = hw.current_cpu();
        let st = &self.cpus[me];
        let loaded = st.loaded.load(Ordering::Relaxed);
        if let Some(mm) = mm
            && loaded != mm.ctx_id
        {
            // 1. Not running it any more: the generation catches us up at switch-in, so
            //    we can leave the CPU set (the lazy trim).
            if mm.cpus.remove(me, Ordering::Relaxed) {
                Counters::bump(&st.counters().cpu_set_trims, 1);
            }
            return None;
        }
        // 2. The kernel's address space changes only by kernel flushes.
        if loaded == CTX_KERNEL || loaded == CTX_NONE {
            return None;
        }
        if st.is_lazy.load(Ordering::Relaxed) {
            // 3. Running a kernel thread on top of a user address space that is changing:
            //    leave it (this also moves a lazy ASID-transition straggler off its dynamic
            //    ASID).
            self.switch_mm(hw, &self.kernel);
            return None;
        }
        let mut asid = st.loaded_asid.load(Ordering::Relaxed);
        if let Some(mm) = mm
            && self.needs_global_asid(hw, mm, asid)
        {
            // 4. A straggler of an ASID transition: move to the global ASID (no flush).
            self.switch_mm(hw, mm);
            asid = st.loaded_asid.load(Ordering::Relaxed);
        }
        // 5. Broadcast invalidations keep global ASIDs current.
        (!is_global_asid(asid)).then_some(asid)
    }

    /// Step 6 of the handler: brings this CPU's `asid`, which holds `mm`, up to `mm`'s
    /// current generation, with a partial flush where the `local + 1` rule (module docs)
    /// allows one and a flush of the whole PCID otherwise.
    fn catch_up(
        &self,
        hw: &impl TlbHardware,
        mm: &AddressSpaceTlb,
        asid: Asid,
        new_gen: u64,
        range: FlushRange,
    ) {
        let st = &self.cpus[hw.current_cpu()];
        let slot = &st.slots[asid as usize];
        let local = slot.tlb_gen.load(Ordering::Relaxed);
        if new_gen <= local {
            // Already caught up, by a later request or a switch-in.
            return;
        }
        let current = mm.tlb_gen.load(Ordering::Acquire);
        if current <= local {
            return;
        }
        match self.partial_flush_range(range, local, new_gen, current) {
            Some((start, end, stride_shift)) => {
                let pages =
                    self.flush_pages(hw, start, end, stride_shift, |va| LocalOp::UserPage { va });
                Counters::bump(&st.counters().local_partial_flushes, 1);
                Counters::bump(&st.counters().pages_invalidated, pages);
            }
            None => self.flush_whole_pcid(hw, asid),
        }
        slot.tlb_gen.store(current, Ordering::Relaxed);
    }

    /// The `local + 1` rule: the range a partial flush may stop at, if this request (which
    /// produced `new_gen`) is the only change between the CPU's `local` generation and the
    /// `current` one; `None` means a full flush.
    fn partial_flush_range(
        &self,
        range: FlushRange,
        local: u64,
        new_gen: u64,
        current: u64,
    ) -> Option<(u64, u64, u8)> {
        let FlushRange::Range {
            start,
            end,
            stride_shift,
        } = range
        else {
            return None;
        };
        let only_change = new_gen == local + 1 && new_gen == current;
        (only_change || self.faults.has(Fault::PartialFlushWithoutGenerationCheck)).then_some((
            start,
            end,
            stride_shift,
        ))
    }

    /// Every non-global entry this CPU holds under `asid`.
    fn flush_whole_pcid(&self, hw: &impl TlbHardware, asid: Asid) {
        self.local(hw, LocalOp::Pcid(pcid_of(asid)));
        Counters::bump(
            &self.cpus[hw.current_cpu()].counters().local_full_flushes,
            1,
        );
    }

    fn flush_kernel_local(&self, hw: &impl TlbHardware, range: FlushRange) {
        let counters = self.cpus[hw.current_cpu()].counters();
        match range {
            FlushRange::All => {
                self.local(hw, LocalOp::Everything);
                Counters::bump(&counters.local_full_flushes, 1);
            }
            FlushRange::Range {
                start,
                end,
                stride_shift,
            } => {
                let pages = self.flush_pages(hw, start, end, stride_shift, |va| {
                    LocalOp::KernelPage { va }
                });
                Counters::bump(&counters.local_partial_flushes, 1);
                Counters::bump(&counters.pages_invalidated, pages);
            }
        }
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

    pub(crate) fn trace(
        &self,
        hw: &impl TlbHardware,
        request: &FlushRequest<'_>,
        targets: CpuSet,
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
            reason,
        });
    }

    /// One page operation (`page(address)`) per stride unit of `start..end`; returns how many
    /// were carried out.
    fn flush_pages(
        &self,
        hw: &impl TlbHardware,
        start: u64,
        end: u64,
        stride_shift: u8,
        page: impl Fn(u64) -> LocalOp,
    ) -> u64 {
        let step = 1u64 << stride_shift;
        let mut addr = start;
        let mut n = 0;
        while addr < end {
            self.local(hw, page(addr));
            n += 1;
            addr = match addr.checked_add(step) {
                Some(a) => a,
                None => break,
            };
        }
        n
    }
}
