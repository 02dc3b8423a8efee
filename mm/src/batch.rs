//! Deferred, batched flushes for page reclaim (Linux: `arch_tlbbatch_add_pending`,
//! `arch_tlbbatch_flush`; the RISC-V and x86 batching work in the seeds).
//!
//! Reclaim unmaps many pages, often of several address spaces, and frees none of them until
//! it is done. Flushing after each PTE would send one round of IPIs per page. Instead the
//! reclaimer keeps a [`FlushBatch`]:
//! 1. clear the PTE (no flush), then [`TlbSystem::batch_add_pending`]: bump the address
//!    space's generation (full barrier, as in every flush request; CPUs that are not
//!    interrupted later catch up by it), add its CPU set to the batch, note that pages were
//!    unmapped;
//! 2. before any of the pages is freed or written out, [`TlbSystem::batch_flush`] once:
//!    - with a broadcast backend: one "all non-global entries, every PCID, every CPU"
//!      invalidation and a sync. No IPI at all, and it also covers address spaces on global
//!      ASIDs (which never catch up by generation) and any CPU in an ASID transition, since
//!      every PCID is flushed;
//!    - otherwise: flush IPIs to the collected CPUs (lazy ones skipped, they catch up by
//!      generation), or only a local flush if the caller is the only one;
//! 3. the batch is emptied. (RISC-V once forgot this, so CPUs piled up and every later batch
//!    interrupted them all.)

use crate::context::AddressSpaceTlb;
use crate::counters::{Counters, TraceReason};
use crate::hardware::{BroadcastBackend, FlushRange, FlushRequest, FlushTarget, TlbHardware};
use crate::sync::Ordering;
use crate::system::TlbSystem;
use tlb_types::CpuSet;

/// A pending deferred flush (one per reclaiming task; a plain value).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlushBatch {
    cpus: CpuSet,
    unmapped: bool,
}

impl FlushBatch {
    /// An empty batch.
    pub const fn new() -> Self {
        Self {
            cpus: CpuSet::new(),
            unmapped: false,
        }
    }

    /// Whether anything was added since the last flush.
    pub fn is_pending(&self) -> bool {
        self.unmapped
    }

    /// The CPUs collected so far.
    pub fn cpus(&self) -> CpuSet {
        self.cpus
    }
}

impl TlbSystem<'_> {
    /// Records that pages of `mm` were unmapped without a flush (call after clearing PTEs).
    pub fn batch_add_pending(&self, batch: &mut FlushBatch, mm: &AddressSpaceTlb) {
        self.bump_generation(mm);
        batch.cpus.union_with(&mm.cpus.snapshot(Ordering::Relaxed));
        batch.unmapped = true;
    }

    /// Flushes everything the batch collected, once, and empties it. Preemption off,
    /// interrupts on.
    pub fn batch_flush(&self, hw: &impl TlbHardware, batch: &mut FlushBatch) {
        if !batch.is_pending() {
            return;
        }
        let me = hw.current_cpu();
        let counters = self.cpus[me].counters();
        let request = FlushRequest {
            target: FlushTarget::LoadedUser,
            range: FlushRange::All,
            freed_tables: false,
            trim: false,
            initiator: me,
        };
        if let Some(backend) = hw.broadcast() {
            backend.flush_all_nonglobal();
            backend.sync();
            Counters::bump(&counters.broadcast_ops, 1);
            Counters::bump(&counters.broadcast_syncs, 1);
            self.trace(hw, &request, CpuSet::new(), TraceReason::Batch);
        } else if batch.cpus.has_other_than(me) {
            self.flush_multi(hw, &batch.cpus, &request);
        } else if batch.cpus.contains(me) {
            self.flush_local(hw, &request);
            self.trace(hw, &request, batch.cpus, TraceReason::Batch);
        }
        Counters::bump(&counters.batch_flushes, 1);
        *batch = FlushBatch::new();
    }
}
