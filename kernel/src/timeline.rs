//! The timeline of `tlb.timeline=on`: what each CPU did in each shootdown,
//! and when, as events the host turns into a picture.
//!
//! The text trace (`tlb.trace=on`) says what `mm` decided; it cannot show
//! that CPU 1 was still in its flush handler while CPU 0 spun for its
//! answer, or how long the IPI took to arrive. A timeline can: every CPU
//! records, on its own clock (nanoseconds since boot, from a TSC that runs
//! in step on every CPU), the steps it took part in:
//!
//! | event            | on              | meaning                                                   |
//! |------------------|-----------------|-----------------------------------------------------------|
//! | `request-begin`  | the initiator   | a flush request starts (`tlb::flush_range` and friends)   |
//! | `decision`       | the initiator   | `mm`'s choice: address space, range, reason, CPUs skipped |
//! | `ipis-sent`      | the initiator   | round `round` of IPIs goes out to `targets`, `for` a flush or a broadcast |
//! | `handler-begin`  | each target     | the target enters its handler for `from`'s round          |
//! | `handler-end`    | each target     | it is done, with what it flushed (full, pages, trims)     |
//! | `answers-seen`   | the initiator   | every target of the round has answered                    |
//! | `invlpgb`        | the initiator   | one INVLPGB with its operands                             |
//! | `tlbsync-begin`/`-end` | the initiator | the wait for this CPU's INVLPGBs                    |
//! | `request-end`    | the initiator   | the request returns                                       |
//!
//! A round of the software broadcast backend is a round of IPIs too
//! (`for=broadcast`; its `decision` follows with reason `Broadcast`). Each event goes into its
//! CPU's bounded buffer while the system runs ([`crate::tlb::recorder`]) and
//! is printed at the end of the run as one line; the host runner reads the
//! lines back (`cargo run -- --timeline DIR`):
//!
//! ```text
//! timeline: cpu=0 ns=81234567 ipis-sent round=3 for=flush targets=1,2
//! timeline: cpu=1 ns=81236012 handler-begin from=0 round=3
//! timeline: cpu=1 ns=81237120 handler-end from=0 round=3 full=0 partial=1 pages=1 trims=0
//! timeline-end: cpus=4 capacity=4096 recorded=9120 dropped=0
//! ```
//!
//! This module is pure (built and tested on the host too): the events,
//! their packing into a buffer slot's words, and their line format in both
//! directions.

use alloc::{format, string::String, vec::Vec};
use core::fmt;

use mm::{CpuSet, TraceReason};
use tlb_types::{InvlpgbOperands, cpu_set::WORDS as CPU_SET_WORDS};

/// How many payload words a buffer slot has besides its tag and time.
pub const PAYLOAD_WORDS: usize = 8;

/// One event of one CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The CPU that recorded it.
    pub cpu: usize,
    /// When, in nanoseconds since boot.
    pub ns: u64,
    pub kind: Kind,
}

/// What happened (see the module docs' table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    RequestBegin,
    Decision(Decision),
    IpisSent {
        round: u64,
        purpose: Purpose,
        targets: CpuSet,
    },
    HandlerBegin {
        from: usize,
        round: u64,
    },
    HandlerEnd {
        from: usize,
        round: u64,
        flushed: Flushed,
    },
    AnswersSeen {
        round: u64,
    },
    Invlpgb(InvlpgbOperands),
    TlbsyncBegin,
    TlbsyncEnd,
    RequestEnd,
}

/// What a round of IPIs carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A targeted flush: `mm` chose the targets (mode `ipi`, and address
    /// spaces without a global ASID).
    Flush,
    /// The software broadcast backend's stand-in for INVLPGB: every
    /// online CPU.
    Broadcast,
}

impl Purpose {
    fn name(self) -> &'static str {
        match self {
            Self::Flush => "flush",
            Self::Broadcast => "broadcast",
        }
    }

    fn named(name: &str) -> Option<Self> {
        [Self::Flush, Self::Broadcast]
            .into_iter()
            .find(|purpose| purpose.name() == name)
    }
}

