//! The INVLPGB instructions that carry out each broadcast operation,
//! checked as data: no emulator here can execute them.

use std::vec::Vec;

use tlb_types::InvlpgbOperands;

use crate::{
    BroadcastOp, Pcid,
    invlpgb::{self, InvlpgbLimits},
};

fn sequence(op: BroadcastOp, limits: InvlpgbLimits) -> Vec<InvlpgbOperands> {
    let mut issued = Vec::new();
    invlpgb::sequence(&op, limits, |operands| issued.push(operands));
    issued
}

/// EPYC-Milan reports 7 extra pages (8 per instruction): 20 user pages
/// take three instructions (8 + 8 + 4), each naming the PCID, and a
/// kernel range includes global entries.
#[test]
fn ranges_respect_the_cpu_limit() {
    let limits = InvlpgbLimits::from_cpuid_edx(7);
    let user = sequence(
        BroadcastOp::PcidRange {
            pcid: Pcid::new(9),
            start: 0x40_0000,
            end: 0x40_0000 + 20 * 4096,
            stride_shift: 12,
        },
        limits,
    );
    assert_eq!(
        user,
        [
            invlpgb::user_range(Pcid::new(9), 0x40_0000, 8, false),
            invlpgb::user_range(Pcid::new(9), 0x40_8000, 8, false),
            invlpgb::user_range(Pcid::new(9), 0x41_0000, 4, false),
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
    assert_eq!(
        kernel,
        [
            invlpgb::kernel_range(kernel_base, 8),
            invlpgb::kernel_range(kernel_base + 8 * 4096, 1),
        ]
    );
    for operands in &kernel {
        assert_eq!(
            operands.rax & tlb_types::invlpgb::FLAG_INCLUDE_GLOBAL,
            tlb_types::invlpgb::FLAG_INCLUDE_GLOBAL
        );
    }
}

#[test]
fn whole_space_operations_are_one_instruction() {
    let limits = InvlpgbLimits::default();
    assert_eq!(
        sequence(BroadcastOp::Pcid(Pcid::new(12)), limits),
        [invlpgb::single_pcid(Pcid::new(12))]
    );
    assert_eq!(
        sequence(BroadcastOp::AllNonGlobal, limits),
        [invlpgb::all_nonglobals()]
    );
    assert_eq!(
        sequence(BroadcastOp::AllIncludingGlobal, limits),
        [invlpgb::all_including_global()]
    );
}
