//! `bench tlb_flush2`: the broadcast-ASID seed's table, total iterations
//! per second by task count (rows) and TLB mode (columns), from the
//! `tlb_flush2` program (`user/src/bin/tlb_flush2.rs`).
//!
//! The seed's claims this checks: with 1-2 threads nothing is promoted, so
//! the modes do the same work; from 4 threads on (the promotion threshold)
//! `broadcast-sw` promotes the process and its flushes become broadcasts.
//! In processes mode every task has its own address space on one CPU, so
//! no flush needs another CPU in any mode.

use std::time::Duration;

use clap::Args;

use crate::machine::Guest;

use super::{
    CommonArgs, TlbMode, VmLock,
    against::AgainstArgs,
    distinct, parse_seconds,
    plan::{
        BREAKDOWN_KEYS, BREAKDOWN_METRICS, Config, Format, LATENCY_METRICS, Metric, Plan, Sample,
        Workload,
    },
    stats::Spread,
    svg::{Plot, Series},
    table,
};

#[derive(Debug, Args)]
pub struct TlbFlush2Args {
    /// CPUs [default: the largest task count]; tasks are pinned
    /// round-robin.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    smp: Option<u32>,
    /// Task counts, comma-separated (1-64 each).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8",
          value_parser = clap::value_parser!(u32).range(1..=64))]
    tasks: Vec<u32>,
    /// TLB modes to compare, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "ipi,broadcast-sw"
    )]
    modes: Vec<TlbMode>,
    /// Address-space locking disciplines to compare (`vm.lock=`),
    /// comma-separated: with more than one, every mode runs under each, and
    /// the columns are named `LOCK+MODE` (the seed's four rows are
    /// `--locks coarse,fine --modes ipi,invlpgb`).
    #[arg(long, value_delimiter = ',', value_enum, default_value = "fine")]
    locks: Vec<VmLock>,
    /// Tasks are processes (an address space each) instead of threads of
    /// one process.
    #[arg(long)]
    processes: bool,
    /// Measured seconds per run.
    #[arg(long, default_value_t = 3.0, value_parser = parse_seconds, allow_negative_numbers = true)]
    seconds: f64,
    /// Seconds of warm-up before measuring (tasks start, promotion).
    #[arg(long, default_value_t = 1.0, value_parser = parse_seconds, allow_negative_numbers = true)]
    warmup: f64,
    #[command(flatten)]
    against: AgainstArgs,
    /// Also draw iterations/s per task count and mode into this SVG file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The program both kernels run with `--against linux`: the C tlb_flush2
/// (`user/c/tlb_flush2.c`), linked with musl.
const AGAINST_PROGRAM: &str = "tlb_flush2-musl";

/// The program metrics Linux's run prints too (the others stay empty in its
/// column): its TLB shootdown interrupts come from `/proc/interrupts`.
fn against_metrics() -> Vec<Metric> {
    let program = Metric::program;
    vec![
        program("iterations_per_s", "iterations/s", Format::Count),
        program("iterations", "iterations", Format::Count),
        program("failed_tasks", "failed tasks", Format::Count),
        program("ipis_received_per_iter", "IPIs handled/iter", Format::Ratio),
        program("ipis_sent_per_iter", "IPIs sent/iter", Format::Ratio),
        program("broadcast_ops_per_iter", "broadcasts/iter", Format::Ratio),
        program("promotions", "promotions", Format::Count),
    ]
}

fn metrics() -> Vec<Metric> {
    let program = Metric::program;
    let mut metrics = vec![
        program("iterations_per_s", "iterations/s", Format::Count),
        program("iterations", "iterations", Format::Count),
        program("failed_tasks", "failed tasks", Format::Count),
        program("promotions", "promotions", Format::Count),
        program("ipis_sent_per_iter", "IPIs sent/iter", Format::Ratio),
        program("ipis_received_per_iter", "IPIs handled/iter", Format::Ratio),
        program(
            "flush_handler_runs_per_iter",
            "handler runs/iter",
            Format::Ratio,
        ),
        program(
            "local_full_flushes_per_iter",
            "full flushes/iter",
            Format::Ratio,
        ),
        program(
            "local_partial_flushes_per_iter",
            "partial flushes/iter",
            Format::Ratio,
        ),
        program("broadcast_ops_per_iter", "broadcasts/iter", Format::Ratio),
    ];
    metrics.extend(LATENCY_METRICS);
    metrics.extend(BREAKDOWN_METRICS);
    metrics
}

