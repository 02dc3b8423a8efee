//! The timeline as a picture for the book: one lane per CPU, each slice a
//! box in its CPU's lane (nested ones drawn inside their parent), an arrow
//! from each IPI's sender to the start of its receiver's handler, marks for
//! each INVLPGB, each CPU a request skipped and each switch that caught
//! up, a time axis in microseconds and a legend. It shows the [`Window`]
//! of the run asked for.

use std::fmt::Write;

use super::{
    TimelineError, Window,
    chrome::{RunInfo, slice_name},
    lanes::{Arrow, Instant, InstantKind, Lanes, Slice, SliceKind},
};
use crate::drawing::{escape, tick_step};
use kernel::timeline::Purpose;

const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 64.0;
const LANE: f64 = 72.0;
/// Below the lanes: the axis, its label, and the legend.
const BOTTOM: f64 = 134.0;
/// How far a nested slice's box sits inside its parent's.
const INSET: f64 = 13.0;
/// Labels need about this many pixels per character.
const CHAR_WIDTH: f64 = 6.2;
/// The narrowest box a slice gets: a handler of a few microseconds in a
/// window of milliseconds would otherwise be a sliver nobody sees (its
/// tooltip still gives its real length).
const MIN_SLICE_WIDTH: f64 = 3.0;
/// Marks of one kind closer than this on one lane are drawn as one, with
/// their count beside it: fifty rings a fraction of a pixel apart are a
/// smudge that nobody can count. Wide enough for the count's label
/// ("×52") to end before the next mark's.
const MERGE_DISTANCE: f64 = 28.0;

/// The colors of the slices and arrows; the legend names them.
const REQUEST: &str = "#cfe2f3";
const WAITING: &str = "#f9cb9c";
const HANDLER: &str = "#93c47d";
const BROADCAST_HANDLER: &str = "#b4a7d6";
const TLBSYNC: &str = "#e06666";
const FLUSH_IPI: &str = "#cc0000";
const BROADCAST_IPI: &str = "#674ea7";
const INVLPGB: &str = "#000000";
const SKIPPED: &str = "#777777";
const CAUGHT_UP: &str = "#38761d";

/// The picture of `window` of `lanes`, and how many shootdowns it shows.
pub fn draw(
    lanes: &Lanes,
    window: &Window,
    run: &RunInfo,
) -> Result<(String, usize), TimelineError> {
    let (from_ns, to_ns, title) = window.span(lanes)?;
    let shown = lanes.window(from_ns, to_ns);
    let drawn = shown.shootdowns().len();
    let canvas = Canvas {
        from_ns,
        to_ns: to_ns.max(from_ns + 1),
        cpus: lanes.cpus.max(1),
    };
    Ok((canvas.render(&shown, &title, run), drawn))
}

/// Where things go.
struct Canvas {
    from_ns: u64,
    to_ns: u64,
    cpus: usize,
}

impl Canvas {
    fn height(&self) -> f64 {
        TOP + LANE * self.cpus as f64 + BOTTOM
    }

    fn x(&self, ns: u64) -> f64 {
        let clamped = ns.clamp(self.from_ns, self.to_ns);
        LEFT + (clamped - self.from_ns) as f64 / (self.to_ns - self.from_ns) as f64
            * (WIDTH - LEFT - RIGHT)
    }

    fn lane_top(&self, cpu: usize) -> f64 {
        TOP + LANE * cpu as f64
    }

