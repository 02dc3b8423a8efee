//! Switching address spaces and lazy-TLB mode (Linux: `switch_mm_irqs_off`,
//! `choose_new_asid`, `enter_lazy_tlb`).
//!
//! ## Choosing an ASID
//! A CPU keeps the last [`DYN_ASIDS`] address spaces it ran in slots `{ctx_id, tlb_gen}`.
//! Switching to an address space already in a slot reuses that ASID and flushes only if the
//! slot's generation is older than the address space's; otherwise the round-robin cursor
//! evicts a slot and the load flushes. An address space with a global ASID always uses it,
//! without a flush: broadcast invalidations keep it current on every CPU at all times.
//! Without PCID every load flushes and the slot bookkeeping uses ASID 0.
//!
//! ## The switching race (why SWITCHING and the full fence exist)
//! A flusher does: *change PTEs; bump `tlb_gen` (full barrier); read each CPU's `loaded` and
//! the CPU set*. A switching CPU does: *store `loaded = SWITCHING`; set its bit in the CPU
//! set; **full fence**; read `tlb_gen`; load CR3*. This is the Dekker pattern: with both
//! fences, at least one side sees the other's store. Either the flusher sees the bit and
//! SWITCHING (and sends an IPI, handled once the switch is done) or the switcher reads the
//! new generation (and flushes while loading CR3). Remove the switcher's fence and both can
//! read the old values: the CPU loads CR3 without a flush, the flusher skips it, and a stale
//! translation survives the unmap (CVE-2025-40174). Skip the SWITCHING store and the flusher
//! sees the *previous* address space and skips the CPU (CVE-2025-37964).
//!
//! ## Lazy TLB
//! A kernel thread (idle, for instance) does not need user mappings, so the CPU keeps CR3 on
//! the last user address space and only sets `is_lazy`. Flushers skip lazy CPUs; when the CPU
//! returns to the same address space it clears `is_lazy`, issues a full fence (pairing with
//! the flusher's, same Dekker argument) and compares its slot's generation with the address
//! space's: if they differ, it reloads with a flush. If a flush does reach a lazy CPU (page
//! tables were freed, or an ASID transition is running), the CPU switches to the kernel
//! address space, so it cannot walk freed page tables speculatively.

use crate::asid::{Asid, DYN_ASIDS};
use crate::context::{AddressSpaceTlb, CTX_SWITCHING, no_user_space};
use crate::counters::Counters;
use crate::faults::Fault;
use crate::hardware::TlbHardware;
use crate::instructions::LocalOp;
use crate::percpu::CpuTlbState;
use crate::sync::{Ordering, fence};
use crate::system::TlbSystem;

/// How a switch ends: `next` loaded under `asid`, with a flush or not, and the generation the
/// CPU's slot for it is then current to.
struct NextLoad {
    asid: Asid,
    flush: bool,
    generation: u64,
}

