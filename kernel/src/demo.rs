//! The guided demo `cargo run` shows: the same work under different
//! conditions, each phase with a one-line explanation and what it cost in
//! TLB counters, then a summary table of the phases.
//!
//! Every phase runs the `tlbtest` program from the ramdisk, which prints its
//! own measurement line; the demo adds the kernel's view (the counter deltas
//! of the whole phase, and the median time of its flush requests).
//!
//! Phase 3 is the promotion to a global ASID, the mechanism the kernel is
//! about, and it needs a broadcast backend. On a CPU with INVLPGB (an EPYC,
//! or the project's patched QEMU with `-cpu EPYC-Milan,+invlpgb`) the boot
//! chose one, and the phase says how many INVLPGBs and TLBSYNCs carried its
//! broadcasts; everywhere else (stock QEMU) the boot chose mode
//! `ipi`, as Linux does, and the demo lends the software broadcast backend
//! to that one phase ([`tlb::lend_software_broadcast`]) rather than asking
//! for a second boot: `mm` allows the switch while no address space holds a
//! global ASID, which is true before the phase and again once its process
//! has exited. The other phases run in the mode the boot chose.

use alloc::{format, string::String, vec::Vec};

use crate::{task::loader, tlb, tlb_mode::TlbMode};
use hal::println;

struct Phase {
    title: &'static str,
    /// The phase's name in the summary table.
    short: &'static str,
    why: &'static str,
    args: &'static str,
    /// CPUs the phase pins threads to (0 up to this).
    cpus: usize,
    needs_broadcast: bool,
}

const PHASES: &[Phase] = &[
    Phase {
        title: "1. one thread discards pages",
        short: "1 thread",
        why: "no other CPU runs the address space: each discard is flushed locally, no IPI (the one-CPU shortcut)",
        args: "promote 1 100",
        cpus: 1,
        needs_broadcast: false,
    },
    Phase {
        title: "2. the same with threads busy on 3 CPUs",
        short: "3 CPUs",
        why: "each discard must reach the 2 other CPUs running the address space: targeted IPIs",
        args: "promote 3 100",
        cpus: 3,
        needs_broadcast: false,
    },
    Phase {
        title: "3. the same with threads busy on 4 CPUs",
        short: "4 CPUs, promoted",
        why: "4 CPUs at once: the address space is promoted to a global ASID and flushes become broadcasts",
        args: "promote 4 100",
        cpus: 4,
        needs_broadcast: true,
    },
    Phase {
        title: "4. reclaim: PAGEOUT of 256 pages while 3 other CPUs run the address space",
        short: "reclaim batch",
        why: "a deferred batch: all 256 entries cleared, then one flush round, then the pages go to swap",
        args: "pageout 256 3",
        cpus: 4,
        needs_broadcast: false,
    },
];

/// What one phase cost, for the summary table.
struct PhaseCost {
    short: &'static str,
    mode: TlbMode,
    ipis_sent: u64,
    broadcasts: u64,
    requests: u64,
    median_ns: Option<u64>,
}

/// Runs every phase and prints a summary. Returns whether all ran.
pub fn run() -> bool {
    println!(
        "demo: TLB shootdown in {} phases (mode {})",
        PHASES.len(),
        tlb::mode()
    );
    let mut ok = true;
    let mut costs = Vec::new();
    for phase in PHASES {
        println!();
        println!("demo: {}", phase.title);
        println!("demo:   {}", phase.why);
        let online = crate::smp::online().count();
        if phase.cpus > online {
            println!(
                "demo:   skipped: it needs {} CPUs and this machine has {online}; try `cargo run -- --smp 4`",
                phase.cpus
            );
            continue;
        }
        let lent = phase.needs_broadcast && tlb::mode() == TlbMode::Ipi;
        if lent {
            match tlb::lend_software_broadcast() {
                Ok(()) => println!(
                    "demo:   this CPU has no INVLPGB (the boot chose mode ipi): this phase borrows \
                     the software broadcast backend, as `tlb=broadcast-sw` would"
                ),
                Err(why) => {
                    println!("demo:   skipped: no broadcast backend to borrow: {why}");
                    continue;
                }
            }
        }
        match run_phase(phase) {
            Some(cost) => costs.push(cost),
            None => ok = false,
        }
        if lent && let Err(why) = tlb::return_software_broadcast() {
            println!("demo:   the software broadcast backend stays on: {why}");
            ok = false;
        }
    }
    print_summary(&costs);
    ok
}

/// Runs one phase's program; its cost, or `None` if it failed.
fn run_phase(phase: &Phase) -> Option<PhaseCost> {
    let mode = tlb::mode();
    let before = tlb::system().total_counters();
    let requests_before = tlb::latency::all_requests();
    let invlpgbs_before = tlb::invlpgb_log::invlpgbs();
    let outcome = loader::spawn("tlbtest", phase.args, None).map(|process| process.wait());
    let delta = tlb::system().total_counters().delta_since(&before);
    let requests = tlb::latency::all_requests().since(&requests_before);
    let invlpgbs = tlb::invlpgb_log::invlpgbs() - invlpgbs_before;
    match outcome {
        Ok(Some(0)) => {
            println!(
                "demo:   kernel counters for the phase: {}",
                interesting(&delta)
            );
            if mode == TlbMode::Invlpgb && delta.broadcast_ops > 0 {
                println!(
                    "demo:   INVLPGB carried out the broadcasts, no interrupt needed: broadcast_ops={} \
                     invlpgb={invlpgbs} tlbsync={}",
                    delta.broadcast_ops, delta.broadcast_syncs
                );
            }
            Some(PhaseCost {
                short: phase.short,
                mode,
                ipis_sent: delta.ipis_sent,
                broadcasts: delta.broadcast_ops,
                requests: requests.count(),
                median_ns: requests.median_ns(),
            })
        }
        other => {
            println!("demo:   the phase failed: {other:?}");
            None
        }
    }
}

/// The phases side by side: what each sent, and what a flush request cost
/// its initiator (the median, from the shootdown-latency histograms).
fn print_summary(costs: &[PhaseCost]) {
    println!();
    println!("demo: summary (median time per flush request, as the initiator waited for it)");
    println!(
        "demo:   {:<18} {:<13} {:>9} {:>10} {:>14} {:>10}",
        "phase", "mode", "IPIs sent", "broadcasts", "flush requests", "median"
    );
    for cost in costs {
        let median = cost
            .median_ns
            .map_or(String::from("-"), |ns| format!("{} us", ns.div_ceil(1000)));
        println!(
            "demo:   {:<18} {:<13} {:>9} {:>10} {:>14} {:>10}",
            cost.short,
            format!("{}", cost.mode),
            cost.ipis_sent,
            cost.broadcasts,
            cost.requests,
            median
        );
    }
    if costs
        .iter()
        .any(|cost| cost.mode == TlbMode::BroadcastSoftware)
    {
        println!(
            "demo:   (broadcast-sw carries each broadcast by a cross-call to every CPU: no targeted \
             IPI, but every CPU is interrupted; INVLPGB would interrupt none)"
        );
    }
}

/// The non-zero counters of `delta`, as `name=value` pairs.
fn interesting(delta: &mm::CounterSnapshot) -> String {
    let parts: alloc::vec::Vec<String> = delta
        .fields()
        .filter(|(_, value)| *value != 0)
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    parts.join(" ")
}