    fn render(&self, lanes: &Lanes, title: &str, run: &RunInfo) -> String {
        let mut svg = String::new();
        let _ = write!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{h}" viewBox="0 0 {WIDTH} {h}" font-family="sans-serif" font-size="12">
<defs><marker id="flush" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{FLUSH_IPI}"/></marker><marker id="broadcast" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{BROADCAST_IPI}"/></marker></defs>
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>
<text x="{LEFT}" y="42" fill="#555">kernel command line: {}</text>
"##,
            escape(title),
            escape(&run.command_line),
            h = self.height(),
        );
        self.lanes(&mut svg);
        for (slice, depth) in nesting(&lanes.slices) {
            self.slice(&mut svg, slice, depth);
        }
        for (instant, count) in self.merged(&lanes.instants) {
            self.instant(&mut svg, instant, count);
        }
        for arrow in &lanes.arrows {
            self.arrow(&mut svg, arrow);
        }
        self.axis(&mut svg);
        self.legend(&mut svg, lanes);
        svg.push_str("</svg>\n");
        svg
    }

    fn lanes(&self, svg: &mut String) {
        for cpu in 0..self.cpus {
            let top = self.lane_top(cpu);
            let fill = if cpu % 2 == 0 { "#f7f7f7" } else { "#ffffff" };
            let _ = writeln!(
                svg,
                r##"<rect x="{LEFT}" y="{top}" width="{}" height="{LANE}" fill="{fill}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end" font-weight="bold">CPU {cpu}</text>"##,
                WIDTH - LEFT - RIGHT,
                LEFT - 8.0,
                top + LANE / 2.0 + 4.0
            );
        }
    }

    fn slice(&self, svg: &mut String, slice: &Slice, depth: usize) {
        let (_, color, _) = slice_style(&slice.what);
        let inset = 4.0 + INSET * depth as f64;
        let top = self.lane_top(slice.cpu) + inset;
        let height = (LANE - 2.0 * inset).max(4.0);
        let x = self.x(slice.begin_ns);
        let width = (self.x(slice.end_ns) - x).max(MIN_SLICE_WIDTH);
        let label = slice_name(&slice.what);
        let tooltip = format!(
            "{label}: {:.2} us",
            (slice.end_ns - slice.begin_ns) as f64 / 1000.0
        );
        let _ = write!(
            svg,
            r##"<rect x="{x:.1}" y="{top:.1}" width="{width:.1}" height="{height:.1}" fill="{color}" stroke="#444" stroke-width="0.6"><title>{}</title></rect>"##,
            escape(&tooltip)
        );
        // A label only where it fits, on the top line of the box: the whole
        // name, or what follows its colon ("1 page" of a handler).
        let short = label.rsplit(": ").next().unwrap_or(&label);
        let fits = |text: &str| width > text.len() as f64 * CHAR_WIDTH + 6.0;
        if let Some(text) = [label.as_str(), short].into_iter().find(|text| fits(text)) {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="11">{}</text>"#,
                x + 3.0,
                top + 11.0,
                escape(text)
            );
        }
        svg.push('\n');
    }

    /// The instants as drawn: each with the number of marks it stands for,
    /// itself and the skips or catch-ups of its lane that follow it within
    /// [`MERGE_DISTANCE`].
    fn merged<'a>(&self, instants: &'a [Instant]) -> Vec<(&'a Instant, usize)> {
        let mut sorted: Vec<&Instant> = instants.iter().collect();
        sorted.sort_by_key(|instant| (instant.cpu, instant.ns));
        let mut drawn: Vec<(&Instant, usize)> = Vec::new();
        for instant in sorted {
            if let Some((first, count)) = drawn.last_mut()
                && first.cpu == instant.cpu
                && mergeable(&first.what, &instant.what)
                && self.x(instant.ns) - self.x(first.ns) < MERGE_DISTANCE
            {
                *count += 1;
                continue;
            }
            drawn.push((instant, 1));
        }
        drawn
    }

    /// A moment is a mark on its lane (see [`mark_style`]), with what it
    /// was in its tooltip, and the number of marks it stands for beside it
    /// if more than one; a decision outside a request (a promotion, a
    /// rollover) also has its name near the foot of the lane.
    fn instant(&self, svg: &mut String, instant: &Instant, count: usize) {
        let x = self.x(instant.ns);
        let top = self.lane_top(instant.cpu);
        let (shape, color, _) = mark_style(&instant.what);
        let (label, named) = match &instant.what {
            InstantKind::Invlpgb(operands) => (format!("INVLPGB {operands}"), false),
            InstantKind::Decision(decision) => (format!("{:?}", decision.reason), true),
            InstantKind::SwitchFlush { ctx, lazy } => (
                format!(
                    "{} address space {ctx}: flush",
                    if *lazy {
                        "back from lazy mode in"
                    } else {
                        "switch into"
                    }
                ),
                false,
            ),
            InstantKind::Skipped { by, ctx } => (
                match ctx {
                    Some(ctx) => format!("skipped by CPU {by}'s flush of address space {ctx}"),
                    None => format!("skipped by CPU {by}'s flush"),
                },
                false,
            ),
        };
        let tooltip = if count > 1 {
            format!("{count} times: {label}")
        } else {
            label.clone()
        };
        let _ = write!(svg, "{}", shape.draw(x, top, color, Some(&tooltip)));
        if count > 1 {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" fill="{color}">&#215;{count}</text>"#,
                x + 8.0,
                top + LANE / 2.0 - 8.0,
            );
        }
        // Its name at the foot of the lane, clear of the slices' labels;
        // in the right half it ends at the mark, so that it stays inside.
        if named {
            // Pointing up, from the foot of the lane to the mark at its top.
            let (glyph, label) = ("&#9650;", escape(&label));
            let (anchor, at, text) = if x > (LEFT + WIDTH - RIGHT) / 2.0 {
                ("end", x + 4.0, format!("{label} {glyph}"))
            } else {
                ("start", x - 4.0, format!("{glyph} {label}"))
            };
            // Above the lane's bottom border, not on it.
            let _ = write!(
                svg,
                r#"<text x="{at:.1}" y="{:.1}" font-size="11" fill="{color}" text-anchor="{anchor}">{text}</text>"#,
                top + LANE - 7.0,
            );
        }
        svg.push('\n');
    }

    fn arrow(&self, svg: &mut String, arrow: &Arrow) {
        let (color, marker, _) = arrow_style(arrow.purpose);
        let (x1, x2) = (self.x(arrow.sent_ns), self.x(arrow.received_ns));
        let from_middle = self.lane_top(arrow.from) + LANE / 2.0;
        let to_top = self.lane_top(arrow.to);
        // Into the near edge of the target lane.
        let y2 = if arrow.to > arrow.from {
            to_top + 4.0
        } else {
            to_top + LANE - 4.0
        };
        let tooltip = format!(
            "IPI from CPU {} to CPU {}: {:.2} us",
            arrow.from,
            arrow.to,
            arrow.received_ns.saturating_sub(arrow.sent_ns) as f64 / 1000.0
        );
        let _ = writeln!(
            svg,
            r#"<line x1="{x1:.1}" y1="{from_middle:.1}" x2="{x2:.1}" y2="{y2:.1}" stroke="{color}" stroke-width="1.6" marker-end="url(#{marker})"><title>{}</title></line>"#,
            escape(&tooltip)
        );
    }

    /// The time axis, in microseconds, or in milliseconds for a window of
    /// more than 20 ms (a run of shootdowns).
    fn axis(&self, svg: &mut String) {
        let bottom = self.lane_top(self.cpus);
        let (unit_ns, unit, short) = if self.to_ns - self.from_ns > 20_000_000 {
            (1_000_000.0, "milliseconds", "ms")
        } else {
            (1000.0, "microseconds", "us")
        };
        let span = (self.to_ns - self.from_ns) as f64 / unit_ns;
        let step = tick_step(span, 8.0);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="#000"/>"##,
            WIDTH - RIGHT
        );
        let mut tick = 0.0;
        while tick <= span + 1e-9 {
            let x = self.x(self.from_ns + (tick * unit_ns) as u64);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{:.1}" stroke="#000"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                bottom + 5.0,
                bottom + 18.0,
                format_tick(tick)
            );
            tick += step;
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{unit} from {:.1} {short} after boot (the kernel's clock)</text>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            bottom + 36.0,
            self.from_ns as f64 / unit_ns
        );
    }

    /// Names what the picture holds (and only that): the kinds of slice
    /// on one line, the kinds of arrow on the next, the marks on the third.
    fn legend(&self, svg: &mut String, lanes: &Lanes) {
        let y = self.lane_top(self.cpus) + 56.0;
        let mut styles: Vec<_> = lanes
            .slices
            .iter()
            .map(|slice| slice_style(&slice.what))
            .collect();
        styles.sort();
        styles.dedup();
        let mut x = LEFT;
        for (_, color, name) in styles {
            let _ = write!(
                svg,
                r##"<rect x="{x:.1}" y="{y:.1}" width="14" height="12" fill="{color}" stroke="#444" stroke-width="0.6"/><text x="{:.1}" y="{:.1}">{name}</text>"##,
                x + 18.0,
                y + 10.5
            );
            x += 18.0 + name.len() as f64 * CHAR_WIDTH + 22.0;
        }
        let y = y + 24.0;
        let mut x = LEFT;
        for purpose in [Purpose::Flush, Purpose::Broadcast] {
            if lanes.arrows.iter().any(|arrow| arrow.purpose == purpose) {
                let (color, marker, name) = arrow_style(purpose);
                let _ = write!(
                    svg,
                    r#"<line x1="{x:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.6" marker-end="url(#{marker})"/><text x="{:.1}" y="{:.1}">{name}</text>"#,
                    y + 6.0,
                    x + 26.0,
                    y + 6.0,
                    x + 32.0,
                    y + 10.5
                );
                x += 32.0 + name.len() as f64 * CHAR_WIDTH + 22.0;
            }
        }
        // The marks on a line of their own, if there was an arrow's.
        let y = if lanes.arrows.is_empty() { y } else { y + 24.0 };
        let mut x = LEFT;
        let mut marks: Vec<_> = lanes
            .instants
            .iter()
            .filter_map(|instant| {
                let (shape, color, name) = mark_style(&instant.what);
                Some((name?, shape, color))
            })
            .collect();
        marks.sort_by_key(|&(name, ..)| name);
        marks.dedup_by_key(|&mut (name, ..)| name);
        for (name, shape, color) in marks {
            // The shape as drawn in a lane, moved so that it sits on the line.
            let lane_top = y + 6.0 - LANE / 2.0;
            let top = match shape {
                Shape::Tick => y + 1.0,
                Shape::Ring | Shape::Diamond => lane_top,
            };
            let _ = write!(
                svg,
                r#"{}<text x="{:.1}" y="{:.1}">{name}</text>"#,
                shape.draw(x + 6.0, top, color, None),
                x + 16.0,
                y + 10.5
            );
            x += 16.0 + name.len() as f64 * CHAR_WIDTH + 22.0;
        }
        svg.push('\n');
    }
}

