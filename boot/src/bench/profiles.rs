//! `--profile`: every run samples its CPUs (the kernel's `profile=on`) and
//! prints a `profile:` line; this adds up the runs of each configuration
//! and prints one table per configuration, so that the profile of a cell
//! is no noisier than its other numbers. Reading and adding profiles is
//! the kernel's own code ([`kernel::profile`]), built for the host.

use kernel::profile::Profile;

use super::plan::{Plan, Sample};

/// How many functions each table shows.
const TOP: usize = 20;

/// One table per configuration that has profiles, or `None` if no run was
/// profiled.
pub fn report(plan: &Plan, samples: &[Sample]) -> Option<String> {
    let mut tables = Vec::new();
    for row in 0..plan.rows.len() {
        for column in 0..plan.columns.len() {
            let mut sum = Profile::default();
            for sample in samples
                .iter()
                .filter(|sample| sample.step.row == row && sample.step.column == column)
            {
                if let Some(profile) = &sample.profile {
                    sum.add(profile);
                }
            }
            if sum.runs == 0 {
                continue;
            }
            let step = super::plan::Step {
                row,
                column,
                rep: 1,
            };
            tables.push(format!(
                "{}, {}: profile\n\n```text\n{}\n```",
                plan.title,
                plan.describe(step),
                sum.table(TOP)
            ));
        }
    }
    (!tables.is_empty()).then(|| tables.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::{Step, tests::small_plan};

    fn profiled(row: usize, column: usize, rep: usize, line: &str) -> Sample {
        Sample {
            step: Step { row, column, rep },
            values: vec![Some(1.0)],
            profile: Some(Profile::parse_line(line).unwrap()),
        }
    }

    #[test]
    fn each_cell_adds_up_its_runs() {
        let plan = small_plan(2);
        let line = |kernel: u64| {
            format!(
                "profile: hz=1000 cpus=2 seconds=1.00 samples={} kernel={kernel} user=1 idle=0 held=0 unplaced=0 missed=0 runs=1 top={kernel}:0 kernel::a | 1:0 [user]",
                kernel + 1
            )
        };
        let samples = vec![
            profiled(0, 1, 1, &line(3)),
            profiled(0, 1, 2, &line(5)),
            profiled(1, 0, 1, &line(7)),
        ];
        let report = report(&plan, &samples).unwrap();
        assert_eq!(report.matches("```text").count(), 2, "{report}");
        assert!(
            report.contains("10 samples at 1000 Hz over 2.00 s, 2 runs added up"),
            "{report}"
        );
        assert!(report.contains("      8  "), "kernel::a 3 + 5: {report}");
        assert!(
            report.contains("8 samples at 1000 Hz over 1.00 s\n"),
            "{report}"
        );
        let unprofiled = Sample {
            profile: None,
            ..samples[0].clone()
        };
        assert_eq!(super::report(&plan, &[unprofiled]), None);
    }
}