/// A run counts only if every task finished its checks and counted.
fn check(plan: &Plan, sample: &Sample) -> Result<(), String> {
    let value = |key| sample.values[plan.metric(key)].unwrap_or(0.0);
    if value("failed_tasks") != 0.0 {
        return Err(String::from("a task failed its zero check"));
    }
    if value("iterations") <= 0.0 {
        return Err(String::from("no iterations were counted"));
    }
    Ok(())
}

pub fn plan(args: &TlbFlush2Args) -> Result<Plan, String> {
    distinct("tasks", &args.tasks, u32::to_string)?;
    distinct("modes", &args.modes, |mode| mode.name().to_string())?;
    distinct("locks", &args.locks, |lock| lock.name().to_string())?;
    let extra = args
        .common
        .kernel_options(&["tlb", "vm.lock", "exec", "run", "test"])?;
    // Each column: a mode under a discipline, named by the mode alone when
    // only one discipline is compared.
    let columns: Vec<(VmLock, TlbMode, String)> = args
        .locks
        .iter()
        .flat_map(|&lock| {
            args.modes.iter().map(move |&mode| {
                let name = if args.locks.len() > 1 {
                    format!("{}+{}", lock.name(), mode.name())
                } else {
                    mode.name().to_string()
                };
                (lock, mode, name)
            })
        })
        .collect();
    let largest = args.tasks.iter().copied().max().unwrap_or(1);
    let cpus = args.smp.unwrap_or(largest);
    let kind = if args.processes {
        "processes"
    } else {
        "threads"
    };
    let warm_up_ms = (args.warmup * 1000.0).round() as u64;
    let measure_ms = (args.seconds * 1000.0).round().max(1.0) as u64;
    // Boot, warm-up, measurement, shutdown, with room for a slow host.
    let timeout = Duration::from_secs_f64(120.0 + 2.0 * (args.warmup + args.seconds));
    let linux = args.against.linux_column(AGAINST_PROGRAM, false)?;
    let program_name = if linux.is_some() {
        AGAINST_PROGRAM
    } else {
        "tlb_flush2"
    };
    let program = |tasks: &u32| format!("{program_name}:{kind},{tasks},{warm_up_ms},{measure_ms}");
    let configs = args
        .tasks
        .iter()
        .map(|tasks| {
            let mut row: Vec<Config> = columns
                .iter()
                .map(|(lock, mode, _)| Config {
                    cpus,
                    cmdline: [
                        format!("tlb={}", mode.name()),
                        format!("vm.lock={}", lock.name()),
                        extra.clone(),
                        format!("exec={}", program(tasks)),
                    ]
                    .into_iter()
                    .filter(|part| !part.is_empty())
                    .collect::<Vec<_>>()
                    .join(" "),
                    timeout,
                    guest: Guest::Shootdown,
                })
                .collect();
            if let Some(linux) = &linux {
                row.push(Config {
                    cpus,
                    cmdline: format!("bench.exec={}", program(tasks)),
                    timeout,
                    guest: linux.guest.clone(),
                });
            }
            row
        })
        .collect();
    let mut column_names: Vec<String> = columns.into_iter().map(|(_, _, name)| name).collect();
    if linux.is_some() {
        column_names.push(String::from("linux"));
    }
    Ok(Plan {
        workload: Workload {
            name: "tlb_flush2",
            summary_prefix: "tlb_flush2: kind=",
            metrics: if linux.is_some() {
                against_metrics()
            } else {
                metrics()
            },
            check,
        },
        title: format!("{program_name} {kind}, {cpus} CPUs, {} s", args.seconds),
        row_fields: vec!["tasks"],
        rows: args
            .tasks
            .iter()
            .map(|tasks| vec![tasks.to_string()])
            .collect(),
        column_field: "mode",
        columns: column_names,
        configs,
        repeat: args.common.repeat.into(),
        machine: args.common.machine.clone(),
        note: linux.map(|linux| linux.note),
    })
}

