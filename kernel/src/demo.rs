//! The guided demo `cargo run` shows: the same work under different
//! conditions, each phase with a one-line explanation and what it cost in
//! TLB counters.
//!
//! Every phase runs the `tlbtest` program from the ramdisk, which prints its
//! own measurement line; the demo adds the kernel's view (the counter deltas
//! of the whole phase).

use alloc::{format, string::String};

use crate::{task::loader, tlb};
use hal::println;

struct Phase {
    title: &'static str,
    why: &'static str,
    args: &'static str,
    /// CPUs the phase pins threads to (0 up to this).
    cpus: usize,
    needs_broadcast: bool,
}

const PHASES: &[Phase] = &[
    Phase {
        title: "1. one thread discards pages",
        why: "no other CPU runs the address space: each discard is flushed locally, no IPI (the one-CPU shortcut)",
        args: "promote 1 100",
        cpus: 1,
        needs_broadcast: false,
    },
    Phase {
        title: "2. the same with threads busy on 3 CPUs",
        why: "each discard must reach the 2 other CPUs running the address space: targeted IPIs",
        args: "promote 3 100",
        cpus: 3,
        needs_broadcast: false,
    },
    Phase {
        title: "3. the same with threads busy on 4 CPUs",
        why: "4 CPUs at once: the address space is promoted to a global ASID and flushes become broadcasts",
        args: "promote 4 100",
        cpus: 4,
        needs_broadcast: true,
    },
    Phase {
        title: "4. reclaim: PAGEOUT of 256 pages while 3 other CPUs run the address space",
        why: "a deferred batch: all 256 entries cleared, then one flush round, then the pages go to swap",
        args: "pageout 256 3",
        cpus: 4,
        needs_broadcast: false,
    },
];

/// Runs every phase and prints a summary. Returns whether all ran.
pub fn run() -> bool {
    println!(
        "demo: TLB shootdown in {} phases (mode {})",
        PHASES.len(),
        tlb::mode()
    );
    let mut ok = true;
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
        if phase.needs_broadcast && tlb::mode() == crate::tlb_mode::TlbMode::Ipi {
            println!(
                "demo:   skipped: mode ipi has no global ASIDs; try `cargo run -- tlb=broadcast-sw`"
            );
            continue;
        }
        let before = tlb::system().total_counters();
        let outcome = loader::spawn("tlbtest", phase.args, None).map(|process| process.wait());
        let delta = tlb::system().total_counters().delta_since(&before);
        match outcome {
            Ok(Some(0)) => println!(
                "demo:   kernel counters for the phase: {}",
                interesting(&delta)
            ),
            other => {
                println!("demo:   the phase failed: {other:?}");
                ok = false;
            }
        }
    }
    ok
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
