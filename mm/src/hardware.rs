//! The boundary between decisions (this crate) and instructions (the kernel):
//! [`TlbHardware`], [`BroadcastBackend`], and the [`FlushRequest`] an IPI carries.
//!
//! Every entry point of [`crate::TlbSystem`] takes `hw: &impl TlbHardware` as an argument
//! instead of storing it. The kernel passes a zero-sized type whose methods execute
//! instructions on the *current* CPU; the host model passes a handle that knows which
//! simulated CPU the calling thread is. The same `mm` code runs on both.
//!
//! Three kinds of implementations are expected:
//! * the kernel's real one (INVLPG, INVPCID or CR3 reloads, the local APIC for IPIs, and the
//!   INVLPGB/TLBSYNC backend built from [`crate::invlpgb`]'s encoders);
//! * a *software* broadcast backend: each [`BroadcastBackend`] method sends a
//!   [`BroadcastOp`] to every online CPU by IPI, and each CPU's IPI handler calls
//!   [`crate::TlbSystem::handle_broadcast_ipi`]. Same semantics as INVLPGB, so the promotion
//!   machinery runs under emulators that lack it;
//! * the host model in `mm/tests/`.
//!
//! Contract for every method: it is called on the CPU it acts on, with interrupts disabled
//! where the kernel's entry point requires it (switching, flush handling), and it does not
//! call back into `mm` except where stated (IPI delivery).

use crate::context::AddressSpaceTlb;
use crate::counters::TraceEvent;
use crate::instructions::LocalTlb;
use tlb_types::{CpuId, CpuSet, Instruction, Pcid};

/// Invalidations that reach every CPU without interrupting it (INVLPGB, or a software
/// stand-in). Only **non-global** entries unless the name says otherwise. The operations may
/// complete asynchronously; [`BroadcastBackend::sync`] waits for all operations *this CPU*
/// issued. The caller never migrates between the operations and the sync (interrupts or
/// preemption are off), because TLBSYNC only waits for the executing CPU's own INVLPGBs.
pub trait BroadcastBackend {
    /// The units of `1 << stride_shift` bytes in `start..end`, tagged `pcid`. At most the
    /// configured flush ceiling of units; the backend splits by its own maximum count.
    fn flush_pcid_range(&self, pcid: Pcid, start: u64, end: u64, stride_shift: u8);
    /// Every non-global entry tagged `pcid`.
    fn flush_pcid(&self, pcid: Pcid);
    /// Every non-global entry of every PCID (the rollover and reclaim-batch flush).
    fn flush_all_nonglobal(&self);
    /// The 4 KiB kernel pages in `start..end`, global entries included, every PCID.
    fn flush_kernel_range(&self, start: u64, end: u64);
    /// Everything, global entries included.
    fn flush_all_including_global(&self);
    /// Waits until every operation this CPU issued has completed on every CPU.
    fn sync(&self);
}

/// The operations of [`BroadcastBackend`] as data, for a software backend that ships them to
/// every online CPU by IPI (see [`crate::TlbSystem::handle_broadcast_ipi`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BroadcastOp {
    /// See [`BroadcastBackend::flush_pcid_range`].
    PcidRange {
        /// Tag of the entries.
        pcid: Pcid,
        /// First address.
        start: u64,
        /// One past the last address.
        end: u64,
        /// log2 of the unit size.
        stride_shift: u8,
    },
    /// See [`BroadcastBackend::flush_pcid`].
    Pcid(Pcid),
    /// See [`BroadcastBackend::flush_all_nonglobal`].
    AllNonGlobal,
    /// See [`BroadcastBackend::flush_kernel_range`].
    KernelRange {
        /// First address.
        start: u64,
        /// One past the last address.
        end: u64,
    },
    /// See [`BroadcastBackend::flush_all_including_global`].
    AllIncludingGlobal,
}

/// What the kernel implements for `mm` (see the module docs).
pub trait TlbHardware {
    /// The broadcast backend type; use [`NoBroadcast`] if there is none.
    type Broadcast: BroadcastBackend;

    /// The CPU executing this call.
    fn current_cpu(&self) -> CpuId;
    /// CPUs that are up and take IPIs.
    fn online_cpus(&self) -> CpuSet;
    /// What this CPU's control registers and CPUID say about local invalidation (CR4.PCIDE,
    /// CR4.PGE, INVPCID): the facts [`crate::instructions::select`] chooses instructions for.
    /// Without PCIDE every address-space load flushes.
    fn local_tlb(&self) -> LocalTlb;
    /// The PCID in this CPU's CR3. Read only when an instruction choice depends on it (a
    /// PCID flush without INVPCID), never on the hot paths.
    fn current_pcid(&self) -> Pcid;
    /// A monotonic clock in ticks (any unit; [`crate::TlbConfig`] intervals use the same).
    fn now(&self) -> u64;

