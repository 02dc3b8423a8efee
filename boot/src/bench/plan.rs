//! What a benchmark measures: a grid of configurations (rows × compared
//! columns), the metrics read from each run, and the order the runs go in.
//!
//! A *row* is what the table's lines are (a task count; a helper variant
//! and TLB mode); a *column* is what is compared side by side on one line
//! (the TLB mode; batching on or off). Each cell is one kernel command
//! line, booted `repeat` times.
//!
//! The runs are **interleaved**: repeat 1 of every cell, then repeat 2 of
//! every cell, and so on, with the columns of a row next to each other.
//! Whatever slowly changes on the host (other jobs, thermal state) then
//! affects every column alike instead of biasing the one that ran last,
//! and each repeat gives a *pair* of neighbouring runs whose ratio is
//! meaningful on its own. Even repeats run a row's columns in reverse
//! order (ipi, broadcast-sw; then broadcast-sw, ipi; ...): on the shared
//! 2-core host the first and second run of a pair were seen to differ by
//! up to a third whatever they ran, and alternating the order spreads
//! that over both columns instead of favouring one.

use std::time::Duration;

use kernel::profile::Profile;

use crate::{cli::MachineArgs, machine::Guest};

/// Where a metric is read from. Either line may say `none` (nothing to
/// divide by, no sample), which leaves the value empty; the workload's
/// check rejects a run that lacks what it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// The program's one summary line.
    Program,
    /// The kernel's closing `tlb-latency:` line.
    Latency,
    /// The kernel's closing `tlb-breakdown:` line.
    Breakdown,
}

/// How a metric's values are printed in tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A count or rate: three significant digits with k/M suffixes.
    Count,
    /// A small quotient (per iteration): three decimals.
    Ratio,
    /// Nanoseconds, shown in µs or ms.
    Nanos,
}

/// One number every run reports.
#[derive(Clone, Copy, Debug)]
pub struct Metric {
    /// The `key=` in the source line.
    pub key: &'static str,
    pub source: Source,
    /// Column heading in tables (short).
    pub heading: &'static str,
    pub format: Format,
}

impl Metric {
    /// A step of the kernel's breakdown line, in nanoseconds.
    const fn breakdown(key: &'static str, heading: &'static str) -> Self {
        Self {
            key,
            source: Source::Breakdown,
            heading,
            format: Format::Nanos,
        }
    }

    /// A metric of the program's summary line.
    pub const fn program(key: &'static str, heading: &'static str, format: Format) -> Self {
        Self {
            key,
            source: Source::Program,
            heading,
            format,
        }
    }
}

/// The kernel's latency line's fields every benchmark keeps.
pub const LATENCY_METRICS: [Metric; 4] = [
    Metric {
        key: "remote_count",
        source: Source::Latency,
        heading: "shootdowns",
        format: Format::Count,
    },
    Metric {
        key: "remote_median_ns",
        source: Source::Latency,
        heading: "latency p50",
        format: Format::Nanos,
    },
    Metric {
        key: "remote_p99_ns",
        source: Source::Latency,
        heading: "latency p99",
        format: Format::Nanos,
    },
    Metric {
        key: "local_median_ns",
        source: Source::Latency,
        heading: "local p50",
        format: Format::Nanos,
    },
];

/// The steps of one shootdown, from the kernel's `tlb-breakdown:` line
/// (medians over the run's requests that sent IPIs).
pub const BREAKDOWN_METRICS: [Metric; 6] = [
    Metric::breakdown("bookkeeping_ns", "bookkeeping"),
    Metric::breakdown("send_ns", "send"),
    Metric::breakdown("delivery_ns", "delivery"),
    Metric::breakdown("handler_ns", "handler"),
    Metric::breakdown("acknowledge_ns", "acknowledge"),
    Metric::breakdown("finish_ns", "finish"),
];

/// The keys of [`BREAKDOWN_METRICS`], for a details table.
pub const BREAKDOWN_KEYS: [&str; 6] = [
    "bookkeeping_ns",
    "send_ns",
    "delivery_ns",
    "handler_ns",
    "acknowledge_ns",
    "finish_ns",
];

/// A workload: which program line to read, and which numbers.
pub struct Workload {
    pub name: &'static str,
    /// The summary line starts with this.
    pub summary_prefix: &'static str,
    pub metrics: Vec<Metric>,
    /// Rejects a run whose numbers cannot be right (nothing counted, a
    /// failed check), with the reason.
    pub check: fn(&Plan, &Sample) -> Result<(), String>,
}

/// One cell: how to boot it.
#[derive(Clone, Debug)]
pub struct Config {
    pub cpus: u32,
    /// This kernel's command line, or the words Linux's init reads.
    pub cmdline: String,
    pub timeout: Duration,
    /// This kernel, or Linux (`--against linux`).
    pub guest: Guest,
}