/// The comparison of iterations/s and the counters behind it, with the
/// verdict on the seeds' direction when the run can tell.
pub fn report(plan: &Plan, samples: &[Sample]) -> String {
    let mut comparison = table::comparison(
        plan,
        samples,
        "iterations_per_s",
        "total iterations/s over all tasks",
    );
    if let Some(verdict) = seeds_direction(plan, samples, "iterations_per_s") {
        comparison.push('\n');
        comparison.push_str(&verdict);
        comparison.push('\n');
    }
    if plan.columns.iter().any(|column| column == "linux") {
        // Against Linux: only what both kernels report (Linux's shootdown
        // IPIs from /proc/interrupts; broadcasts and promotions are this
        // kernel's own counters).
        return [
            comparison,
            table::details(
                plan,
                samples,
                &[
                    "ipis_received_per_iter",
                    "ipis_sent_per_iter",
                    "broadcast_ops_per_iter",
                    "promotions",
                ],
                "TLB shootdown IPIs handled and broadcasts per iteration (measured interval; \
                 Linux's IPIs from /proc/interrupts, its INVLPGBs uncounted)",
            ),
        ]
        .join("\n");
    }
    [
        comparison,
        table::details(
            plan,
            samples,
            &[
                "promotions",
                "ipis_sent_per_iter",
                "ipis_received_per_iter",
                "flush_handler_runs_per_iter",
                "local_full_flushes_per_iter",
                "local_partial_flushes_per_iter",
                "broadcast_ops_per_iter",
                "remote_median_ns",
                "remote_p99_ns",
                "local_median_ns",
            ],
            "counters per iteration (measured interval) and flush latency (whole run)",
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

/// The seeds' headline is that with 4 or more threads, broadcast flushes
/// (global ASIDs) beat targeted IPIs. Whether this run agrees, mode by
/// mode: for each row of 4 or more tasks of a threads run, the median of
/// every other mode against `ipi`'s, and a verdict per mode, because the
/// software broadcast and INVLPGB can disagree on one machine (the
/// software one still interrupts every CPU; INVLPGB interrupts none).
/// `None` when the run has no such row or no `ipi` column (processes send
/// no shootdowns at all).
fn seeds_direction(plan: &Plan, samples: &[Sample], key: &str) -> Option<String> {
    if !plan.title.starts_with("tlb_flush2 threads") {
        return None;
    }
    let index = plan.metric(key);
    let median = |row: usize, column: usize| {
        Spread::of(plan.values(samples, row, column, index)).map(|spread| spread.median)
    };
    // Each mode against `ipi` under the same discipline (`fine+invlpgb`
    // against `fine+ipi`).
    let ipi_of = |name: &str| {
        let discipline = name.rfind('+').map_or("", |plus| &name[..=plus]);
        let ipi = format!("{discipline}ipi");
        plan.columns.iter().position(|column| *column == ipi)
    };
    let mut modes: Vec<AgainstIpi> = plan
        .columns
        .iter()
        .enumerate()
        .filter_map(|(column, name)| {
            let ipi = ipi_of(name).filter(|&ipi| ipi != column)?;
            Some(AgainstIpi {
                column,
                ipi,
                name,
                quotients: Vec::new(),
            })
        })
        .collect();
    for (row, values) in plan.rows.iter().enumerate() {
        let tasks: u32 = values.first()?.parse().ok()?;
        if tasks < 4 {
            continue;
        }
        for mode in &mut modes {
            let Some(base) = median(row, mode.ipi).filter(|base| *base > 0.0) else {
                continue;
            };
            if let Some(value) = median(row, mode.column) {
                mode.quotients.push((tasks, value / base));
            }
        }
    }
    modes.retain(|mode| !mode.quotients.is_empty());
    if modes.is_empty() {
        return None;
    }
    let mut lines = vec![String::from(
        "the INVLPGB series' direction (broadcasts faster than targeted IPIs from 4 threads on), on this machine:",
    )];
    let mut any_fails = false;
    for mode in &modes {
        let name = mode.name;
        let holds = mode.quotients.iter().all(|(_, quotient)| *quotient > 1.0);
        any_fails |= !holds;
        let at: Vec<String> = mode
            .quotients
            .iter()
            .map(|(tasks, quotient)| {
                let ipi = &plan.columns[mode.ipi];
                format!("{name} / {ipi} {quotient:.2} at {tasks} tasks")
            })
            .collect();
        lines.push(format!(
            "  {name}: {} ({})",
            if holds { "holds" } else { "does not hold" },
            at.join(", ")
        ));
    }
    if any_fails {
        lines.push(String::from(
            "  where it does not hold, --profile and the step-by-step table say where the time goes",
        ));
    }
    Some(lines.join("\n"))
}

/// One broadcast mode's medians against `ipi`'s, for the seeds' verdict.
struct AgainstIpi<'plan> {
    /// The mode's column in the plan.
    column: usize,
    /// The column of `ipi` under the same discipline.
    ipi: usize,
    name: &'plan str,
    /// (tasks, median / ipi's median) for each row of 4 or more tasks
    /// where both were measured.
    quotients: Vec<(u32, f64)>,
}

/// Iterations/s against the task count, one line per mode.
pub fn plot(plan: &Plan, samples: &[Sample]) -> String {
    let index = plan.metric("iterations_per_s");
    let series: Vec<Series> = plan
        .columns
        .iter()
        .enumerate()
        .map(|(column, name)| Series {
            name: name.clone(),
            points: (0..plan.rows.len())
                .map(|row| Spread::of(plan.values(samples, row, column, index)))
                .collect(),
        })
        .collect();
    let categories: Vec<String> = plan.rows.iter().map(|row| row.join(" ")).collect();
    Plot {
        title: &format!(
            "{}: iterations/s, median and min..max of {} runs",
            plan.title, plan.repeat
        ),
        x_label: "tasks",
        y_label: "total iterations/s",
        categories: &categories,
        series: &series,
        format_y: |value| table::format_value(Format::Count, value),
    }
    .render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::{Step, tests::small_plan};

    fn sample(row: usize, column: usize, x: f64) -> Sample {
        Sample {
            step: Step {
                row,
                column,
                rep: 1,
            },
            values: vec![Some(x)],
            profile: None,
        }
    }

    /// A 4-CPU threads run with one row per task count and one column per
    /// mode.
    fn threads_plan(tasks: &[&str], modes: &[&str]) -> Plan {
        let mut plan = small_plan(1);
        plan.title = String::from("tlb_flush2 threads, 4 CPUs, 3 s");
        plan.rows = tasks.iter().map(|tasks| vec![tasks.to_string()]).collect();
        plan.columns = modes.iter().map(|mode| mode.to_string()).collect();
        plan
    }

    #[test]
    fn the_verdict_compares_broadcasts_with_ipis_from_4_threads_on() {
        let mut plan = threads_plan(&["2", "4"], &["ipi", "broadcast-sw"]);
        let faster = [
            sample(0, 0, 100.0),
            sample(0, 1, 50.0),
            sample(1, 0, 10.0),
            sample(1, 1, 20.0),
        ];
        let verdict = seeds_direction(&plan, &faster, "x").unwrap();
        assert!(
            verdict.contains("\n  broadcast-sw: holds (broadcast-sw / ipi 2.00 at 4 tasks)"),
            "{verdict}"
        );
        assert!(!verdict.contains("at 2 tasks"), "{verdict}");
        assert!(!verdict.contains("--profile"), "{verdict}");
        let slower = [sample(1, 0, 20.0), sample(1, 1, 10.0)];
        let verdict = seeds_direction(&plan, &slower, "x").unwrap();
        assert!(
            verdict.contains("broadcast-sw: does not hold (broadcast-sw / ipi 0.50 at 4 tasks)")
                && verdict.contains("--profile"),
            "{verdict}"
        );
        plan.title = String::from("tlb_flush2 processes, 4 CPUs, 3 s");
        assert_eq!(seeds_direction(&plan, &faster, "x"), None);
    }

    #[test]
    fn under_two_disciplines_each_mode_is_compared_with_its_own_ipi() {
        let columns = ["coarse+ipi", "coarse+invlpgb", "fine+ipi", "fine+invlpgb"];
        let plan = threads_plan(&["4"], &columns);
        let seeds_four_rows = [
            sample(0, 0, 100.0),
            sample(0, 1, 90.0),
            sample(0, 2, 1000.0),
            sample(0, 3, 1600.0),
        ];
        let verdict = seeds_direction(&plan, &seeds_four_rows, "x").unwrap();
        assert!(
            verdict.contains(
                "coarse+invlpgb: does not hold (coarse+invlpgb / coarse+ipi 0.90 at 4 tasks)"
            ),
            "{verdict}"
        );
        assert!(
            verdict.contains("fine+invlpgb: holds (fine+invlpgb / fine+ipi 1.60 at 4 tasks)"),
            "{verdict}"
        );
        assert!(!verdict.contains("fine+ipi: "), "{verdict}");
    }

    #[test]
    fn each_broadcast_mode_gets_its_own_verdict() {
        let plan = threads_plan(&["4"], &["ipi", "broadcast-sw", "invlpgb"]);
        // A 4-task run on the patched QEMU (2026-12-04): the software
        // broadcast a little slower than IPIs, INVLPGB faster.
        let mixed = [
            sample(0, 0, 400.0),
            sample(0, 1, 380.0),
            sample(0, 2, 492.0),
        ];
        let verdict = seeds_direction(&plan, &mixed, "x").unwrap();
        assert!(
            verdict.contains("broadcast-sw: does not hold (broadcast-sw / ipi 0.95 at 4 tasks)"),
            "{verdict}"
        );
        assert!(
            verdict.contains("invlpgb: holds (invlpgb / ipi 1.23 at 4 tasks)"),
            "{verdict}"
        );
        // A mode with no sample in any row of 4 or more tasks says nothing.
        let verdict = seeds_direction(&plan, &mixed[..2], "x").unwrap();
        assert!(!verdict.contains("invlpgb"), "{verdict}");
    }
}
