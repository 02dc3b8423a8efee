//! What a sampling profile says, and how it is printed and read back.
//!
//! The profiler ([`crate::profiler`], on the machine) interrupts every CPU a
//! thousand or more times a second and notes what it was doing: running
//! ring 3 (**user**), idling (**idle**), or running kernel code at some
//! instruction address, which the kernel's own symbol table turns into a
//! function name. Counting samples per function says where the time went: a
//! function with 20% of the samples ran for about 20% of the time.
//!
//! A profile from the timer has one blind spot, and the report shows it
//! instead of hiding it: the timer interrupt cannot land while interrupts
//! are off (trap entry up to the handler's `sti`, the flush IPI handler,
//! the scheduler, every `without_interrupts` section). It is held until
//! they are turned back on, and the sample then lands on the instruction
//! after that point. The profiler recognises such a sample in two ways: it
//! lands right after an `sti` instruction (the byte before the address is
//! STI's opcode, 0xfb), or the APIC timer had counted on for more than a
//! quarter period since it fired. It counts them in a **held** column: a
//! function with many held samples is where interrupts-off code *ends*, and
//! the time was spent in the code before it. What neither test sees is an
//! interrupt handler that returns with `iretq` or `sysret` to code that had
//! interrupts on: its time is charged to the interrupted code (for a flush
//! IPI that hit ring 3, to `[user]`).
//!
//! This module is pure (built and tested on the host too): the profile's
//! numbers, the table printed at the end of a run, and the one parsable
//! `profile:` line that `bench ... --profile` reads back from each run and
//! adds up ([`Profile::parse_line`], [`Profile::add`]):
//!
//! ```text
//! profile: hz=1000 cpus=4 seconds=5.02 samples=20080 kernel=8123 user=2034 idle=9923 held=120 unplaced=0 missed=0 runs=1 top=9923:0 [idle] | 4012:480 kernel::task::vm::fault | ...
//! ```
//!
//! `top=` is last and runs to the end of the line: `samples:held name`
//! entries separated by ` | ` (demangled Rust names contain spaces, and
//! `; ` in array types such as `SmallVec<[u64; 8]>`, but never `|`).

use alloc::{
    collections::BTreeMap,
    format,
    string::{String, ToString},
    vec::Vec,
};
use core::fmt::Write;

/// The sampling rate of `profile=on`, per CPU.
pub const DEFAULT_HZ: u32 = 1000;

/// The rates `profile.hz=` accepts: multiples of the scheduler tick, so that
/// every n-th sample interrupt is a tick.
pub const MIN_HZ: u32 = 100;
pub const MAX_HZ: u32 = 10_000;

/// The row name of samples that interrupted ring 3.
pub const USER: &str = "[user]";
/// The row name of samples that interrupted an idle CPU.
pub const IDLE: &str = "[idle]";
/// The row name of kernel addresses no symbol covers.
pub const UNKNOWN: &str = "[unknown]";

/// Between the rows of the parsable line's `top=`.
const ROW_SEPARATOR: &str = " | ";

/// How many functions the parsable line lists (the table shows fewer).
pub const LINE_ROWS: usize = 40;

/// One CPU's samples by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTotals {
    pub kernel: u64,
    pub user: u64,
    pub idle: u64,
    /// Samples (of any kind) whose interrupt was held off.
    pub held: u64,
}

impl CpuTotals {
    pub fn samples(&self) -> u64 {
        self.kernel + self.user + self.idle
    }

    fn plus(&self, other: &Self) -> Self {
        Self {
            kernel: self.kernel + other.kernel,
            user: self.user + other.user,
            idle: self.idle + other.idle,
            held: self.held + other.held,
        }
    }
}

/// One row of the profile: a function (or `[user]`, `[idle]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub samples: u64,
    pub held: u64,
}

/// A whole profile: one run's, or the sum of several.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    /// Samples per second per CPU.
    pub hz: u32,
    /// How long sampling ran.
    pub seconds: f64,
    /// Per CPU; a sum of runs has no per-CPU part.
    pub cpus: Vec<CpuTotals>,
    pub totals: CpuTotals,
    /// Kernel samples the profiler could not store (its table was full);
    /// counted in `totals.kernel` but in no row.
    pub unplaced: u64,
    /// Sample periods in which no timer interrupt came at all, found from
    /// the kernel's clock: an emulated CPU whose host thread was not
    /// running gets one late interrupt for all the periods it slept
    /// through. So `samples + missed`, not `samples`, is what the rate
    /// promises for the time sampled; `missed` tells how much of the
    /// machine the host withheld, not how busy the kernel was.
    pub missed: u64,
    /// Most samples first; equal counts by name.
    pub rows: Vec<Row>,
    /// How many runs were added up (1 for one run).
    pub runs: u32,
}

