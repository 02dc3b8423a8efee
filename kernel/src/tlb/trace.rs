//! The `tlb-trace:` lines of `tlb.trace=on`: one per decision `mm` reports
//! ([`mm::TraceEvent`]: who flushed which range of which address space, the
//! CPUs it targeted and why), each followed by what the decision cost if it
//! sent IPIs ([`super::breakdown`]) and by the INVLPGBs and TLBSYNC it
//! issued in mode `invlpgb` ([`super::invlpgb_log`]).

use alloc::string::String;

use mm::TraceEvent;

use super::{breakdown, invlpgb_log};

/// Prints `event` and what it cost.
pub(super) fn print_decision(event: &TraceEvent) {
    let range = match event.range {
        Some((start, end)) => alloc::format!("{start:#x}..{end:#x}"),
        None => String::from("all"),
    };
    let ctx = event
        .ctx_id
        .map_or(String::from("kernel"), |id| alloc::format!("{id}"));
    hal::println!(
        "tlb-trace: cpu={} ctx={ctx} range={range} targets={:?} reason={:?}",
        event.initiator,
        event.targets,
        event.reason
    );
    // What the decision cost, if it sent IPIs: each shootdown's steps under
    // it (`tlb::breakdown` has their medians).
    if let Some(cost) = breakdown::take_for_trace(event.initiator) {
        hal::println!("{cost}");
    }
    // Its INVLPGBs and TLBSYNC, if it broadcast in mode invlpgb. A decision
    // that targets CPUs (the IPIs an ASID transition sends between a
    // broadcast's INVLPGBs and its TLBSYNC) leaves them for the broadcast's
    // own line, which follows.
    if event.targets.is_empty()
        && let Some(instructions) = invlpgb_log::take_for_trace(event.initiator)
    {
        hal::println!("{instructions}");
    }
}
