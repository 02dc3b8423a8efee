//! The timeline in the Chrome Trace Event Format, the JSON that Perfetto
//! (ui.perfetto.dev) and chrome://tracing open: one process, the kernel;
//! one thread per CPU; a complete event (`X`) per slice; a flow (`s` on the
//! sender, `f` on the receiver) per IPI; an instant (`i`) per INVLPGB and
//! per decision outside a request; the run's command line in `otherData`.
//!
//! Times are microseconds (the format's unit) since the kernel booted.

use serde_json::{Value, json};

use super::lanes::{Arrow, Instant, InstantKind, Lanes, Slice, SliceKind};
use kernel::timeline::{Decision, Flushed, Purpose};

/// The `pid` of every event: the kernel is one process, its CPUs threads.
const PID: u64 = 1;

/// What the trace says about the run besides its events.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    /// The kernel command line.
    pub command_line: String,
    /// Events the kernel could not keep (`dropped=` of `timeline-end:`).
    pub dropped: u64,
}

/// The whole trace.
pub fn trace(lanes: &Lanes, run: &RunInfo) -> Value {
    let mut events = metadata(lanes.cpus);
    events.extend(lanes.slices.iter().map(slice));
    events.extend(lanes.instants.iter().map(instant));
    for (id, arrow) in lanes.arrows.iter().enumerate() {
        events.extend(flow(id as u64 + 1, arrow));
    }
    json!({
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": {
            "kernel_command_line": run.command_line,
            "cpus": lanes.cpus,
            "dropped_events": run.dropped,
            "unmatched_events": lanes.unmatched,
        },
    })
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// Names the process and each CPU's thread, in CPU order.
fn metadata(cpus: usize) -> Vec<Value> {
    let mut events = vec![json!({
        "ph": "M", "name": "process_name", "pid": PID, "tid": 0, "ts": 0,
        "args": { "name": "shootdown kernel" },
    })];
    for cpu in 0..cpus {
        events.push(json!({
            "ph": "M", "name": "thread_name", "pid": PID, "tid": cpu, "ts": 0,
            "args": { "name": format!("CPU {cpu}") },
        }));
        events.push(json!({
            "ph": "M", "name": "thread_sort_index", "pid": PID, "tid": cpu, "ts": 0,
            "args": { "sort_index": cpu },
        }));
    }
    events
}

/// A slice's name, as the pictures label it.
pub fn slice_name(what: &SliceKind) -> String {
    match what {
        SliceKind::Request(Some(decision)) => format!("flush ({:?})", decision.reason),
        SliceKind::Request(None) => "flush".to_string(),
        SliceKind::Waiting {
            purpose, targets, ..
        } => {
            let what = match purpose {
                Purpose::Flush => "ack",
                Purpose::Broadcast => "broadcast ack",
            };
            format!("wait for {targets} {what}{}", plural(*targets as u64))
        }
        SliceKind::Handler {
            from,
            purpose,
            flushed,
            ..
        } => {
            let handler = match purpose {
                Purpose::Flush => "handler",
                Purpose::Broadcast => "broadcast handler",
            };
            format!("{handler} for CPU {from}: {}", what_was_flushed(flushed))
        }
        SliceKind::Tlbsync => "TLBSYNC".to_string(),
    }
}

/// The plural ending for `count` things.
pub(super) fn plural(count: u64) -> &'static str {
    if count == 1 { "" } else { "s" }
}

/// "left lazy mode", "full flush", "2 pages", "left the CPU set" or
/// "nothing to flush".
fn what_was_flushed(flushed: &Flushed) -> String {
    if flushed.lazy_leaves > 0 {
        "left lazy mode for the kernel's tables".to_string()
    } else if flushed.full > 0 {
        "full flush".to_string()
    } else if flushed.pages > 0 {
        format!("{} page{}", flushed.pages, plural(flushed.pages))
    } else if flushed.trims > 0 {
        "left the CPU set".to_string()
    } else {
        "nothing to flush".to_string()
    }
}

fn decision_args(decision: &Decision) -> Value {
    json!({
        "address_space": decision.ctx.map_or("kernel".to_string(), |ctx| ctx.to_string()),
        "range": decision.range.map_or("all".to_string(), |(start, end)| format!("{start:#x}..{end:#x}")),
        "reason": format!("{:?}", decision.reason),
        "skipped_cpus": decision.skipped.iter().collect::<Vec<_>>(),
    })
}

fn slice(slice: &Slice) -> Value {
    let (category, args) = match &slice.what {
        SliceKind::Request(decision) => (
            "request",
            decision.as_ref().map_or(json!({}), decision_args),
        ),
        SliceKind::Waiting { round, targets, .. } => {
            ("wait", json!({ "round": round, "targets": targets }))
        }
        SliceKind::Handler {
            from,
            round,
            flushed,
            ..
        } => (
            "handler",
            json!({
                "from_cpu": from, "round": round,
                "full_flushes": flushed.full, "partial_flushes": flushed.partial,
                "pages_invalidated": flushed.pages, "left_cpu_set": flushed.trims,
                "left_lazy_mode": flushed.lazy_leaves,
            }),
        ),
        SliceKind::Tlbsync => ("tlbsync", json!({})),
    };
    json!({
        "ph": "X", "name": slice_name(&slice.what), "cat": category,
        "pid": PID, "tid": slice.cpu,
        "ts": us(slice.begin_ns), "dur": us(slice.end_ns - slice.begin_ns),
        "args": args,
    })
}

fn instant(instant: &Instant) -> Value {
    let (name, args) = match &instant.what {
        InstantKind::Invlpgb(operands) => (
            "INVLPGB".to_string(),
            json!({ "operands": operands.to_string() }),
        ),
        InstantKind::Decision(decision) => {
            (format!("{:?}", decision.reason), decision_args(decision))
        }
        InstantKind::SwitchFlush { ctx, lazy } => (
            "switch flush".to_string(),
            json!({ "address_space": ctx.to_string(), "back_from_lazy_mode": lazy }),
        ),
        InstantKind::Skipped { by, ctx } => (
            "skipped".to_string(),
            json!({
                "by_cpu": by,
                "address_space": ctx.map_or("kernel".to_string(), |ctx| ctx.to_string()),
            }),
        ),
    };
    json!({
        "ph": "i", "s": "t", "name": name, "cat": "instant",
        "pid": PID, "tid": instant.cpu, "ts": us(instant.ns), "args": args,
    })
}

/// An arrow as a flow: it starts in the sender's waiting slice and ends
/// at (`bp: e`, bound to the enclosing slice) the start of the handler.
fn flow(id: u64, arrow: &Arrow) -> [Value; 2] {
    let name = match arrow.purpose {
        Purpose::Flush => "flush IPI",
        Purpose::Broadcast => "broadcast IPI",
    };
    [
        json!({
            "ph": "s", "id": id, "name": name, "cat": "ipi",
            "pid": PID, "tid": arrow.from, "ts": us(arrow.sent_ns),
        }),
        json!({
            "ph": "f", "bp": "e", "id": id, "name": name, "cat": "ipi",
            "pid": PID, "tid": arrow.to, "ts": us(arrow.received_ns),
        }),
    ]
}