    /// Executes the local TLB instruction `instruction` on this CPU. `mm` chose it (with
    /// [`crate::instructions::select`], from [`TlbHardware::local_tlb`] and the protocol's
    /// operation); the implementation decides nothing.
    fn execute(&self, instruction: Instruction);

    /// Sends a flush IPI to every CPU in `targets` (never the current CPU) and returns once
    /// each of them has run [`crate::TlbSystem::handle_flush_ipi`] with `request`. The request
    /// is borrowed for the duration of the call; the kernel may pass its address around.
    fn send_flush_ipis(&self, targets: &CpuSet, request: &FlushRequest<'_>);

    /// The broadcast backend, if the kernel chose one. The choice must not change while any
    /// address space has a global ASID ([`crate::TlbSystem::global_asids_in_use`] is 0).
    fn broadcast(&self) -> Option<&Self::Broadcast>;

    /// Runs `f` with interrupts disabled on this CPU (restoring the previous state after).
    /// `mm` uses it around the local part of a flush, which must not interleave with a flush
    /// IPI arriving at the same CPU.
    fn without_interrupts(&self, f: &mut dyn FnMut());

    /// Receives a trace event; the default drops it.
    fn trace(&self, _event: &TraceEvent) {}

    /// Called by [`crate::TlbSystem::switch_mm`] on its way into another
    /// address space, right after it read that address space's generation
    /// and before it loads CR3: the window in which a flusher that misses
    /// this CPU does its harm (the two 2025 bugs of Linux's `switch_mm`).
    /// The default does nothing; a kernel may wait here to widen the window
    /// for its tests. A correct protocol stays correct however long a
    /// switch takes.
    fn switch_window(&self) {}
}

/// A [`BroadcastBackend`] type for hardware without one; `broadcast()` returns `None`.
pub enum NoBroadcast {}

impl BroadcastBackend for NoBroadcast {
    fn flush_pcid_range(&self, _: Pcid, _: u64, _: u64, _: u8) {
        match *self {}
    }
    fn flush_pcid(&self, _: Pcid) {
        match *self {}
    }
    fn flush_all_nonglobal(&self) {
        match *self {}
    }
    fn flush_kernel_range(&self, _: u64, _: u64) {
        match *self {}
    }
    fn flush_all_including_global(&self) {
        match *self {}
    }
    fn sync(&self) {
        match *self {}
    }
}

/// Which addresses a flush covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushRange {
    /// Every address of the target.
    All,
    /// `start..end` in units of `1 << stride_shift` bytes (12 for 4 KiB pages, 21 for 2 MiB).
    Range {
        /// First address (aligned to the stride).
        start: u64,
        /// One past the last address.
        end: u64,
        /// log2 of the unit size.
        stride_shift: u8,
    },
}

impl FlushRange {
    /// The 4 KiB pages covering `start..end` (`start` rounded down, `end` rounded up).
    pub fn pages(start: u64, end: u64) -> Self {
        FlushRange::Range {
            start: start & !0xfff,
            end: end.div_ceil(4096) * 4096,
            stride_shift: 12,
        }
    }

    /// Number of stride units in the range (`None` for [`FlushRange::All`]).
    pub fn units(&self) -> Option<u64> {
        match *self {
            FlushRange::All => None,
            FlushRange::Range {
                start,
                end,
                stride_shift,
            } => Some(end.saturating_sub(start).div_ceil(1u64 << stride_shift)),
        }
    }

    pub(crate) fn bounds(&self) -> Option<(u64, u64)> {
        match *self {
            FlushRange::All => None,
            FlushRange::Range { start, end, .. } => Some((start, end)),
        }
    }
}

/// What is being flushed.
#[derive(Clone, Copy, Debug)]
pub enum FlushTarget<'a> {
    /// One address space, up to generation `new_gen`.
    AddressSpace {
        /// The address space.
        mm: &'a AddressSpaceTlb,
        /// The generation this flush brings a CPU to (the value the request's bump produced).
        new_gen: u64,
    },
    /// Whatever user address space the CPU has loaded (deferred reclaim batches).
    LoadedUser,
    /// Kernel addresses (global entries), every CPU.
    Kernel,
}

/// One flush, as carried by an IPI to [`crate::TlbSystem::handle_flush_ipi`].
#[derive(Clone, Copy, Debug)]
pub struct FlushRequest<'a> {
    /// What is flushed.
    pub target: FlushTarget<'a>,
    /// Which addresses (already widened to [`FlushRange::All`] above the ceiling).
    pub range: FlushRange,
    /// Page tables were freed: lazy CPUs must be reached too.
    pub freed_tables: bool,
    /// Sent to CPUs merely to let them drop their bit from the CPU set.
    pub trim: bool,
    /// The CPU that asked.
    pub initiator: CpuId,
}
