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
//! [`invlpgb_sequence`] is the translation from operations to instructions
//! as data, which is how it is tested on a machine that cannot execute them.

use mm::{
    BroadcastBackend, BroadcastOp, Pcid,
    invlpgb::{self, InvlpgbLimits, InvlpgbOperands},
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
            Self::Invlpgb(limits) => invlpgb_sequence(&op, *limits, |operands| {
                hal::tlb::invlpgb(hal::tlb::InvlpgbRegisters {
                    rax: operands.rax,
                    ecx: operands.ecx,
                    edx: operands.edx,
                })
            }),
        }
    }
}

/// Calls `issue` with each INVLPGB that carries out `op` on a CPU that
/// accepts `limits`: ranges are split into chunks the CPU accepts and that
/// never cross the non-canonical hole.
pub fn invlpgb_sequence(
    op: &BroadcastOp,
    limits: InvlpgbLimits,
    mut issue: impl FnMut(InvlpgbOperands),
) {
    match *op {
        BroadcastOp::PcidRange {
            pcid,
            start,
            end,
            stride_shift,
        } => {
            for chunk in invlpgb::range_chunks(start, end, stride_shift, limits) {
                issue(invlpgb::user_range(
                    pcid,
                    chunk.addr,
                    chunk.pages,
                    chunk.stride_2m,
                ));
            }
        }
        BroadcastOp::Pcid(pcid) => issue(invlpgb::single_pcid(pcid)),
        BroadcastOp::AllNonGlobal => issue(invlpgb::all_nonglobals()),
        BroadcastOp::KernelRange { start, end } => {
            for chunk in invlpgb::range_chunks(start, end, mm::PAGE_SHIFT, limits) {
                issue(invlpgb::kernel_range(chunk.addr, chunk.pages));
            }
        }
        BroadcastOp::AllIncludingGlobal => issue(invlpgb::all_including_global()),
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

pub mod tests {
    //! The INVLPGB backend's instructions, checked as data: QEMU cannot
    //! execute them.

    use alloc::vec::Vec;

    use mm::{
        BroadcastOp,
        invlpgb::{self, InvlpgbLimits, InvlpgbOperands},
    };

    use super::invlpgb_sequence;
    use crate::check_eq;
    use crate::ktest::{Test, TestResult};

    pub const TESTS: &[Test] = &[
        Test::new(
            "tlb_broadcast::ranges_respect_the_cpu_limit",
            ranges_respect_the_cpu_limit,
        ),
        Test::new(
            "tlb_broadcast::whole_space_operations_are_one_instruction",
            whole_space_operations_are_one_instruction,
        ),
    ];

    fn sequence(op: BroadcastOp, limits: InvlpgbLimits) -> Vec<InvlpgbOperands> {
        let mut issued = Vec::new();
        invlpgb_sequence(&op, limits, |operands| issued.push(operands));
        issued
    }

    /// EPYC-Milan reports 7 extra pages (8 per instruction): 20 user pages
    /// take three instructions (8 + 8 + 4), each naming the PCID, and a
    /// kernel range includes global entries.
    fn ranges_respect_the_cpu_limit() -> TestResult {
        let limits = InvlpgbLimits::from_cpuid_edx(7);
        let user = sequence(
            BroadcastOp::PcidRange {
                pcid: 9,
                start: 0x40_0000,
                end: 0x40_0000 + 20 * 4096,
                stride_shift: 12,
            },
            limits,
        );
        check_eq!(
            user,
            [
                invlpgb::user_range(9, 0x40_0000, 8, false),
                invlpgb::user_range(9, 0x40_8000, 8, false),
                invlpgb::user_range(9, 0x41_0000, 4, false),
            ]
        );
        let kernel_base = 0xffff_ff00_0000_0000;
        let kernel = sequence(
            BroadcastOp::KernelRange {
                start: kernel_base,
                end: kernel_base + 9 * 4096,
            },
            limits,
        );
        check_eq!(
            kernel,
            [
                invlpgb::kernel_range(kernel_base, 8),
                invlpgb::kernel_range(kernel_base + 8 * 4096, 1),
            ]
        );
        for operands in &kernel {
            check_eq!(
                operands.rax & invlpgb::FLAG_INCLUDE_GLOBAL,
                invlpgb::FLAG_INCLUDE_GLOBAL
            );
        }
        Ok(())
    }

    fn whole_space_operations_are_one_instruction() -> TestResult {
        let limits = InvlpgbLimits::default();
        check_eq!(
            sequence(BroadcastOp::Pcid(12), limits),
            [invlpgb::single_pcid(12)]
        );
        check_eq!(
            sequence(BroadcastOp::AllNonGlobal, limits),
            [invlpgb::all_nonglobals()]
        );
        check_eq!(
            sequence(BroadcastOp::AllIncludingGlobal, limits),
            [invlpgb::all_including_global()]
        );
        Ok(())
    }
}
