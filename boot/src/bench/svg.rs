//! A line plot as a self-contained SVG file, written by hand: one line per
//! series through the medians, a vertical bar from min to max at every
//! point, category labels on the x axis, and a legend. Any browser shows
//! it; no plotting library is needed for a handful of points.
//!
//! The y axis starts at zero, so heights compare as ratios, unless the
//! values span more than [`LOG_SPAN`] times from smallest to largest (a
//! shootdown-bound benchmark falls from thousands of iterations per second
//! to tens): then it is logarithmic, where equal ratios are equal
//! distances and small values stay visible.

use std::fmt::Write;

use super::stats::Spread;
use crate::drawing::{self, escape};

/// One line of the plot: its points, one per x category (`None`: no data).
pub struct Series {
    pub name: String,
    pub points: Vec<Option<Spread>>,
}

/// What to draw.
pub struct Plot<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub categories: &'a [String],
    pub series: &'a [Series],
    /// Prints a y-axis tick value.
    pub format_y: fn(f64) -> String,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 440.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 190.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
];
/// About this many steps on a linear axis.
const Y_TICKS: f64 = 5.0;
/// From this ratio of the largest to the smallest value on, the axis is
/// logarithmic.
const LOG_SPAN: f64 = 20.0;

/// A round step for a linear y axis up to `max`.
fn tick_step(max: f64) -> f64 {
    drawing::tick_step(max, Y_TICKS)
}

/// How values map to heights.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scale {
    /// From 0 to `ticks` steps of `step`.
    Linear { step: f64, ticks: u32 },
    /// From `10^low` to `10^high`.
    Log { low: i32, high: i32 },
}

impl Scale {
    /// The scale for values from `min` to `max`.
    fn fitting(min: f64, max: f64) -> Self {
        if min > 0.0 && max / min > LOG_SPAN {
            Self::Log {
                low: min.log10().floor() as i32,
                high: max.log10().ceil() as i32,
            }
        } else {
            let step = tick_step(max);
            Self::Linear {
                step,
                ticks: ((max / step).ceil() as u32).max(1),
            }
        }
    }

    /// Where `value` lies, from 0 (bottom) to 1 (top).
    fn fraction(self, value: f64) -> f64 {
        match self {
            Self::Linear { step, ticks } => value / (step * f64::from(ticks)),
            Self::Log { low, high } => {
                (value.max(f64::MIN_POSITIVE).log10() - f64::from(low)) / f64::from(high - low)
            }
        }
    }

    /// Grid lines: `(value, labelled)`.
    fn grid(self) -> Vec<(f64, bool)> {
        match self {
            Self::Linear { step, ticks } => (0..=ticks)
                .map(|tick| (step * f64::from(tick), true))
                .collect(),
            Self::Log { low, high } => (low..=high)
                .flat_map(|exponent| {
                    let power = 10f64.powi(exponent);
                    let minor = if exponent < high {
                        vec![(2.0 * power, false), (5.0 * power, false)]
                    } else {
                        vec![]
                    };
                    std::iter::once((power, true)).chain(minor)
                })
                .collect(),
        }
    }
}