/// `mm`'s decision about one flush request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The address space (`None`: the kernel's mappings, or whatever a
    /// batch found loaded).
    pub ctx: Option<u64>,
    /// The range (`None`: everything).
    pub range: Option<(u64, u64)>,
    pub reason: TraceReason,
    /// CPUs of the address space's CPU set that got no IPI: lazy ones, and
    /// ones that run something else (they catch up when they switch in).
    pub skipped: CpuSet,
}

/// What one run of the flush handler did on its CPU, from that CPU's
/// counters before and after it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flushed {
    /// Full flushes of the loaded PCID.
    pub full: u64,
    /// Partial flushes (one INVLPG per page).
    pub partial: u64,
    /// Pages invalidated one at a time.
    pub pages: u64,
    /// Times the CPU left the address space's CPU set (it no longer runs it).
    pub trims: u64,
}

/// Every reason, with its name on the line (its `Debug` form).
const REASONS: [TraceReason; 8] = [
    TraceReason::LocalOnly,
    TraceReason::GenerationOnly,
    TraceReason::Ipi,
    TraceReason::Broadcast,
    TraceReason::Kernel,
    TraceReason::Batch,
    TraceReason::Promotion,
    TraceReason::Rollover,
];

/// Stands for "none" in a slot word (no address space, no range).
const NONE: u64 = u64::MAX;

impl Kind {
    /// The event's name on the line, which is also its tag in a slot
    /// (its index here, plus one: tag 0 is an empty slot).
    const NAMES: [&'static str; 10] = [
        "request-begin",
        "decision",
        "ipis-sent",
        "handler-begin",
        "handler-end",
        "answers-seen",
        "invlpgb",
        "tlbsync-begin",
        "tlbsync-end",
        "request-end",
    ];

    fn index(&self) -> usize {
        match self {
            Self::RequestBegin => 0,
            Self::Decision(_) => 1,
            Self::IpisSent { .. } => 2,
            Self::HandlerBegin { .. } => 3,
            Self::HandlerEnd { .. } => 4,
            Self::AnswersSeen { .. } => 5,
            Self::Invlpgb(_) => 6,
            Self::TlbsyncBegin => 7,
            Self::TlbsyncEnd => 8,
            Self::RequestEnd => 9,
        }
    }

    /// The name on the line (`handler-begin`).
    pub fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// The slot words: a tag (never 0) and the payload.
    pub fn pack(&self) -> (u64, [u64; PAYLOAD_WORDS]) {
        let mut words = [0; PAYLOAD_WORDS];
        match *self {
            Self::RequestBegin | Self::TlbsyncBegin | Self::TlbsyncEnd | Self::RequestEnd => {}
            Self::Decision(decision) => {
                words[0] = decision.ctx.unwrap_or(NONE);
                let (start, end) = decision.range.unwrap_or((NONE, NONE));
                words[1] = start;
                words[2] = end;
                words[3] = reason_index(decision.reason) as u64;
                words[4..4 + CPU_SET_WORDS].copy_from_slice(&decision.skipped.words());
            }
            Self::IpisSent {
                round,
                purpose,
                targets,
            } => {
                words[0] = round;
                words[1] = purpose as u64;
                words[2..2 + CPU_SET_WORDS].copy_from_slice(&targets.words());
            }
            Self::HandlerBegin { from, round } => {
                words[0] = from as u64;
                words[1] = round;
            }
            Self::HandlerEnd {
                from,
                round,
                flushed,
            } => {
                words[0] = from as u64;
                words[1] = round;
                words[2] = flushed.full;
                words[3] = flushed.partial;
                words[4] = flushed.pages;
                words[5] = flushed.trims;
            }
            Self::AnswersSeen { round } => words[0] = round,
            Self::Invlpgb(operands) => {
                words[0] = operands.rax;
                words[1] = u64::from(operands.ecx);
                words[2] = u64::from(operands.edx);
            }
        }
        (self.index() as u64 + 1, words)
    }

