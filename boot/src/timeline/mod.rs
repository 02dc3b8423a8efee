//! `cargo run -- --timeline DIR ...`: each CPU's view of every shootdown
//! of a run, as `DIR/timeline.json` (the Chrome Trace Event Format, which
//! Perfetto opens) and `DIR/timeline.svg` (a picture this crate draws, for
//! the book), with the kernel's raw event lines in `DIR/timeline.txt`
//! (the runner does not echo them: thousands of lines would bury the
//! run's own output).
//!
//! The kernel records the events with `tlb.timeline=on` and prints them at
//! the end of the run ([`kernel::timeline`] has their format); this module
//! reads them back, pairs them into slices, instants and IPI arrows
//! ([`lanes`]), writes both files, and checks the JSON it wrote against the
//! format ([`validate`]) before it says it wrote it.

pub mod chrome;
pub mod lanes;
pub mod svg;
pub mod validate;
pub mod window;

use std::{fmt, fs, io, path::Path};

use kernel::timeline::{Summary, parse_lines};

pub use kernel::timeline::{END_PREFIX, PREFIX as EVENT_PREFIX};

pub use chrome::RunInfo;
pub use lanes::Lanes;
pub use window::Window;

/// What [`write()`] wrote.
#[derive(Debug)]
pub struct Written {
    pub summary: Summary,
    pub counts: validate::Counts,
    /// The shootdowns in the picture, of all the run had.
    pub drawn_shootdowns: usize,
    pub shootdowns: usize,
}

/// Why no timeline was written.
#[derive(Debug)]
pub enum TimelineError {
    /// The run printed no `timeline-end:` line.
    NotRecorded,
    /// A timeline line does not parse (its number in the output, from 1).
    BadLine {
        line: usize,
        why: String,
    },
    /// The window asks for a shootdown the run does not have.
    NoSuchShootdown {
        asked: usize,
        shootdowns: usize,
    },
    /// The window asks for a promotion, and no address space was promoted.
    NoPromotion,
    /// The window asks for a skipped CPU that caught up, and none did.
    NoCatchUp,
    /// The JSON written breaks the format (a bug of this crate).
    Invalid(Vec<String>),
    Io(io::Error),
}

impl fmt::Display for TimelineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotRecorded => write!(
                f,
                "the kernel printed no timeline (it records one with tlb.timeline=on; a \
                 run that ends before its totals, or a heap too small for the buffers, \
                 prints none)"
            ),
            Self::BadLine { line, why } => write!(f, "output line {line}: {why}"),
            Self::NoSuchShootdown { asked, shootdowns } => write!(
                f,
                "the window asks for shootdown {asked}, and the run had {shootdowns}"
            ),
            Self::NoPromotion => write!(
                f,
                "the window asks for a promotion, and the run promoted no address space \
                 (it takes a broadcast mode and tlb.promote CPUs running one process)"
            ),
            Self::NoCatchUp => write!(
                f,
                "the window asks for a CPU that flushes skipped and that caught up at a later \
                 switch, and no CPU did (a lazy CPU that comes back, as in tlbtest lazy, does)"
            ),
            Self::Invalid(problems) => write!(
                f,
                "the trace written breaks the Chrome trace format: {}",
                problems.join("; ")
            ),
            Self::Io(error) => write!(f, "{error}"),
        }
    }
}

impl From<io::Error> for TimelineError {
    fn from(error: io::Error) -> Self {
        Self::Io(error)
    }
}

/// Reads the timeline in `output` (a run's serial lines) and writes
/// `dir/timeline.json` (everything), `dir/timeline.svg` (`window` of it)
/// and `dir/timeline.txt` (the event lines as the kernel printed them).
pub fn write<'a>(
    dir: &Path,
    output: impl IntoIterator<Item = &'a str> + Clone,
    run: &RunInfo,
    window: &Window,
) -> Result<Written, TimelineError> {
    let raw: String = output
        .clone()
        .into_iter()
        .filter(|line| line.starts_with(EVENT_PREFIX) || line.starts_with(END_PREFIX))
        .flat_map(|line| [line, "\n"])
        .collect();
    let (events, summary) = parse_lines(output).map_err(|(line, why)| TimelineError::BadLine {
        line,
        why: why.to_string(),
    })?;
    let summary = summary.ok_or(TimelineError::NotRecorded)?;
    let mut lanes = Lanes::from_events(&events);
    // A CPU that took no part still gets its (empty) lane.
    lanes.cpus = lanes.cpus.max(summary.cpus);
    let run = RunInfo {
        dropped: summary.dropped,
        ..run.clone()
    };
    let trace = chrome::trace(&lanes, &run);
    let counts = validate::validate(&trace).map_err(TimelineError::Invalid)?;
    let shootdowns = lanes.shootdowns().len();
    let (picture, drawn_shootdowns) = svg::draw(&lanes, window, &run)?;
    fs::create_dir_all(dir)?;
    fs::write(
        dir.join("timeline.json"),
        serde_json::to_string(&trace).expect("a JSON value serializes"),
    )?;
    fs::write(dir.join("timeline.svg"), picture)?;
    fs::write(dir.join("timeline.txt"), raw)?;
    Ok(Written {
        summary,
        counts,
        drawn_shootdowns,
        shootdowns,
    })
}

#[cfg(test)]
mod tests;