impl Plot<'_> {
    /// The SVG document.
    pub fn render(&self) -> String {
        let spreads = || {
            self.series
                .iter()
                .flat_map(|series| series.points.iter().flatten())
        };
        let top_value = spreads().map(|spread| spread.max).fold(0.0, f64::max);
        let bottom_value = spreads()
            .map(|spread| spread.min)
            .fold(f64::INFINITY, f64::min);
        let scale = Scale::fitting(bottom_value, top_value);
        let plot_width = WIDTH - LEFT - RIGHT;
        let plot_height = HEIGHT - TOP - BOTTOM;
        let slot = plot_width / self.categories.len().max(1) as f64;
        let x = |index: usize| LEFT + (index as f64 + 0.5) * slot;
        let y = |value: f64| TOP + plot_height * (1.0 - scale.fraction(value));
        let y_label = match scale {
            Scale::Linear { .. } => self.y_label.to_string(),
            Scale::Log { .. } => format!("{} (log scale)", self.y_label),
        };

        let mut svg = String::new();
        // Writing into a String cannot fail.
        let _ = writeln!(
            svg,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            svg,
            r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
        );
        let _ = writeln!(
            svg,
            r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
            LEFT + plot_width / 2.0,
            escape(self.title)
        );
        // Horizontal grid lines and y ticks.
        for (value, labelled) in scale.grid() {
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="{2}"/>"##,
                y(value),
                LEFT + plot_width,
                if labelled { "#ccc" } else { "#eee" },
            );
            if labelled {
                let _ = write!(
                    svg,
                    r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                    LEFT - 6.0,
                    y(value) + 4.0,
                    escape(&(self.format_y)(value))
                );
            }
            svg.push('\n');
        }
        // Axes and their labels.
        let _ = writeln!(
            svg,
            r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{0:.1}" stroke="black"/><line x1="{LEFT}" y1="{0:.1}" x2="{1:.1}" y2="{0:.1}" stroke="black"/>"#,
            TOP + plot_height,
            LEFT + plot_width
        );
        for (index, category) in self.categories.iter().enumerate() {
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                x(index),
                TOP + plot_height + 18.0,
                escape(category)
            );
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            LEFT + plot_width / 2.0,
            HEIGHT - 16.0,
            escape(self.x_label)
        );
        let _ = writeln!(
            svg,
            r#"<text transform="translate(18 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            TOP + plot_height / 2.0,
            escape(&y_label)
        );
        // The series: spread bars, the line through the medians, the points.
        for (number, series) in self.series.iter().enumerate() {
            let color = COLORS[number % COLORS.len()];
            let mut line = Vec::new();
            for (index, point) in series.points.iter().enumerate() {
                let Some(spread) = point else { continue };
                let px = x(index);
                line.push(format!("{px:.1},{:.1}", y(spread.median)));
                let _ = writeln!(
                    svg,
                    r#"<line x1="{px:.1}" y1="{0:.1}" x2="{px:.1}" y2="{1:.1}" stroke="{color}"/><line x1="{2:.1}" y1="{0:.1}" x2="{3:.1}" y2="{0:.1}" stroke="{color}"/><line x1="{2:.1}" y1="{1:.1}" x2="{3:.1}" y2="{1:.1}" stroke="{color}"/>"#,
                    y(spread.min),
                    y(spread.max),
                    px - 4.0,
                    px + 4.0
                );
                let _ = writeln!(
                    svg,
                    r#"<circle cx="{px:.1}" cy="{:.1}" r="3.5" fill="{color}"/>"#,
                    y(spread.median)
                );
            }
            let _ = writeln!(
                svg,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                line.join(" ")
            );
            let legend_y = TOP + 10.0 + 22.0 * number as f64;
            let legend_x = LEFT + plot_width + 20.0;
            let _ = writeln!(
                svg,
                r#"<line x1="{legend_x:.1}" y1="{legend_y:.1}" x2="{:.1}" y2="{legend_y:.1}" stroke="{color}" stroke-width="2"/><text x="{:.1}" y="{:.1}">{}</text>"#,
                legend_x + 24.0,
                legend_x + 30.0,
                legend_y + 4.0,
                escape(&series.name)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(median: f64, min: f64, max: f64) -> Option<Spread> {
        Some(Spread {
            median,
            min,
            max,
            count: 3,
        })
    }

    #[test]
    fn ticks_are_round_and_cover_the_data() {
        assert_eq!(tick_step(1000.0), 200.0);
        assert_eq!(tick_step(1100.0), 250.0);
        assert_eq!(tick_step(4.2), 1.0);
        assert_eq!(tick_step(0.0), 1.0);
        for max in [0.3, 7.0, 99.0, 12_345.0, 1.27e6] {
            assert!(tick_step(max) * Y_TICKS >= max, "{max}");
        }
    }

    #[test]
    fn wide_ranges_get_a_log_axis() {
        assert_eq!(
            Scale::fitting(0.0, 1000.0),
            Scale::Linear {
                step: 200.0,
                ticks: 5
            }
        );
        // The axis ends at the first step past the data, not at 5 steps.
        assert_eq!(
            Scale::fitting(100.0, 530.0),
            Scale::Linear {
                step: 200.0,
                ticks: 3
            }
        );
        let log = Scale::fitting(9.0, 5300.0);
        assert_eq!(log, Scale::Log { low: 0, high: 4 });
        assert_eq!(log.fraction(1.0), 0.0);
        assert_eq!(log.fraction(100.0), 0.5);
        assert_eq!(log.fraction(10_000.0), 1.0);
        let labelled: Vec<f64> = log
            .grid()
            .into_iter()
            .filter_map(|(value, labelled)| labelled.then_some(value))
            .collect();
        assert_eq!(labelled, [1.0, 10.0, 100.0, 1000.0, 10_000.0]);
    }

    #[test]
    fn one_line_per_series_through_its_points() {
        let categories: Vec<String> = ["1", "2", "4"].map(String::from).to_vec();
        let series = [
            Series {
                name: String::from("ipi"),
                points: vec![spread(10.0, 9.0, 11.0), spread(20.0, 18.0, 21.0), None],
            },
            Series {
                name: String::from("a<b & c"),
                points: vec![spread(5.0, 5.0, 5.0); 3],
            },
        ];
        let svg = Plot {
            title: "t",
            x_label: "tasks",
            y_label: "iterations/s",
            categories: &categories,
            series: &series,
            format_y: |value| format!("{value}"),
        }
        .render();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        let polylines: Vec<&str> = svg
            .lines()
            .filter(|line| line.starts_with("<polyline"))
            .collect();
        assert_eq!(polylines.len(), 2);
        // The first series skips its missing third point.
        let points = polylines[0].split('"').nth(1).unwrap();
        assert_eq!(points.split(' ').count(), 2, "{points}");
        assert_eq!(svg.matches("<circle").count(), 5);
        assert!(svg.contains("a&lt;b &amp; c"));
        assert!(!svg.contains("a<b"));
    }
}