    /// The event that [`Kind::pack`] packed into `tag` and `words`; `None`
    /// for a tag no event has (an empty slot is tag 0).
    pub fn unpack(tag: u64, words: &[u64; PAYLOAD_WORDS]) -> Option<Self> {
        let cpu_set = |first: usize| {
            let mut set = [0; CPU_SET_WORDS];
            set.copy_from_slice(&words[first..first + CPU_SET_WORDS]);
            CpuSet::from_words(set)
        };
        let some = |word: u64| (word != NONE).then_some(word);
        Some(match tag {
            1 => Self::RequestBegin,
            2 => Self::Decision(Decision {
                ctx: some(words[0]),
                range: some(words[1]).map(|start| (start, words[2])),
                reason: *REASONS.get(usize::try_from(words[3]).ok()?)?,
                skipped: cpu_set(4),
            }),
            3 => Self::IpisSent {
                round: words[0],
                purpose: match words[1] {
                    0 => Purpose::Flush,
                    1 => Purpose::Broadcast,
                    _ => return None,
                },
                targets: cpu_set(2),
            },
            4 => Self::HandlerBegin {
                from: usize::try_from(words[0]).ok()?,
                round: words[1],
            },
            5 => Self::HandlerEnd {
                from: usize::try_from(words[0]).ok()?,
                round: words[1],
                flushed: Flushed {
                    full: words[2],
                    partial: words[3],
                    pages: words[4],
                    trims: words[5],
                },
            },
            6 => Self::AnswersSeen { round: words[0] },
            7 => Self::Invlpgb(InvlpgbOperands {
                rax: words[0],
                ecx: u32::try_from(words[1]).ok()?,
                edx: u32::try_from(words[2]).ok()?,
            }),
            8 => Self::TlbsyncBegin,
            9 => Self::TlbsyncEnd,
            10 => Self::RequestEnd,
            _ => return None,
        })
    }
}

fn reason_index(reason: TraceReason) -> usize {
    REASONS
        .iter()
        .position(|&known| known == reason)
        .expect("REASONS lists every TraceReason")
}

/// The reason named `name` on a line.
fn reason_named(name: &str) -> Option<TraceReason> {
    REASONS
        .iter()
        .copied()
        .find(|reason| format!("{reason:?}") == name)
}

/// `1,2,5`, or `-` for no CPU.
struct CpuList<'a>(&'a CpuSet);

impl fmt::Display for CpuList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("-");
        }
        for (index, cpu) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            write!(f, "{cpu}")?;
        }
        Ok(())
    }
}

fn parse_cpu_list(text: &str) -> Option<CpuSet> {
    let mut set = CpuSet::new();
    if text != "-" {
        for cpu in text.split(',') {
            let cpu: usize = cpu.parse().ok()?;
            if cpu >= mm::MAX_CPUS {
                return None;
            }
            set.insert(cpu);
        }
    }
    Some(set)
}

/// What starts every event's line.
pub const PREFIX: &str = "timeline: ";

/// What starts the line after the last event.
pub const END_PREFIX: &str = "timeline-end: ";

impl fmt::Display for Event {
    /// One line, without its newline (see the module docs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PREFIX}cpu={} ns={} {}",
            self.cpu,
            self.ns,
            self.kind.name()
        )?;
        match &self.kind {
            Kind::RequestBegin | Kind::TlbsyncBegin | Kind::TlbsyncEnd | Kind::RequestEnd => Ok(()),
            Kind::Decision(decision) => {
                match decision.ctx {
                    Some(ctx) => write!(f, " ctx={ctx}")?,
                    None => f.write_str(" ctx=-")?,
                }
                match decision.range {
                    Some((start, end)) => write!(f, " range={start:#x}..{end:#x}")?,
                    None => f.write_str(" range=all")?,
                }
                write!(
                    f,
                    " reason={:?} skipped={}",
                    decision.reason,
                    CpuList(&decision.skipped)
                )
            }
            Kind::IpisSent {
                round,
                purpose,
                targets,
            } => write!(
                f,
                " round={round} for={} targets={}",
                purpose.name(),
                CpuList(targets)
            ),
            Kind::HandlerBegin { from, round } => write!(f, " from={from} round={round}"),
            Kind::HandlerEnd {
                from,
                round,
                flushed,
            } => write!(
                f,
                " from={from} round={round} full={} partial={} pages={} trims={}",
                flushed.full, flushed.partial, flushed.pages, flushed.trims
            ),
            Kind::AnswersSeen { round } => write!(f, " round={round}"),
            Kind::Invlpgb(operands) => write!(
                f,
                " rax={:#x} ecx={:#x} edx={:#x}",
                operands.rax, operands.ecx, operands.edx
            ),
        }
    }
}

