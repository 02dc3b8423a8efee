//! The benchmark's tables, as Markdown (readable in a terminal, pasted
//! as-is into `docs/BENCHMARKS.md`).
//!
//! Two shapes:
//! - [`comparison`]: one metric, rows × compared columns, like the seed's
//!   `threads | tip | INVLPGB` table. Each cell is the median over the
//!   repeats with the spread `(min..max)`; then, for every column after the
//!   first, its ratio to the first. Because the columns of a repeat ran
//!   next to each other, the ratio is taken per repeat (a *paired* ratio)
//!   and shown as the median of those, with their spread.
//! - [`details`]: one line per cell, one column per metric (medians over
//!   the repeats): the counters that explain the comparison.

use super::{
    plan::{Format, Plan, Sample},
    stats::Spread,
};

/// Three significant digits, with `k` and `M` for thousands and millions.
fn significant(value: f64) -> String {
    let (scaled, suffix) = match value.abs() {
        v if v >= 1e6 => (value / 1e6, "M"),
        v if v >= 1e3 => (value / 1e3, "k"),
        _ => (value, ""),
    };
    let decimals = match scaled.abs() {
        v if v >= 100.0 => 0,
        v if v >= 10.0 => 1,
        _ => 2,
    };
    if suffix.is_empty() && scaled.fract() == 0.0 {
        format!("{scaled:.0}")
    } else {
        format!("{scaled:.decimals$}{suffix}")
    }
}

/// A value as `format` says.
pub fn format_value(format: Format, value: f64) -> String {
    match format {
        Format::Count => significant(value),
        Format::Ratio => format!("{value:.3}"),
        Format::Nanos => match value {
            v if v >= 1e9 => format!("{} s", significant(v / 1e9)),
            v if v >= 1e6 => format!("{} ms", significant(v / 1e6)),
            v if v >= 1e3 => format!("{} µs", significant(v / 1e3)),
            v => format!("{v:.0} ns"),
        },
    }
}

/// `median (min..max)`, or just the value when all repeats agree or there
/// is one; `-` for no values.
fn spread_cell(format: Format, spread: Option<Spread>) -> String {
    match spread {
        None => String::from("-"),
        Some(spread) if spread.count == 1 || spread.min == spread.max => {
            format_value(format, spread.median)
        }
        Some(spread) => format!(
            "{} ({}..{})",
            format_value(format, spread.median),
            format_value(format, spread.min),
            format_value(format, spread.max)
        ),
    }
}

/// A Markdown table with padded columns.
fn markdown(headers: &[String], lines: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..headers.len())
        .map(|column| {
            lines
                .iter()
                .map(|line| line[column].chars().count())
                .chain([headers[column].chars().count(), 3])
                .max()
                .unwrap_or(3)
        })
        .collect();
    let row = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(cell, &width)| format!("{cell:<width$}"))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let rule: Vec<String> = widths.iter().map(|&width| "-".repeat(width)).collect();
    let mut text = row(headers);
    text.push_str(&row(&rule));
    for line in lines {
        text.push_str(&row(line));
    }
    text
}

/// The per-repeat ratios of `column` to column 0 in `row` for metric `index`.
fn paired_ratios(
    plan: &Plan,
    samples: &[Sample],
    row: usize,
    column: usize,
    index: usize,
) -> Vec<f64> {
    let value = |column: usize, rep: usize| {
        samples
            .iter()
            .find(|sample| {
                sample.step.row == row && sample.step.column == column && sample.step.rep == rep
            })
            .and_then(|sample| sample.values[index])
    };
    (1..=plan.repeat)
        .filter_map(|rep| match (value(column, rep), value(0, rep)) {
            (Some(value), Some(base)) if base != 0.0 => Some(value / base),
            _ => None,
        })
        .collect()
}

/// The comparison table of metric `key` (see the module docs), with a
/// title line.
pub fn comparison(plan: &Plan, samples: &[Sample], key: &str, what: &str) -> String {
    let index = plan.metric(key);
    let format = plan.workload.metrics[index].format;
    let mut headers: Vec<String> = plan.row_fields.iter().map(|f| f.to_string()).collect();
    headers.extend(plan.columns.iter().cloned());
    headers.extend(
        plan.columns[1..]
            .iter()
            .map(|column| format!("{column} / {}", plan.columns[0])),
    );
    let lines: Vec<Vec<String>> = plan
        .rows
        .iter()
        .enumerate()
        .map(|(row, row_values)| {
            let mut line = row_values.clone();
            for column in 0..plan.columns.len() {
                let spread = Spread::of(plan.values(samples, row, column, index));
                line.push(spread_cell(format, spread));
            }
            for column in 1..plan.columns.len() {
                let ratios = Spread::of(paired_ratios(plan, samples, row, column, index));
                line.push(match ratios {
                    None => String::from("-"),
                    Some(r) if r.count == 1 => format!("{:.2}", r.median),
                    Some(r) => format!("{:.2} ({:.2}..{:.2})", r.median, r.min, r.max),
                });
            }
            line
        })
        .collect();
    format!(
        "{}: {what}, median of {} runs (min..max)\n\n{}",
        plan.title,
        plan.repeat,
        markdown(&headers, &lines)
    )
}

