//! `bench pageout`: the batched-flush seed's benchmark, time and IPIs per
//! loop of the reclaim loop with batched flushes (`tlb.batch=on`, one flush
//! round per `madvise(PAGEOUT)`) against per-page flushes (`off`), from the
//! `pageout` program (`user/src/bin/pageout.rs`).
//!
//! Rows are the helper variant and TLB mode, columns the batching. The
//! helper variant decides what there is to save: sleeping helpers leave
//! their CPUs lazy, which ordinary flushes skip (few IPIs either way);
//! busy helpers keep three other CPUs running the address space, so every
//! flush round interrupts them.
//!
//! With `--against linux` both kernels run the C twin (`user/c/pageout.c`,
//! static musl) from the same file, and each row gets a `linux` column:
//! Linux with swap on zram (`bench.swap=`), whose reclaim always batches.

use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::machine::Guest;

use super::{
    CommonArgs, TlbMode,
    against::AgainstArgs,
    distinct,
    plan::{
        BREAKDOWN_KEYS, BREAKDOWN_METRICS, Config, Format, LATENCY_METRICS, Metric, Plan, Sample,
        Workload,
    },
    table,
};

/// The helper threads' activity (see `user::helpers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Helpers {
    /// Four helpers on CPUs 0-3 that only sleep (the seed's benchmark).
    Sleep,
    /// Three helpers spinning in user mode on CPUs 1-3.
    Busy,
}

/// `tlb.batch=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Batch {
    On,
    Off,
}

impl Batch {
    fn name(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
        }
    }
}

impl Helpers {
    fn name(self) -> &'static str {
        match self {
            Self::Sleep => "sleep",
            Self::Busy => "busy",
        }
    }
}

#[derive(Debug, Args)]
pub struct PageoutArgs {
    /// CPUs (the workload uses CPUs 0-3).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(4..=64))]
    smp: u32,
    /// TLB modes, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "ipi,broadcast-sw"
    )]
    modes: Vec<TlbMode>,
    /// Batching of the reclaim flush to compare, comma-separated.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "on,off")]
    batch: Vec<Batch>,
    /// Helper variants, comma-separated.
    #[arg(long, value_delimiter = ',', value_enum, default_value = "sleep,busy")]
    helpers: Vec<Helpers>,
    /// Measured loops per run (after one unmeasured loop).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    loops: u64,
    #[command(flatten)]
    against: AgainstArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The program both kernels run with `--against linux`: the C pageout
/// (`user/c/pageout.c`), linked with musl.
const AGAINST_PROGRAM: &str = "pageout-musl";

/// Linux's swap for it: a zram device of this many MiB (the region is
/// 1 MiB; zram compresses its 0x88 pages to almost nothing).
const LINUX_SWAP_MIB: u32 = 64;

/// The program metrics Linux's run prints too (the others stay empty in its
/// column): its TLB shootdown interrupts come from `/proc/interrupts`, the
/// pages it swapped out from `/proc/vmstat`.
fn against_metrics() -> Vec<Metric> {
    let program = Metric::program;
    vec![
        program("ns_per_loop", "time/loop", Format::Nanos),
        program("ipis_received_per_loop", "IPIs handled/loop", Format::Ratio),
        program("ipis_sent_per_loop", "IPIs sent/loop", Format::Ratio),
        program("batch_flushes_per_loop", "batches/loop", Format::Ratio),
        program("broadcast_ops_per_loop", "broadcasts/loop", Format::Ratio),
        program(
            "pages_swapped_out_per_loop",
            "pages to swap/loop",
            Format::Ratio,
        ),
    ]
}

fn metrics() -> Vec<Metric> {
    let program = Metric::program;
    let mut metrics = vec![
        program("ns_per_loop", "time/loop", Format::Nanos),
        program("ipis_sent_per_loop", "IPIs sent/loop", Format::Ratio),
        program("ipis_received_per_loop", "IPIs handled/loop", Format::Ratio),
        program(
            "flush_handler_runs_per_loop",
            "handler runs/loop",
            Format::Ratio,
        ),
        program("batch_flushes_per_loop", "batches/loop", Format::Ratio),
        program(
            "local_full_flushes_per_loop",
            "full flushes/loop",
            Format::Ratio,
        ),
        program(
            "local_partial_flushes_per_loop",
            "partial flushes/loop",
            Format::Ratio,
        ),
        program("broadcast_ops_per_loop", "broadcasts/loop", Format::Ratio),
    ];
    metrics.extend(LATENCY_METRICS);
    metrics.extend(BREAKDOWN_METRICS);
    metrics
}