/// Why a line is not an event line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `key=value` words of a line, each taken once, in order.
struct Fields<'a> {
    words: core::str::SplitWhitespace<'a>,
}

impl<'a> Fields<'a> {
    fn next_word(&mut self, what: &str) -> Result<&'a str, ParseError> {
        self.words
            .next()
            .ok_or_else(|| ParseError(format!("the line ends before {what}")))
    }

    /// The value of the next word, which must be `key=...`.
    fn value(&mut self, key: &str) -> Result<&'a str, ParseError> {
        let word = self.next_word(key)?;
        word.strip_prefix(key)
            .and_then(|rest| rest.strip_prefix('='))
            .ok_or_else(|| ParseError(format!("expected {key}=..., found '{word}'")))
    }

    fn number(&mut self, key: &str) -> Result<u64, ParseError> {
        let text = self.value(key)?;
        let parsed = match text.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => text.parse(),
        };
        parsed.map_err(|_| ParseError(format!("{key}={text} is not a number")))
    }

    fn cpu(&mut self, key: &str) -> Result<usize, ParseError> {
        let cpu = self.number(key)?;
        usize::try_from(cpu)
            .ok()
            .filter(|&cpu| cpu < mm::MAX_CPUS)
            .ok_or_else(|| ParseError(format!("{key}={cpu} is not a CPU")))
    }

    fn cpus(&mut self, key: &str) -> Result<CpuSet, ParseError> {
        let text = self.value(key)?;
        parse_cpu_list(text).ok_or_else(|| ParseError(format!("{key}={text} is not a CPU list")))
    }

    fn u32(&mut self, key: &str) -> Result<u32, ParseError> {
        let value = self.number(key)?;
        u32::try_from(value).map_err(|_| ParseError(format!("{key}={value:#x} is over 32 bits")))
    }

    fn finish(mut self) -> Result<(), ParseError> {
        match self.words.next() {
            None => Ok(()),
            Some(word) => Err(ParseError(format!("unexpected '{word}' at the end"))),
        }
    }
}

impl Event {
    /// The event of a line [`Event`]'s `Display` printed (the prefix
    /// included); the error says what is wrong with any other line.
    pub fn parse(line: &str) -> Result<Self, ParseError> {
        let rest = line
            .strip_prefix(PREFIX)
            .ok_or_else(|| ParseError(format!("does not start with '{PREFIX}'")))?;
        let mut fields = Fields {
            words: rest.split_whitespace(),
        };
        let cpu = fields.cpu("cpu")?;
        let ns = fields.number("ns")?;
        let name = fields.next_word("the event's name")?;
        let kind = match name {
            "request-begin" => Kind::RequestBegin,
            "decision" => Kind::Decision(parse_decision(&mut fields)?),
            "ipis-sent" => Kind::IpisSent {
                round: fields.number("round")?,
                purpose: {
                    let name = fields.value("for")?;
                    Purpose::named(name).ok_or_else(|| {
                        ParseError(format!("for={name} is not flush or broadcast"))
                    })?
                },
                targets: fields.cpus("targets")?,
            },
            "handler-begin" => Kind::HandlerBegin {
                from: fields.cpu("from")?,
                round: fields.number("round")?,
            },
            "handler-end" => Kind::HandlerEnd {
                from: fields.cpu("from")?,
                round: fields.number("round")?,
                flushed: Flushed {
                    full: fields.number("full")?,
                    partial: fields.number("partial")?,
                    pages: fields.number("pages")?,
                    trims: fields.number("trims")?,
                },
            },
            "answers-seen" => Kind::AnswersSeen {
                round: fields.number("round")?,
            },
            "invlpgb" => Kind::Invlpgb(InvlpgbOperands {
                rax: fields.number("rax")?,
                ecx: fields.u32("ecx")?,
                edx: fields.u32("edx")?,
            }),
            "tlbsync-begin" => Kind::TlbsyncBegin,
            "tlbsync-end" => Kind::TlbsyncEnd,
            "request-end" => Kind::RequestEnd,
            other => return Err(ParseError(format!("no event is called '{other}'"))),
        };
        fields.finish()?;
        Ok(Self { cpu, ns, kind })
    }
}

