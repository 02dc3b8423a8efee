//! The broadcast backends: how one CPU makes *every* CPU drop translations
//! of a global ASID (or of the kernel) without `mm` naming the targets.
//!
//! `mm` speaks in [`BroadcastOp`]s followed by one `sync`. On AMD Zen 3 and
//! later each operation becomes one or more INVLPGB instructions and `sync`
//! a TLBSYNC on the same CPU: no interrupt is taken anywhere. Under QEMU
//! without INVLPGB, the software backend delivers the same operation to
//! every online CPU by cross-call, and each CPU runs `mm`'s broadcast
//! handler, so promotion and the ASID transition run for real, only slower.
//! The project's patched QEMU (`emulator/qemu-invlpgb`, `.ci/qemu-invlpgb`)
//! executes the real instructions.
//!
//! Which INVLPGBs carry out an operation is `mm`'s decision
//! ([`mm::invlpgb::sequence`], tested as data on the host); this backend
//! issues them, counts them and keeps them for the trace
//! ([`super::invlpgb_log`]). Its deliberate bugs (`tlb.bug=`, see
//! [`InvlpgbBug`]) break the issuing, so that the emulator, not the model,
//! must catch them.

use alloc::string::String;

use hal::trap::TrapFrame;
use mm::{
    BroadcastBackend, BroadcastOp, Pcid,
    invlpgb::{self, InvlpgbLimits},
};
use tlb_types::InvlpgbOperands;

use crate::{
    smp,
    timeline::{Kind, Purpose},
    tlb::{KernelTlb, invlpgb_log, recorder, system},
    tlb_mode::InvlpgbBug,
};

/// The broadcast backends the kernel has.
pub enum KernelBroadcast {
    /// Every operation as a cross-CPU call to all online CPUs, which each
    /// run `mm`'s broadcast handler. Completes before returning, so `sync`
    /// has nothing left to wait for.
    Software,
    /// AMD's INVLPGB: one instruction reaches every CPU; TLBSYNC on the
    /// issuing CPU waits for completion. `mm` issues operations and their
    /// `sync` back to back on one CPU, and this kernel never preempts or
    /// migrates kernel code, so the pair cannot be split across CPUs.
    Invlpgb(Invlpgb),
}

/// The INVLPGB backend's settings.
pub struct Invlpgb {
    /// The CPU's page limit per instruction.
    pub limits: InvlpgbLimits,
    /// Print each instruction under its flush's trace line.
    pub trace: bool,
    /// A deliberate bug in the issuing (`tlb.bug=`).
    pub bug: Option<InvlpgbBug>,
}

impl Invlpgb {
    fn carry_out(&self, op: BroadcastOp) {
        let op = match (self.bug, op) {
            (
                Some(InvlpgbBug::OnePageShort),
                BroadcastOp::PcidRange {
                    pcid,
                    start,
                    end,
                    stride_shift,
                },
            ) => BroadcastOp::PcidRange {
                pcid,
                start,
                end: end - (1 << stride_shift),
                stride_shift,
            },
            (_, op) => op,
        };
        // A CPU that "reads CPUID wrong" by one: one page more per INVLPGB
        // than the CPU allows.
        let limits = match self.bug {
            Some(InvlpgbBug::CountOverMax) => {
                InvlpgbLimits::from_cpuid_edx(self.limits.max_pages())
            }
            _ => self.limits,
        };
        invlpgb::sequence(&op, limits, |mut operands| {
            let user_range = tlb_types::invlpgb::FLAG_VA | tlb_types::invlpgb::FLAG_PCID;
            if self.bug == Some(InvlpgbBug::WrongStride) && operands.rax & user_range == user_range
            {
                operands.ecx |= 1 << 31;
            }
            issue(&operands, self.trace);
        });
    }

    fn sync(&self) {
        if self.bug == Some(InvlpgbBug::SkipTlbsync) {
            return;
        }
        // Timed only for the trace: a flush pays no clock reads otherwise.
        let started = self.trace.then(hal::time::now_ns);
        recorder::tlbsync(hal::tlb::tlbsync);
        invlpgb_log::synced(started.map(|started| hal::time::now_ns().saturating_sub(started)));
    }
}

fn issue(operands: &InvlpgbOperands, trace: bool) {
    hal::tlb::invlpgb(*operands);
    invlpgb_log::issued(operands, trace);
    recorder::record(Kind::Invlpgb(*operands));
}

impl KernelBroadcast {
    fn carry_out(&self, op: BroadcastOp) {
        match self {
            Self::Software => broadcast_by_ipi(&op),
            Self::Invlpgb(backend) => backend.carry_out(op),
        }
    }
}

/// Runs `op` on every online CPU (the software backend).
fn broadcast_by_ipi(op: &BroadcastOp) {
    let everyone = smp::online();
    let round = recorder::send_round(Purpose::Broadcast, &everyone);
    let handler = || recorder::handling(round, || system().handle_broadcast_ipi(&KernelTlb, op));
    match smp::call_on(&everyone, &handler) {
        Ok(_) => {
            if let Some(round) = round {
                round.answered();
            }
        }
        Err(unanswered) => crate::fatal::stop(
            format_args!("TLB broadcast not acknowledged: {unanswered}"),
            None,
        ),
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
            Self::Invlpgb(backend) => backend.sync(),
        }
    }
}

/// INVLPGB's encoding, `0F 01 FE`.
const INVLPGB_OPCODE: [u8; 3] = [0x0f, 0x01, 0xfe];

/// If the #GP in `frame` was raised by an INVLPGB, what its operands (the
/// saved RAX, ECX and EDX) were and which rule they broke.
pub fn explain_invlpgb_fault(frame: &TrapFrame) -> Option<String> {
    if code_at(frame.rip)? != INVLPGB_OPCODE {
        return None;
    }
    let operands = InvlpgbOperands {
        rax: frame.rax,
        ecx: frame.rcx as u32,
        edx: frame.rdx as u32,
    };
    let max_pages = hal::tlb::invlpgb_max_pages();
    let why = invlpgb::refusal(
        &operands,
        InvlpgbLimits::from_cpuid_edx(max_pages.saturating_sub(1)),
        hal::tlb::pcids_enabled(),
    )
    .unwrap_or("no rule of the manual that this kernel knows");
    Some(alloc::format!(
        "INVLPGB refused its operands {operands} (this CPU takes at most {max_pages} pages per \
         instruction): {why}"
    ))
}

/// The three bytes at `address` in kernel memory, read as aligned words.
fn code_at(address: u64) -> Option<[u8; 3]> {
    let aligned = address & !7;
    let words = [
        hal::stack_walk::read_word(aligned)?,
        hal::stack_walk::read_word(aligned + 8)?,
    ];
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&words[0].to_le_bytes());
    bytes[8..].copy_from_slice(&words[1].to_le_bytes());
    let offset = (address - aligned) as usize;
    Some([bytes[offset], bytes[offset + 1], bytes[offset + 2]])
}