/// The details table of metrics `keys` (see the module docs), with a title
/// line.
pub fn details(plan: &Plan, samples: &[Sample], keys: &[&str], what: &str) -> String {
    let indices: Vec<usize> = keys.iter().map(|key| plan.metric(key)).collect();
    let mut headers: Vec<String> = plan.row_fields.iter().map(|f| f.to_string()).collect();
    headers.push(plan.column_field.to_string());
    headers.extend(
        indices
            .iter()
            .map(|&index| plan.workload.metrics[index].heading.to_string()),
    );
    let mut lines = Vec::new();
    for (row, row_values) in plan.rows.iter().enumerate() {
        for (column, column_value) in plan.columns.iter().enumerate() {
            let mut line = row_values.clone();
            line.push(column_value.clone());
            for &index in &indices {
                let format = plan.workload.metrics[index].format;
                line.push(
                    Spread::of(plan.values(samples, row, column, index))
                        .map_or(String::from("-"), |spread| {
                            format_value(format, spread.median)
                        }),
                );
            }
            lines.push(line);
        }
    }
    format!(
        "{}: {what}, medians of {} runs\n\n{}",
        plan.title,
        plan.repeat,
        markdown(&headers, &lines)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::{Step, tests::small_plan};

    fn sample(row: usize, column: usize, rep: usize, x: f64) -> Sample {
        Sample {
            step: Step { row, column, rep },
            values: vec![Some(x)],
            profile: None,
        }
    }

    #[test]
    fn values_print_with_three_significant_digits() {
        assert_eq!(format_value(Format::Count, 4560.0), "4.56k");
        assert_eq!(format_value(Format::Count, 123_456.0), "123k");
        assert_eq!(format_value(Format::Count, 1_267_000.0), "1.27M");
        assert_eq!(format_value(Format::Count, 812.0), "812");
        assert_eq!(format_value(Format::Count, 0.5), "0.50");
        assert_eq!(format_value(Format::Ratio, 2.0), "2.000");
        assert_eq!(format_value(Format::Nanos, 850.0), "850 ns");
        assert_eq!(format_value(Format::Nanos, 47_103.0), "47.1 µs");
        assert_eq!(format_value(Format::Nanos, 81_234_567.0), "81.2 ms");
        assert_eq!(format_value(Format::Nanos, 2.5e9), "2.50 s");
    }

    #[test]
    fn comparison_shows_medians_spreads_and_paired_ratios() {
        let plan = small_plan(3);
        let mut samples = Vec::new();
        for (rep, (ipi, bsw)) in [(100.0, 150.0), (110.0, 220.0), (90.0, 180.0)]
            .into_iter()
            .enumerate()
        {
            samples.push(sample(0, 0, rep + 1, ipi));
            samples.push(sample(0, 1, rep + 1, bsw));
        }
        let table = comparison(&plan, &samples, "x", "things/s");
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "test: things/s, median of 3 runs (min..max)");
        assert!(lines[2].starts_with("| tasks | ipi "), "{table}");
        assert!(lines[2].contains("| broadcast-sw / ipi"), "{table}");
        // Row 1: ipi 90, 100, 110; broadcast-sw 150, 180, 220; the paired
        // ratios are 1.5, 2.0, 2.0.
        let row = lines[4];
        assert!(row.contains("| 100 (90..110) "), "{row}");
        assert!(row.contains("| 180 (150..220) "), "{row}");
        assert!(row.contains("| 2.00 (1.50..2.00) "), "{row}");
        // Row 2 ran nothing: dashes, not numbers.
        assert!(lines[5].starts_with("| 2     | -"), "{}", lines[5]);
    }

    #[test]
    fn details_list_every_cell() {
        let plan = small_plan(1);
        let samples = vec![sample(0, 0, 1, 5.0), sample(1, 1, 1, 7000.0)];
        let table = details(&plan, &samples, &["x"], "counters");
        assert!(
            table.contains("| tasks | mode         | x/s   |"),
            "{table}"
        );
        assert!(
            table.contains("| 1     | ipi          | 5     |"),
            "{table}"
        );
        assert!(
            table.contains("| 2     | broadcast-sw | 7.00k |"),
            "{table}"
        );
        assert_eq!(table.lines().count(), 2 + 2 + 4);
    }
}
