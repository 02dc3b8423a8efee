//! An event as the line the kernel prints at the end of a run, and back:
//! `key=value` words in a fixed order, so that a line is easy to read and
//! any other line is refused with the reason.

use alloc::{format, string::String, vec::Vec};
use core::fmt;

use mm::{CpuSet, TraceReason};
use tlb_types::InvlpgbOperands;

use super::{Decision, Event, Flushed, Kind, Purpose, REASONS};

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
            Kind::IpiRound {
                round,
                purpose,
                targets,
                sent,
            } => write!(
                f,
                " round={round} for={} targets={} sent={sent}",
                purpose.name(),
                CpuList(targets)
            ),
            Kind::Handler {
                from,
                round,
                began,
                flushed,
            } => write!(
                f,
                " from={from} round={round} began={began} full={} partial={} pages={} trims={} \
                 lazy_leaves={}",
                flushed.full, flushed.partial, flushed.pages, flushed.trims, flushed.lazy_leaves
            ),
            Kind::Invlpgb(operands) => write!(
                f,
                " rax={:#x} ecx={:#x} edx={:#x}",
                operands.rax, operands.ecx, operands.edx
            ),
            Kind::Tlbsync { began } | Kind::Request { began } => write!(f, " began={began}"),
            Kind::SwitchFlush { ctx, lazy } => {
                write!(f, " ctx={ctx} lazy={}", if *lazy { "yes" } else { "no" })
            }
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
            "decision" => Kind::Decision(parse_decision(&mut fields)?),
            "ipi-round" => Kind::IpiRound {
                round: fields.number("round")?,
                purpose: {
                    let name = fields.value("for")?;
                    Purpose::named(name).ok_or_else(|| {
                        ParseError(format!("for={name} is not flush or broadcast"))
                    })?
                },
                targets: fields.cpus("targets")?,
                sent: fields.number("sent")?,
            },
            "handler" => Kind::Handler {
                from: fields.cpu("from")?,
                round: fields.number("round")?,
                began: fields.number("began")?,
                flushed: Flushed {
                    full: fields.number("full")?,
                    partial: fields.number("partial")?,
                    pages: fields.number("pages")?,
                    trims: fields.number("trims")?,
                    lazy_leaves: fields.number("lazy_leaves")?,
                },
            },
            "invlpgb" => Kind::Invlpgb(InvlpgbOperands {
                rax: fields.number("rax")?,
                ecx: fields.u32("ecx")?,
                edx: fields.u32("edx")?,
            }),
            "tlbsync" => Kind::Tlbsync {
                began: fields.number("began")?,
            },
            "request" => Kind::Request {
                began: fields.number("began")?,
            },
            "switch-flush" => Kind::SwitchFlush {
                ctx: fields.number("ctx")?,
                lazy: match fields.value("lazy")? {
                    "yes" => true,
                    "no" => false,
                    other => return Err(ParseError(format!("lazy={other} is not yes or no"))),
                },
            },
            other => return Err(ParseError(format!("no event is called '{other}'"))),
        };
        fields.finish()?;
        if let Some(began) = kind.began()
            && began > ns
        {
            return Err(ParseError(format!(
                "the {name} began at {began}, after it ended at {ns}"
            )));
        }
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