/// A kind of slice's place in the legend, its color and its legend name.
fn slice_style(what: &SliceKind) -> (u8, &'static str, &'static str) {
    match what {
        SliceKind::Request(_) => (0, REQUEST, "flush request"),
        SliceKind::Waiting { .. } => (1, WAITING, "waiting for answers"),
        SliceKind::Handler {
            purpose: Purpose::Flush,
            ..
        } => (2, HANDLER, "flush handler"),
        SliceKind::Handler {
            purpose: Purpose::Broadcast,
            ..
        } => (3, BROADCAST_HANDLER, "broadcast handler"),
        SliceKind::Tlbsync => (4, TLBSYNC, "TLBSYNC"),
    }
}

/// How a moment is marked on its lane.
#[derive(Clone, Copy)]
enum Shape {
    /// A small triangle at the top of the lane, pointing down.
    Tick,
    /// A hollow ring across the middle of the lane.
    Ring,
    /// A diamond across the middle of the lane.
    Diamond,
}

impl Shape {
    /// The mark at `x` in the lane whose top is `top`, with a tooltip.
    fn draw(self, x: f64, top: f64, color: &str, tooltip: Option<&str>) -> String {
        let title = tooltip.map_or(String::new(), |text| {
            format!("<title>{}</title>", escape(text))
        });
        let middle = top + LANE / 2.0;
        match self {
            Self::Tick => format!(
                r#"<path d="M{x:.1},{:.1} l-4,-7 h8 z" fill="{color}">{title}</path>"#,
                top + 9.0
            ),
            Self::Ring => format!(
                r#"<circle cx="{x:.1}" cy="{middle:.1}" r="5" fill="white" fill-opacity="0.6" stroke="{color}" stroke-width="1.5">{title}</circle>"#
            ),
            Self::Diamond => format!(
                r#"<path d="M{x:.1},{:.1} l6,7 l-6,7 l-6,-7 z" fill="{color}" stroke="white" stroke-width="0.8">{title}</path>"#,
                middle - 7.0
            ),
        }
    }
}