/// The batching must be what the column says: a run whose kernel ignored
/// `tlb.batch=` would compare nothing.
fn check(plan: &Plan, sample: &Sample) -> Result<(), String> {
    let batches = sample.values[plan.metric("batch_flushes_per_loop")].unwrap_or(0.0);
    match plan.columns[sample.step.column].as_str() {
        "on" if batches < 1.0 => Err(format!("tlb.batch=on but {batches} batch flushes per loop")),
        "off" if batches != 0.0 => Err(format!(
            "tlb.batch=off but {batches} batch flushes per loop"
        )),
        _ => Ok(()),
    }
}

pub fn plan(args: &PageoutArgs) -> Result<Plan, String> {
    distinct("modes", &args.modes, |mode| mode.name().to_string())?;
    distinct("batch", &args.batch, |batch| batch.name().to_string())?;
    distinct("helpers", &args.helpers, |helpers| {
        helpers.name().to_string()
    })?;
    let extra = args
        .common
        .kernel_options(&["tlb", "tlb.batch", "exec", "run", "test"])?;
    // Per-page flushes to three busy CPUs take about a second per loop
    // under TCG; leave ten.
    let timeout = Duration::from_secs(120 + 10 * args.loops);
    let linux = args.against.linux_column(AGAINST_PROGRAM, true)?;
    let program_name = if linux.is_some() {
        AGAINST_PROGRAM
    } else {
        "pageout"
    };
    let mut rows = Vec::new();
    let mut configs = Vec::new();
    for helpers in &args.helpers {
        for mode in &args.modes {
            rows.push(vec![helpers.name().to_string(), mode.name().to_string()]);
            configs.push(
                args.batch
                    .iter()
                    .map(|batch| Config {
                        cpus: args.smp,
                        cmdline: [
                            format!("tlb={} tlb.batch={}", mode.name(), batch.name()),
                            extra.clone(),
                            format!("exec={program_name}:{},{}", args.loops, helpers.name()),
                        ]
                        .into_iter()
                        .filter(|part| !part.is_empty())
                        .collect::<Vec<_>>()
                        .join(" "),
                        timeout,
                        guest: Guest::Shootdown,
                    })
                    .chain(linux.iter().map(|linux| Config {
                        cpus: args.smp,
                        cmdline: format!(
                            "bench.swap={LINUX_SWAP_MIB} bench.exec={AGAINST_PROGRAM}:{},{}",
                            args.loops,
                            helpers.name()
                        ),
                        timeout,
                        guest: linux.guest.clone(),
                    }))
                    .collect(),
            );
        }
    }
    Ok(Plan {
        workload: Workload {
            name: "pageout",
            summary_prefix: "pageout: helpers=",
            metrics: if linux.is_some() {
                against_metrics()
            } else {
                metrics()
            },
            check,
        },
        title: format!(
            "{program_name} 1 MiB, {} CPUs, {} loops",
            args.smp, args.loops
        ),
        row_fields: vec!["helpers", "mode"],
        rows,
        column_field: "batch",
        columns: args
            .batch
            .iter()
            .map(|batch| batch.name().to_string())
            .chain(linux.is_some().then(|| String::from("linux")))
            .collect(),
        configs,
        repeat: args.common.repeat.into(),
        machine: args.common.machine.clone(),
        note: linux.map(|linux| linux.note),
    })
}

/// Time and IPIs per loop, then the counters behind them.
pub fn report(plan: &Plan, samples: &[Sample]) -> String {
    if plan.columns.iter().any(|column| column == "linux") {
        // Against Linux: only what both kernels report.
        return [
            table::comparison(plan, samples, "ns_per_loop", "time per loop"),
            table::details(
                plan,
                samples,
                &[
                    "ipis_received_per_loop",
                    "ipis_sent_per_loop",
                    "batch_flushes_per_loop",
                    "broadcast_ops_per_loop",
                    "pages_swapped_out_per_loop",
                ],
                "TLB shootdown IPIs handled per loop (Linux's from /proc/interrupts), and pages \
                 Linux wrote to swap (/proc/vmstat)",
            ),
        ]
        .join("\n");
    }
    [
        table::comparison(plan, samples, "ns_per_loop", "time per loop"),
        table::comparison(
            plan,
            samples,
            "ipis_received_per_loop",
            "flush IPIs handled per loop (a software broadcast counts once per online CPU)",
        ),
        table::details(
            plan,
            samples,
            &[
                "ipis_sent_per_loop",
                "flush_handler_runs_per_loop",
                "batch_flushes_per_loop",
                "local_full_flushes_per_loop",
                "local_partial_flushes_per_loop",
                "broadcast_ops_per_loop",
                "remote_median_ns",
                "remote_p99_ns",
                "local_median_ns",
            ],
            "counters per loop (measured loops) and flush latency (whole run)",
        ),
        table::details(
            plan,
            samples,
            &BREAKDOWN_KEYS,
            "one shootdown step by step (requests that sent IPIs, whole run; see tlb::breakdown)",
        ),
    ]
    .join("\n")
}