impl TlbSystem<'_> {
    /// Switches the calling CPU to `next` (a user address space or
    /// [`TlbSystem::kernel_address_space`]). Interrupts must be off.
    ///
    /// The kernel calls this on every context switch to a thread of another address space,
    /// and when a lazy CPU goes back to a user thread (same address space or not).
    pub fn switch_mm(&self, hw: &impl TlbHardware, next: &AddressSpaceTlb) {
        let cpu = hw.current_cpu();
        let st = &self.cpus[cpu];
        let prev = st.loaded.load(Ordering::Relaxed);
        let prev_asid = st.loaded_asid.load(Ordering::Relaxed);
        let was_lazy = st.is_lazy.load(Ordering::Relaxed);
        if was_lazy {
            // Ordered before the generation read below by a full fence on both paths.
            st.is_lazy.store(false, Ordering::Relaxed);
        }
        let load = if prev == next.ctx_id {
            match self.switch_to_loaded(hw, st, next, prev_asid, was_lazy) {
                Some(load) => load,
                None => return,
            }
        } else {
            let generation = self.join_and_read_generation(hw, st, next);
            let (asid, flush) = self.choose_new_asid(hw, st, next, generation);
            NextLoad {
                asid,
                flush,
                generation,
            }
        };
        self.finish_switch(hw, st, next, load);
    }

    /// A switch to the address space this CPU has loaded already: `None` when nothing
    /// changes, else how to reload it.
    fn switch_to_loaded(
        &self,
        hw: &impl TlbHardware,
        st: &CpuTlbState,
        next: &AddressSpaceTlb,
        prev_asid: Asid,
        was_lazy: bool,
    ) -> Option<NextLoad> {
        if self.needs_global_asid(hw, next, prev_asid) {
            // Promoted while we ran it on a dynamic ASID: move over (no flush with PCID).
            self.switch_fence();
            let generation = next.tlb_gen.load(Ordering::Relaxed);
            let (asid, flush) = self.choose_new_asid(hw, st, next, generation);
            return Some(NextLoad {
                asid,
                flush,
                generation,
            });
        }
        if prev_asid.is_global() || !was_lazy {
            // A global ASID is always current; a thread switch within one address space on
            // a non-lazy CPU changes nothing the TLB cares about.
            return None;
        }
        // Back from lazy mode: catch up by generation. The fence pairs with the flusher's:
        // if it read `is_lazy == true` and skipped us, we see its bump.
        self.switch_fence();
        let generation = next.tlb_gen.load(Ordering::Relaxed);
        let slot_gen = st.slots[prev_asid.slot().expect("a dynamic ASID")]
            .tlb_gen
            .load(Ordering::Relaxed);
        (slot_gen != generation).then_some(NextLoad {
            asid: prev_asid,
            flush: true,
            generation,
        })
    }

    /// The switcher's side of the switching race (module docs): makes this CPU visible to
    /// flushers of `next` (SWITCHING, then its CPU-set bit), then, after the full fence,
    /// reads the generation the load must be current to.
    fn join_and_read_generation(
        &self,
        hw: &impl TlbHardware,
        st: &CpuTlbState,
        next: &AddressSpaceTlb,
    ) -> u64 {
        let cpu = hw.current_cpu();
        let join = || {
            st.loaded.store(CTX_SWITCHING, Ordering::Relaxed);
            next.cpus.insert(cpu, Ordering::Relaxed);
        };
        if self.faults.has(Fault::GenerationReadBeforeCpuSet) {
            // The bug: a flush that bumps the generation in the window and reads the CPU
            // set before we join it skips this CPU, and this CPU loads without its flush.
            let generation = next.tlb_gen.load(Ordering::Relaxed);
            hw.switch_window();
            join();
            return generation;
        }
        join();
        self.switch_fence();
        let generation = next.tlb_gen.load(Ordering::Relaxed);
        hw.switch_window();
        generation
    }

    /// Loads `next` as `load` says, recording a flushing load in its slot, then publishes
    /// what this CPU runs.
    fn finish_switch(
        &self,
        hw: &impl TlbHardware,
        st: &CpuTlbState,
        next: &AddressSpaceTlb,
        load: NextLoad,
    ) {
        if load.flush {
            if let Some(slot) = load.asid.slot() {
                st.set_slot(slot, next.ctx_id, load.generation);
            }
            Counters::bump(&st.counters().switch_flushes, 1);
        }
        self.local(
            hw,
            LocalOp::Load {
                root: next.root,
                pcid: load.asid.pcid(),
                flush: load.flush,
            },
        );
        // Publish the ASID before the id: a reader that sees the id sees the right ASID.
        st.loaded_asid.store(load.asid, Ordering::Release);
        st.loaded.store(next.ctx_id, Ordering::Release);
    }

    /// The switcher's full fence of the Dekker pattern (module docs).
    #[inline]
    fn switch_fence(&self) {
        fence(if self.faults.has(Fault::SwitchFenceAcqRel) {
            Ordering::AcqRel
        } else {
            Ordering::SeqCst
        });
    }

    /// Picks the ASID to run `next` under on this CPU and whether the load must flush.
    fn choose_new_asid(
        &self,
        hw: &impl TlbHardware,
        st: &CpuTlbState,
        next: &AddressSpaceTlb,
        generation: u64,
    ) -> (Asid, bool) {
        if hw.broadcast().is_some()
            && let Some(global) = next.global_asid()
        {
            // Without PCID a CR3 load flushes anyway; say so, so the count is honest.
            return (global, !hw.local_tlb().pcide);
        }
        if !hw.local_tlb().pcide {
            return (Asid::of_slot(0), true);
        }
        for (i, slot) in st.slots.iter().enumerate() {
            if slot.ctx_id.load(Ordering::Relaxed) == next.ctx_id {
                let stale = slot.tlb_gen.load(Ordering::Relaxed) < generation;
                return (Asid::of_slot(i), stale);
            }
        }
        let victim = st.next_asid.load(Ordering::Relaxed);
        st.next_asid
            .store((victim + 1) % DYN_ASIDS as u8, Ordering::Relaxed);
        (Asid::of_slot(usize::from(victim)), true)
    }

    /// Whether this CPU runs `mm` under `asid` although `mm` has a global ASID now.
    pub(crate) fn needs_global_asid(
        &self,
        hw: &impl TlbHardware,
        mm: &AddressSpaceTlb,
        asid: Asid,
    ) -> bool {
        hw.broadcast().is_some() && mm.global_asid().is_some_and(|g| g != asid)
    }

    /// Enters lazy-TLB mode: the calling CPU is about to run a kernel thread and keeps the
    /// current user address space loaded. Interrupts must be off. To leave lazy mode, call
    /// [`TlbSystem::switch_mm`] with the next user thread's address space.
    pub fn enter_lazy(&self, hw: &impl TlbHardware) {
        let st = &self.cpus[hw.current_cpu()];
        let loaded = st.loaded.load(Ordering::Relaxed);
        if !no_user_space(loaded) {
            st.is_lazy.store(true, Ordering::Release);
        }
    }
}
