//! Every run's numbers as CSV, one line per run, for plotting or checking
//! elsewhere: the row and column values, the repeat, the machine and the
//! kernel command line, then every metric (empty where the kernel had no
//! sample).

use super::plan::{Plan, Sample};

/// Quotes a field if it holds a comma, quote or line break.
fn field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The CSV text of `samples`.
pub fn write(plan: &Plan, samples: &[Sample]) -> String {
    let mut header: Vec<&str> = vec!["benchmark"];
    header.extend(&plan.row_fields);
    header.extend([plan.column_field, "rep", "smp", "cmdline"]);
    header.extend(plan.workload.metrics.iter().map(|metric| metric.key));
    let mut text = header.join(",");
    text.push('\n');
    for sample in samples {
        let step = sample.step;
        let config = plan.config(step);
        let mut line: Vec<String> = vec![field(&plan.title)];
        line.extend(plan.rows[step.row].iter().map(|value| field(value)));
        line.push(field(&plan.columns[step.column]));
        line.push(step.rep.to_string());
        line.push(config.cpus.to_string());
        line.push(field(&config.cmdline));
        line.extend(
            sample
                .values
                .iter()
                .map(|value| value.map_or(String::new(), |value| value.to_string())),
        );
        text.push_str(&line.join(","));
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::{Step, tests::small_plan};

    #[test]
    fn one_line_per_run_with_quoted_fields() {
        let mut plan = small_plan(1);
        plan.configs[0][1].cmdline = String::from("tlb=broadcast-sw exec=x:1,2");
        let samples = vec![
            Sample {
                step: Step {
                    row: 0,
                    column: 1,
                    rep: 1,
                },
                values: vec![Some(4560.5)],
                profile: None,
            },
            Sample {
                step: Step {
                    row: 1,
                    column: 0,
                    rep: 1,
                },
                values: vec![None],
                profile: None,
            },
        ];
        assert_eq!(
            write(&plan, &samples),
            "benchmark,tasks,mode,rep,smp,cmdline,x\n\
             test,1,broadcast-sw,1,2,\"tlb=broadcast-sw exec=x:1,2\",4560.5\n\
             test,2,ipi,1,2,,\n"
        );
    }
}