/// Why a `profile:` line could not be read.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl Profile {
    /// A run's profile from its per-CPU totals and its samples as
    /// `(row name, samples, held)`: functions, possibly repeated (one entry
    /// per sampled address), and the [`USER`] and [`IDLE`] rows.
    pub fn new(
        hz: u32,
        seconds: f64,
        cpus: Vec<CpuTotals>,
        unplaced: u64,
        missed: u64,
        samples: impl IntoIterator<Item = (String, u64, u64)>,
    ) -> Self {
        let totals = cpus
            .iter()
            .fold(CpuTotals::default(), |sum, cpu| sum.plus(cpu));
        Self {
            hz,
            seconds,
            cpus,
            totals,
            unplaced,
            missed,
            rows: summed_rows(samples),
            runs: 1,
        }
    }

    /// All samples, of every kind.
    pub fn samples(&self) -> u64 {
        self.totals.samples()
    }

    /// Adds `other` (another run) to this profile: samples and rows are
    /// summed, seconds too; the per-CPU part is dropped (runs may differ in
    /// CPUs). Rows a run's line did not list (below its top
    /// [`LINE_ROWS`]) are missing from the sum, which makes the sum's small
    /// rows a lower bound.
    pub fn add(&mut self, other: &Profile) {
        if self.runs == 0 {
            *self = other.clone();
            self.cpus.clear();
            return;
        }
        self.seconds += other.seconds;
        self.totals = self.totals.plus(&other.totals);
        self.unplaced += other.unplaced;
        self.missed += other.missed;
        self.runs += other.runs;
        self.cpus.clear();
        let both = self.rows.iter().chain(&other.rows);
        self.rows = summed_rows(both.map(|row| (row.name.clone(), row.samples, row.held)));
    }

    /// The human-readable report: a title, the top `top` rows with their
    /// share of all samples and of held ones, and a line per CPU.
    pub fn table(&self, top: usize) -> String {
        let samples = self.samples();
        let mut out = String::new();
        let runs = if self.runs > 1 {
            format!(", {} runs added up", self.runs)
        } else {
            String::new()
        };
        let cpus = if self.cpus.is_empty() {
            String::new()
        } else {
            format!(" on {} CPUs", self.cpus.len())
        };
        // Writing into a `String` cannot fail.
        let _ = writeln!(
            out,
            "where the time went: {samples} samples at {} Hz{cpus} over {:.2} s{runs}",
            self.hz, self.seconds
        );
        let _ = writeln!(out, "    share  samples   held  function");
        self.write_rows(&mut out, top, samples);
        for (index, cpu) in self.cpus.iter().enumerate() {
            let all = cpu.samples();
            let _ = writeln!(
                out,
                "   cpu {index}: kernel {} user {} idle {} ({all} samples, {} held)",
                percent(cpu.kernel, all),
                percent(cpu.user, all),
                percent(cpu.idle, all),
                percent(cpu.held, all)
            );
        }
        let _ = write!(
            out,
            "   held = the sample waited for interrupts to be turned back on: the time \
             went to interrupts-off code that ended in that function"
        );
        out
    }

    /// The table's function rows: the top `top`, the rest summed, and the
    /// samples that were not placed or not taken.
    fn write_rows(&self, out: &mut String, top: usize, samples: u64) {
        for row in self.rows.iter().take(top) {
            let held = if row.held == 0 {
                String::from("-")
            } else {
                percent(row.held, row.samples)
            };
            let _ = writeln!(
                out,
                "   {:>6}  {:>7}  {:>5}  {}",
                percent(row.samples, samples),
                row.samples,
                held,
                row.name
            );
        }
        if self.rows.len() > top {
            let rest: u64 = self.rows[top..].iter().map(|row| row.samples).sum();
            let _ = writeln!(
                out,
                "   {:>6}  {:>7}         ({} more functions)",
                percent(rest, samples),
                rest,
                self.rows.len() - top
            );
        }
        if self.unplaced > 0 {
            let _ = writeln!(
                out,
                "   {:>6}  {:>7}         (kernel samples the profiler had no room for)",
                percent(self.unplaced, samples),
                self.unplaced
            );
        }
        if self.missed > 0 {
            let _ = writeln!(
                out,
                "   ({} sample periods brought no interrupt: the host did not run the CPU then)",
                self.missed
            );
        }
    }

    /// The parsable line (module docs), with the top `top` rows.
    pub fn line(&self, top: usize) -> String {
        let mut line = format!(
            "profile: hz={} cpus={} seconds={:.2} samples={} kernel={} user={} idle={} held={} unplaced={} missed={} runs={} top=",
            self.hz,
            self.cpus.len(),
            self.seconds,
            self.samples(),
            self.totals.kernel,
            self.totals.user,
            self.totals.idle,
            self.totals.held,
            self.unplaced,
            self.missed,
            self.runs
        );
        for (index, row) in self.rows.iter().take(top).enumerate() {
            if index > 0 {
                line.push_str(ROW_SEPARATOR);
            }
            let _ = write!(line, "{}:{} {}", row.samples, row.held, row.name);
        }
        line
    }

    /// Reads a line printed by [`Profile::line`] (the per-CPU part is not
    /// in it and stays empty).
    pub fn parse_line(line: &str) -> Result<Self, ParseError> {
        let rest = line
            .strip_prefix("profile: ")
            .ok_or_else(|| ParseError(String::from("does not start with 'profile: '")))?;
        let (fields, top) = rest
            .split_once(" top=")
            .ok_or_else(|| ParseError(String::from("no top= field")))?;
        let mut values: BTreeMap<&str, &str> = BTreeMap::new();
        for word in fields.split_whitespace() {
            let (key, value) = word
                .split_once('=')
                .ok_or_else(|| ParseError(format!("'{word}' is not key=value")))?;
            values.insert(key, value);
        }
        let number = |key: &str| -> Result<u64, ParseError> {
            values
                .get(key)
                .ok_or_else(|| ParseError(format!("no {key}=")))?
                .parse()
                .map_err(|_| ParseError(format!("{key}= is not a whole number")))
        };
        let seconds: f64 = values
            .get("seconds")
            .ok_or_else(|| ParseError(String::from("no seconds=")))?
            .parse()
            .map_err(|_| ParseError(String::from("seconds= is not a number")))?;
        let rows = parse_rows(top)?;
        let totals = CpuTotals {
            kernel: number("kernel")?,
            user: number("user")?,
            idle: number("idle")?,
            held: number("held")?,
        };
        if number("samples")? != totals.samples() {
            return Err(ParseError(String::from(
                "samples= is not kernel= + user= + idle=",
            )));
        }
        Ok(Self {
            hz: u32::try_from(number("hz")?)
                .map_err(|_| ParseError(String::from("hz= is too large")))?,
            seconds,
            cpus: Vec::new(),
            totals,
            unplaced: number("unplaced")?,
            missed: number("missed")?,
            rows,
            runs: u32::try_from(number("runs")?)
                .map_err(|_| ParseError(String::from("runs= is too large")))?,
        })
    }
}