fn parse_decision(fields: &mut Fields<'_>) -> Result<Decision, ParseError> {
    let ctx = match fields.value("ctx")? {
        "-" => None,
        text => Some(
            text.parse()
                .map_err(|_| ParseError(format!("ctx={text} is not a number")))?,
        ),
    };
    let range = match fields.value("range")? {
        "all" => None,
        text => Some(parse_range(text).ok_or_else(|| {
            ParseError(format!("range={text} is not 'all' or START..END in hex"))
        })?),
    };
    let reason_text = fields.value("reason")?;
    let reason = reason_named(reason_text)
        .ok_or_else(|| ParseError(format!("reason={reason_text} is not a reason")))?;
    Ok(Decision {
        ctx,
        range,
        reason,
        skipped: fields.cpus("skipped")?,
    })
}

fn parse_range(text: &str) -> Option<(u64, u64)> {
    let (start, end) = text.split_once("..")?;
    let hex = |text: &str| u64::from_str_radix(text.strip_prefix("0x")?, 16).ok();
    Some((hex(start)?, hex(end)?))
}

/// The line after the last event: how many CPUs recorded, how many events
/// each could keep, how many were kept and how many did not fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub cpus: usize,
    pub capacity: usize,
    pub recorded: u64,
    pub dropped: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{END_PREFIX}cpus={} capacity={} recorded={} dropped={}",
            self.cpus, self.capacity, self.recorded, self.dropped
        )
    }
}

impl Summary {
    /// The summary of a line its `Display` printed.
    pub fn parse(line: &str) -> Result<Self, ParseError> {
        let rest = line
            .strip_prefix(END_PREFIX)
            .ok_or_else(|| ParseError(format!("does not start with '{END_PREFIX}'")))?;
        let mut fields = Fields {
            words: rest.split_whitespace(),
        };
        let summary = Self {
            cpus: fields.cpu("cpus")?,
            capacity: usize::try_from(fields.number("capacity")?)
                .map_err(|_| ParseError(String::from("capacity is too large")))?,
            recorded: fields.number("recorded")?,
            dropped: fields.number("dropped")?,
        };
        fields.finish()?;
        Ok(summary)
    }
}

/// Every event line among `lines`, and the summary, in the order printed.
/// Lines that are neither are someone else's; an event or summary line
/// that does not parse is an error, with its number (from 1).
pub fn parse_lines<'a>(
    lines: impl IntoIterator<Item = &'a str>,
) -> Result<(Vec<Event>, Option<Summary>), (usize, ParseError)> {
    let mut events = Vec::new();
    let mut summary = None;
    for (index, line) in lines.into_iter().enumerate() {
        let line = line.trim_end();
        if line.starts_with(PREFIX) {
            events.push(Event::parse(line).map_err(|error| (index + 1, error))?);
        } else if line.starts_with(END_PREFIX) {
            summary = Some(Summary::parse(line).map_err(|error| (index + 1, error))?);
        }
    }
    Ok((events, summary))
}

#[cfg(test)]
mod tests;