/// A benchmark: the grid, the repeats and the machine.
pub struct Plan {
    pub workload: Workload,
    /// For titles: what was run, e.g. `tlb_flush2 threads`.
    pub title: String,
    /// Names of the values that make up a row, e.g. `["tasks"]`.
    pub row_fields: Vec<&'static str>,
    /// One entry per row: the values of `row_fields`.
    pub rows: Vec<Vec<String>>,
    /// The name of the compared variable, e.g. `mode`.
    pub column_field: &'static str,
    pub columns: Vec<String>,
    /// `configs[row][column]`.
    pub configs: Vec<Vec<Config>>,
    pub repeat: usize,
    pub machine: MachineArgs,
    /// Printed under the tables (`--against linux`: the program file's
    /// checksum).
    pub note: Option<String>,
}

/// One run's place in the grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub row: usize,
    pub column: usize,
    /// From 1.
    pub rep: usize,
}

/// What one run measured: a value per metric of the workload (in the
/// workload's order), `None` where the kernel had no sample.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub step: Step,
    pub values: Vec<Option<f64>>,
    /// The run's profile, if it ran with the profiler on.
    pub profile: Option<Profile>,
}

impl Plan {
    /// Every run, in the interleaved order of the module docs.
    pub fn steps(&self) -> Vec<Step> {
        (1..=self.repeat)
            .flat_map(|rep| {
                (0..self.rows.len()).flat_map(move |row| {
                    let columns = self.columns.len();
                    (0..columns).map(move |place| {
                        let column = if rep % 2 == 0 {
                            columns - 1 - place
                        } else {
                            place
                        };
                        Step { row, column, rep }
                    })
                })
            })
            .collect()
    }

    pub fn config(&self, step: Step) -> &Config {
        &self.configs[step.row][step.column]
    }

    /// `tasks=4 mode=ipi`: the row's and column's values, for progress
    /// lines and errors.
    pub fn describe(&self, step: Step) -> String {
        let mut words: Vec<String> = self
            .row_fields
            .iter()
            .zip(&self.rows[step.row])
            .map(|(field, value)| format!("{field}={value}"))
            .collect();
        words.push(format!(
            "{}={}",
            self.column_field, self.columns[step.column]
        ));
        words.join(" ")
    }

    /// The index of the metric called `key`.
    ///
    /// # Panics
    ///
    /// If the workload has no such metric: a bug in the workload's report.
    pub fn metric(&self, key: &str) -> usize {
        self.workload
            .metrics
            .iter()
            .position(|metric| metric.key == key)
            .unwrap_or_else(|| panic!("{} has no metric {key}", self.workload.name))
    }

    /// The values of metric `index` over the repeats of one cell.
    pub fn values<'a>(
        &self,
        samples: &'a [Sample],
        row: usize,
        column: usize,
        index: usize,
    ) -> impl Iterator<Item = f64> + 'a {
        samples
            .iter()
            .filter(move |sample| sample.step.row == row && sample.step.column == column)
            .filter_map(move |sample| sample.values[index])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A 2 × 2 plan with one Program metric `x`, for the other modules'
    /// tests.
    pub(crate) fn small_plan(repeat: usize) -> Plan {
        let config = Config {
            cpus: 2,
            cmdline: String::new(),
            timeout: Duration::from_secs(1),
            guest: Guest::Shootdown,
        };
        Plan {
            workload: Workload {
                name: "test",
                summary_prefix: "test:",
                metrics: vec![Metric {
                    key: "x",
                    source: Source::Program,
                    heading: "x/s",
                    format: Format::Count,
                }],
                check: |_, _| Ok(()),
            },
            title: String::from("test"),
            row_fields: vec!["tasks"],
            rows: vec![vec!["1".into()], vec!["2".into()]],
            column_field: "mode",
            columns: vec!["ipi".into(), "broadcast-sw".into()],
            configs: vec![
                vec![config.clone(), config.clone()],
                vec![config.clone(), config],
            ],
            repeat,
            machine: MachineArgs::default(),
            note: None,
        }
    }

    #[test]
    fn runs_interleave_columns_and_alternate_their_order() {
        let plan = small_plan(2);
        let order: Vec<(usize, usize, usize)> = plan
            .steps()
            .iter()
            .map(|step| (step.rep, step.row, step.column))
            .collect();
        assert_eq!(
            order,
            [
                (1, 0, 0),
                (1, 0, 1),
                (1, 1, 0),
                (1, 1, 1),
                (2, 0, 1),
                (2, 0, 0),
                (2, 1, 1),
                (2, 1, 0)
            ]
        );
        assert_eq!(
            plan.describe(Step {
                row: 1,
                column: 1,
                rep: 2
            }),
            "tasks=2 mode=broadcast-sw"
        );
    }
}
