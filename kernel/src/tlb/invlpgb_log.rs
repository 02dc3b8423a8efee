//! What this machine's INVLPGBs and TLBSYNCs were: a count of each for the
//! counters line, and, with `tlb.trace=on`, every instruction of a flush
//! printed under its decision.
//!
//! One `mm` broadcast operation can take several INVLPGBs (a range longer
//! than the CPU's page limit is split), and every flush ends with one
//! TLBSYNC, so the instructions are counted here, where the backend issues
//! them, and not in `mm`'s counters, which count operations. With the trace
//! on, each CPU keeps the operands of its last flush's instructions (up to
//! [`KEPT`]) and how long its TLBSYNC waited, until its trace line prints
//! them:
//!
//! ```text
//! tlb-trace: cpu=0 ctx=2 range=0x100000001000..0x100000002000 targets={} reason=Broadcast
//! tlb-trace:   INVLPGB rax=0x100000001007 ecx=0x0 edx=0x10000: 1 page of 4 KiB from 0x100000001000, PCID 1
//! tlb-trace:   TLBSYNC after 1 INVLPGB: waited 41 us for every CPU to finish
//! ```
//!
//! Only the CPU itself writes its slots, with interrupts off (a flush runs
//! so), and reads them in the same flush, so relaxed atomics suffice.

use alloc::string::String;
use core::{
    fmt::Write,
    sync::atomic::{AtomicU64, Ordering},
};

use hal::percpu;
use tlb_types::{InvlpgbOperands, MAX_CPUS};

/// INVLPGBs and TLBSYNCs executed, per CPU.
static INVLPGBS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
static TLBSYNCS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

/// Instructions of one flush the trace shows; more are counted as "and N
/// more".
pub const KEPT: usize = 4;

struct Kept {
    operands: [[AtomicU64; 3]; KEPT],
    issued: AtomicU64,
    /// The TLBSYNC's wait plus 1 (0: none yet).
    sync_ns: AtomicU64,
}

static FOR_TRACE: [Kept; MAX_CPUS] = [const {
    Kept {
        operands: [const { [const { AtomicU64::new(0) }; 3] }; KEPT],
        issued: AtomicU64::new(0),
        sync_ns: AtomicU64::new(0),
    }
}; MAX_CPUS];

/// This CPU issued `operands`; `trace`: keep them for the trace line.
pub fn issued(operands: &InvlpgbOperands, trace: bool) {
    let cpu = percpu::current().index;
    INVLPGBS[cpu].fetch_add(1, Ordering::Relaxed);
    if trace {
        let kept = &FOR_TRACE[cpu];
        let index = kept.issued.fetch_add(1, Ordering::Relaxed) as usize;
        if let Some(slot) = kept.operands.get(index) {
            slot[0].store(operands.rax, Ordering::Relaxed);
            slot[1].store(u64::from(operands.ecx), Ordering::Relaxed);
            slot[2].store(u64::from(operands.edx), Ordering::Relaxed);
        }
    }
}

/// This CPU's TLBSYNC returned, after `waited_ns` if it was timed (for
/// the trace).
pub fn synced(waited_ns: Option<u64>) {
    let cpu = percpu::current().index;
    TLBSYNCS[cpu].fetch_add(1, Ordering::Relaxed);
    if let Some(waited_ns) = waited_ns {
        FOR_TRACE[cpu]
            .sync_ns
            .store(waited_ns + 1, Ordering::Relaxed);
    }
}

/// The lines of `cpu`'s (this CPU's) last flush, once; `None` if it issued
/// no INVLPGB and no TLBSYNC since the last call.
pub fn take_for_trace(cpu: usize) -> Option<String> {
    let kept = &FOR_TRACE[cpu];
    let issued = kept.issued.swap(0, Ordering::Relaxed) as usize;
    let sync_ns = kept.sync_ns.swap(0, Ordering::Relaxed);
    if issued == 0 && sync_ns == 0 {
        return None;
    }
    let mut lines = String::new();
    for slot in kept.operands.iter().take(issued) {
        let operands = InvlpgbOperands {
            rax: slot[0].load(Ordering::Relaxed),
            ecx: slot[1].load(Ordering::Relaxed) as u32,
            edx: slot[2].load(Ordering::Relaxed) as u32,
        };
        let _ = writeln!(lines, "tlb-trace:   INVLPGB {operands}");
    }
    if issued > KEPT {
        let _ = writeln!(lines, "tlb-trace:   and {} more INVLPGBs", issued - KEPT);
    }
    if sync_ns == 0 {
        lines.push_str("tlb-trace:   no TLBSYNC");
    } else {
        let plural = if issued == 1 { "" } else { "s" };
        let _ = write!(
            lines,
            "tlb-trace:   TLBSYNC after {issued} INVLPGB{plural}: waited {} us for every CPU to finish",
            (sync_ns - 1) / 1000
        );
    }
    Some(lines)
}

/// `invlpgb_instructions=N tlbsync_instructions=N`, summed over CPUs, for
/// the counters line.
pub fn counters() -> String {
    alloc::format!(
        "invlpgb_instructions={} tlbsync_instructions={}",
        invlpgbs(),
        total(&TLBSYNCS)
    )
}

/// INVLPGBs executed so far, summed over CPUs (the demo's phase deltas).
pub fn invlpgbs() -> u64 {
    total(&INVLPGBS)
}

fn total(per_cpu: &[AtomicU64]) -> u64 {
    per_cpu.iter().map(|n| n.load(Ordering::Relaxed)).sum()
}
