//! The broadcast backends: how one CPU makes *every* CPU drop translations
//! of a global ASID (or of the kernel) without `mm` naming the targets.
//!
//! `mm` speaks in [`BroadcastOp`]s followed by one `sync`. On AMD Zen 3 and
//! later each operation becomes one or more INVLPGB instructions and `sync`
//! a TLBSYNC on the same CPU: no interrupt is taken anywhere. Under QEMU,
//! which has no INVLPGB, the software backend delivers the same operation to
//! every online CPU by cross-call, and each CPU runs `mm`'s broadcast
//! handler, so promotion and the ASID transition run for real, only slower.
//!
//! Which INVLPGBs carry out an operation is `mm`'s decision
//! ([`mm::invlpgb::sequence`], tested as data on the host, since nothing
//! here can execute them); this backend only issues them.

use mm::{
    BroadcastBackend, BroadcastOp, Pcid,
    invlpgb::{self, InvlpgbLimits},
};

use crate::{
    smp,
    tlb::{KernelTlb, system},
};

/// The broadcast backends the kernel has.
pub enum KernelBroadcast {
    /// Every operation as a cross-CPU call to all online CPUs, which each
    /// run `mm`'s broadcast handler. Completes before returning, so `sync`
    /// has nothing left to wait for.
    Software,
    /// AMD's INVLPGB with the CPU's page-count limit: one instruction
    /// reaches every CPU; TLBSYNC on the issuing CPU waits for completion.
    /// `mm` issues operations and their `sync` back to back on one CPU, and
    /// this kernel never preempts or migrates kernel code, so the pair
    /// cannot be split across CPUs.
    Invlpgb(InvlpgbLimits),
}

impl KernelBroadcast {
    fn carry_out(&self, op: BroadcastOp) {
        match self {
            Self::Software => broadcast_by_ipi(&op),
            Self::Invlpgb(limits) => invlpgb::sequence(&op, *limits, |operands| {
                hal::tlb::invlpgb(hal::tlb::InvlpgbRegisters {
                    rax: operands.rax,
                    ecx: operands.ecx,
                    edx: operands.edx,
                })
            }),
        }
    }
}

/// Runs `op` on every online CPU (the software backend).
fn broadcast_by_ipi(op: &BroadcastOp) {
    let handler = || system().handle_broadcast_ipi(&KernelTlb, op);
    if let Err(unanswered) = smp::call_on(&smp::online(), &handler) {
        crate::fatal::stop(
            format_args!("TLB broadcast not acknowledged: {unanswered}"),
            None,
        );
    }
}

impl BroadcastBackend for KernelBroadcast {
    fn flush_pcid_range(&self, pcid: Pcid, start: u64, end: u64, stride_shift: u8) {
        self.carry_out(BroadcastOp::PcidRange {
            pcid,
            start,
            end,
            stride_shift,
        });
    }

    fn flush_pcid(&self, pcid: Pcid) {
        self.carry_out(BroadcastOp::Pcid(pcid));
    }

    fn flush_all_nonglobal(&self) {
        self.carry_out(BroadcastOp::AllNonGlobal);
    }

    fn flush_kernel_range(&self, start: u64, end: u64) {
        self.carry_out(BroadcastOp::KernelRange { start, end });
    }

    fn flush_all_including_global(&self) {
        self.carry_out(BroadcastOp::AllIncludingGlobal);
    }

    fn sync(&self) {
        match self {
            // Every software operation returned only after all CPUs ran it.
            Self::Software => {}
            // The INVLPGBs of this flush were issued by this CPU (see the
            // variant's documentation), so this TLBSYNC waits for them.
            Self::Invlpgb(_) => hal::tlb::tlbsync(),
        }
    }
}
