//! The timeline as a picture for the book: one lane per CPU, each slice a
//! box in its CPU's lane (nested ones drawn inside their parent), an arrow
//! from each IPI's sender to the start of its receiver's handler, a tick
//! for each INVLPGB, a time axis in microseconds and a legend.
//!
//! A whole run is thousands of shootdowns; the picture shows a window of it
//! ([`Window`]): by default a typical shootdown (a flush request that sent
//! IPIs, of median length), or the N-th, or a span of time, so that one
//! shootdown fills the width.

use std::fmt::Write;

use super::{
    TimelineError,
    chrome::{RunInfo, plural, slice_name},
    lanes::{Arrow, InstantKind, Lanes, Slice, SliceKind},
};
use crate::drawing::{escape, tick_step};
use kernel::timeline::{Purpose, TraceReason};

/// Which part of the run the picture shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Window {
    /// The N-th shootdown (from 1), with a margin around it.
    Shootdown(usize),
    /// The run's last shootdown.
    Last,
    /// The shootdown in which an address space was promoted to a global
    /// ASID, and the two after it (the transition, then a broadcast).
    Promotion,
    /// The shootdown of median length: a typical one, where the first may
    /// be slow (cold caches) and any one may have waited for the host to
    /// run a virtual CPU.
    #[default]
    Typical,
    /// From..to, in microseconds since boot (the JSON's times).
    Span { from_us: f64, to_us: f64 },
    /// Everything.
    All,
}

impl Window {
    /// `N` (the N-th shootdown), `typical`, `last`, `promotion`, `FROM..TO`
    /// (microseconds since boot) or `all`, as `--timeline-window` takes it.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "all" => return Ok(Self::All),
            "typical" => return Ok(Self::Typical),
            "last" => return Ok(Self::Last),
            "promotion" => return Ok(Self::Promotion),
            _ => {}
        }
        if let Some((from, to)) = text.split_once("..") {
            let number = |text: &str| text.trim().parse::<f64>().ok().filter(|v| v.is_finite());
            return match (number(from), number(to)) {
                (Some(from_us), Some(to_us)) if from_us < to_us => {
                    Ok(Self::Span { from_us, to_us })
                }
                _ => Err(format!(
                    "'{text}' is not FROM..TO with FROM below TO (microseconds since boot)"
                )),
            };
        }
        match text.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Self::Shootdown(n)),
            _ => Err(format!(
                "'{text}' is not a shootdown number (1, 2, ...), typical, last, promotion, FROM..TO in microseconds, or all"
            )),
        }
    }
}

const WIDTH: f64 = 960.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 64.0;
const LANE: f64 = 72.0;
/// Below the lanes: the axis, its label, and the legend.
const BOTTOM: f64 = 110.0;
/// How far a nested slice's box sits inside its parent's.
const INSET: f64 = 13.0;
/// Labels need about this many pixels per character.
const CHAR_WIDTH: f64 = 6.2;

/// The colors of the slices and arrows; the legend names them.
const REQUEST: &str = "#cfe2f3";
const WAITING: &str = "#f9cb9c";
const HANDLER: &str = "#93c47d";
const BROADCAST_HANDLER: &str = "#b4a7d6";
const TLBSYNC: &str = "#e06666";
const FLUSH_IPI: &str = "#cc0000";
const BROADCAST_IPI: &str = "#674ea7";
const INVLPGB: &str = "#000000";

/// The picture of `window` of `lanes`, and how many shootdowns it shows.
pub fn draw(
    lanes: &Lanes,
    window: &Window,
    run: &RunInfo,
) -> Result<(String, usize), TimelineError> {
    let shootdowns = lanes.shootdowns();
    let (from_ns, to_ns, title) = span_of(window, lanes, &shootdowns)?;
    let shown = lanes.window(from_ns, to_ns);
    let drawn = shown.shootdowns().len();
    let canvas = Canvas {
        from_ns,
        to_ns: to_ns.max(from_ns + 1),
        cpus: lanes.cpus.max(1),
    };
    Ok((canvas.render(&shown, &title, run), drawn))
}

/// The part of the run `window` asks for, and the picture's title.
fn span_of(
    window: &Window,
    lanes: &Lanes,
    shootdowns: &[&Slice],
) -> Result<(u64, u64, String), TimelineError> {
    let numbered = |n: usize| {
        shootdowns
            .get(n.wrapping_sub(1))
            .ok_or(TimelineError::NoSuchShootdown {
                asked: n,
                shootdowns: shootdowns.len(),
            })
    };
    let with_margin = |first: &Slice, last: &Slice| {
        let margin = (last.end_ns - first.begin_ns) / 10 + 1;
        (first.begin_ns.saturating_sub(margin), last.end_ns + margin)
    };
    let one = |n: usize, how: &str| -> Result<(u64, u64, String), TimelineError> {
        let shootdown = numbered(n)?;
        let (from, to) = with_margin(shootdown, shootdown);
        let title = format!(
            "Shootdown {n} of {}{how}: {}",
            shootdowns.len(),
            describe(shootdown)
        );
        Ok((from, to, title))
    };
    match *window {
        Window::Shootdown(n) => one(n, ""),
        Window::Last => one(shootdowns.len(), " (the last)"),
        Window::Typical => one(
            median_shootdown(shootdowns).unwrap_or(1),
            " (of median length)",
        ),
        Window::Promotion => {
            let first = promotion_shootdown(lanes, shootdowns).ok_or(TimelineError::NoPromotion)?;
            let last = (first + 2).min(shootdowns.len());
            let (from, to) = with_margin(numbered(first)?, numbered(last)?);
            let title = format!(
                "A promotion, in shootdown {first} of {}, and the shootdowns up to {last}",
                shootdowns.len()
            );
            Ok((from, to, title))
        }
        Window::Span { from_us, to_us } => Ok((
            (from_us * 1000.0) as u64,
            (to_us * 1000.0) as u64,
            format!("{from_us} us to {to_us} us after boot"),
        )),
        Window::All => {
            let (first, last) = lanes.span().unwrap_or((0, 1));
            Ok((first, last.max(first + 1), "The whole run".to_string()))
        }
    }
}