/// The `top=` field of the parsable line: `samples:held name` entries.
fn parse_rows(top: &str) -> Result<Vec<Row>, ParseError> {
    let mut rows = Vec::new();
    for entry in top.split(ROW_SEPARATOR).filter(|entry| !entry.is_empty()) {
        let bad = || ParseError(format!("'{entry}' is not 'samples:held name'"));
        let (counts, name) = entry.split_once(' ').ok_or_else(bad)?;
        let (samples, held) = counts.split_once(':').ok_or_else(bad)?;
        rows.push(Row {
            name: name.to_string(),
            samples: samples.parse().map_err(|_| bad())?,
            held: held.parse().map_err(|_| bad())?,
        });
    }
    Ok(rows)
}

/// `(name, samples, held)` entries summed per name, as rows with the most
/// samples first (rows without samples left out).
fn summed_rows(entries: impl IntoIterator<Item = (String, u64, u64)>) -> Vec<Row> {
    let mut by_name: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for (name, samples, held) in entries {
        let entry = by_name.entry(name).or_default();
        entry.0 += samples;
        entry.1 += held;
    }
    by_name.retain(|_, (samples, _)| *samples > 0);
    sorted_rows(by_name)
}

/// Rows from `name -> (samples, held)`, most samples first.
fn sorted_rows(by_name: BTreeMap<String, (u64, u64)>) -> Vec<Row> {
    let mut rows: Vec<Row> = by_name
        .into_iter()
        .map(|(name, (samples, held))| Row {
            name,
            samples,
            held,
        })
        .collect();
    // The map iterates by name, and the sort is stable: equal counts stay
    // in name order.
    rows.sort_by_key(|row| core::cmp::Reverse(row.samples));
    rows
}

/// `part` of `whole` as `12.3%` (`-` of nothing).
fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return String::from("-");
    }
    format!("{:.1}%", part as f64 * 100.0 / whole as f64)
}

#[cfg(test)]
mod tests;
