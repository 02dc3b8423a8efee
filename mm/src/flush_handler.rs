//! The per-CPU flush handler (Linux: `flush_tlb_func`): what a CPU does with a
//! [`FlushRequest`], in an IPI from the flusher (`flush.rs`) or, for the flusher's own CPU,
//! called directly with interrupts off.
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
//! 6. The generation check: the `local + 1` rule below.
//!
//! Steps 1 to 5 are `dynamic_asid_to_flush`, step 6 is `catch_up`; a kernel flush skips them
//! all (every CPU flushes its global entries).
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

use crate::asid::Asid;
use crate::context::{AddressSpaceTlb, no_user_space};
use crate::counters::Counters;
use crate::faults::Fault;
use crate::hardware::{FlushRange, FlushRequest, FlushTarget, TlbHardware};
use crate::instructions::LocalOp;
use crate::sync::Ordering;
use crate::system::TlbSystem;

impl TlbSystem<'_> {
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
        if no_user_space(loaded) {
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
        (!asid.is_global()).then_some(asid)
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
        let slot = &st.slots[asid.slot().expect("a global ASID never catches up")];
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
        self.local(hw, LocalOp::Pcid(asid.pcid()));
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