/// Whether marks of `a` and `b` may be drawn as one: both skips, or both
/// switches that caught up.
fn mergeable(a: &InstantKind, b: &InstantKind) -> bool {
    matches!(
        (a, b),
        (InstantKind::Skipped { .. }, InstantKind::Skipped { .. })
            | (
                InstantKind::SwitchFlush { .. },
                InstantKind::SwitchFlush { .. }
            )
    )
}

/// A kind of moment's mark, color and legend name (`None`: named in the
/// picture itself, not in the legend).
fn mark_style(what: &InstantKind) -> (Shape, &'static str, Option<&'static str>) {
    match what {
        InstantKind::Invlpgb(_) => (Shape::Tick, INVLPGB, Some("INVLPGB")),
        InstantKind::Decision(_) => (Shape::Tick, BROADCAST_IPI, None),
        InstantKind::Skipped { .. } => (
            Shape::Ring,
            SKIPPED,
            Some("skipped: lazy, or running another address space"),
        ),
        InstantKind::SwitchFlush { .. } => (
            Shape::Diamond,
            CAUGHT_UP,
            Some("switch that flushed: caught up"),
        ),
    }
}

/// A kind of arrow's color, marker and legend name.
fn arrow_style(purpose: Purpose) -> (&'static str, &'static str, &'static str) {
    match purpose {
        Purpose::Flush => (FLUSH_IPI, "flush", "flush IPI: sent, handler starts"),
        Purpose::Broadcast => (
            BROADCAST_IPI,
            "broadcast",
            "broadcast IPI (software INVLPGB)",
        ),
    }
}

/// `12`, `2.5`, `0.25`: a tick label without trailing zeros.
fn format_tick(value: f64) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Each slice with how deep it sits in its lane (0: outermost), drawn
/// outermost first.
fn nesting(slices: &[Slice]) -> Vec<(&Slice, usize)> {
    let mut sorted: Vec<&Slice> = slices.iter().collect();
    sorted.sort_by_key(|slice| (slice.cpu, slice.begin_ns, std::cmp::Reverse(slice.end_ns)));
    let mut open: Vec<&Slice> = Vec::new();
    let mut out = Vec::new();
    let mut cpu = usize::MAX;
    for slice in sorted {
        if slice.cpu != cpu {
            open.clear();
            cpu = slice.cpu;
        }
        while open
            .last()
            .is_some_and(|outer| outer.end_ns <= slice.begin_ns)
        {
            open.pop();
        }
        out.push((slice, open.len()));
        open.push(slice);
    }
    out
}