/// The number (from 1) of the first shootdown that holds, or follows, the
/// run's first promotion.
fn promotion_shootdown(lanes: &Lanes, shootdowns: &[&Slice]) -> Option<usize> {
    let promotion = lanes.instants.iter().find(|instant| {
        matches!(instant.what, InstantKind::Decision(decision) if decision.reason == TraceReason::Promotion)
    })?;
    shootdowns
        .iter()
        .position(|shootdown| shootdown.end_ns >= promotion.ns)
        .map(|index| index + 1)
}

/// The number (from 1) of the shootdown whose length is the median.
fn median_shootdown(shootdowns: &[&Slice]) -> Option<usize> {
    let mut by_length: Vec<usize> = (0..shootdowns.len()).collect();
    by_length.sort_by_key(|&index| shootdowns[index].end_ns - shootdowns[index].begin_ns);
    by_length.get(by_length.len() / 2).map(|index| index + 1)
}

/// "CPU 0 flushes address space 2, 1 page (Ipi)".
fn describe(request: &Slice) -> String {
    let SliceKind::Request(decision) = &request.what else {
        return slice_name(&request.what);
    };
    let Some(decision) = decision else {
        return format!("CPU {} flushes", request.cpu);
    };
    let space = decision
        .ctx
        .map_or("the kernel's mappings".to_string(), |ctx| {
            format!("address space {ctx}")
        });
    let range = match decision.range {
        Some((start, end)) => {
            let pages = (end - start).div_ceil(4096);
            format!("{pages} page{}", plural(pages))
        }
        None => "everything".to_string(),
    };
    format!(
        "CPU {} flushes {space}, {range} ({:?})",
        request.cpu, decision.reason
    )
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
        for instant in &lanes.instants {
            self.instant(&mut svg, instant);
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
        let width = (self.x(slice.end_ns) - x).max(1.0);
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

    /// An INVLPGB is a small black mark at the top of its lane; a decision
    /// outside a request (a promotion, a rollover) a mark with its name.
    fn instant(&self, svg: &mut String, instant: &super::lanes::Instant) {
        let x = self.x(instant.ns);
        let top = self.lane_top(instant.cpu);
        let (label, color, named) = match &instant.what {
            InstantKind::Invlpgb(operands) => (format!("INVLPGB {operands}"), INVLPGB, false),
            InstantKind::Decision(decision) => {
                (format!("{:?}", decision.reason), BROADCAST_IPI, true)
            }
        };
        let _ = write!(
            svg,
            r#"<path d="M{x:.1},{:.1} l-4,-7 h8 z" fill="{color}"><title>{}</title></path>"#,
            top + 9.0,
            escape(&label)
        );
        // Its name at the foot of the lane, clear of the slices' labels.
        if named {
            let _ = write!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" font-size="11" fill="{color}">&#9650; {}</text>"#,
                x - 4.0,
                top + LANE - 3.0,
                escape(&label)
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

    fn axis(&self, svg: &mut String) {
        let bottom = self.lane_top(self.cpus);
        let span_us = (self.to_ns - self.from_ns) as f64 / 1000.0;
        let step = tick_step(span_us, 8.0);
        let _ = writeln!(
            svg,
            r##"<line x1="{LEFT}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="#000"/>"##,
            WIDTH - RIGHT
        );
        let mut tick = 0.0;
        while tick <= span_us + 1e-9 {
            let x = self.x(self.from_ns + (tick * 1000.0) as u64);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{bottom}" x2="{x:.1}" y2="{:.1}" stroke="#000"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                bottom + 5.0,
                bottom + 18.0,
                format_us(tick)
            );
            tick += step;
        }
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">microseconds from {:.1} us after boot (the kernel's clock)</text>"#,
            (LEFT + WIDTH - RIGHT) / 2.0,
            bottom + 36.0,
            self.from_ns as f64 / 1000.0
        );
    }

    /// Names what the picture holds (and only that): the kinds of slice
    /// on one line, the kinds of arrow and the INVLPGB mark on the next.
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
        let invlpgb =
            |instant: &super::lanes::Instant| matches!(instant.what, InstantKind::Invlpgb(_));
        if lanes.instants.iter().any(invlpgb) {
            let _ = write!(
                svg,
                r#"<path d="M{:.1},{:.1} l-4,-7 h8 z" fill="{INVLPGB}"/><text x="{:.1}" y="{:.1}">INVLPGB</text>"#,
                x + 4.0,
                y + 10.0,
                x + 14.0,
                y + 10.5
            );
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
fn format_us(us: f64) -> String {
    let text = format!("{us:.2}");
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
