//! An event as the words of a buffer slot: a tag that says which event it
//! is (never 0, which marks a slot not written yet) and a fixed number of
//! payload words, so that the recorder stores an event with plain atomic
//! stores and no allocation.

use mm::{CpuSet, TraceReason};
use tlb_types::{InvlpgbOperands, cpu_set::WORDS as CPU_SET_WORDS};

use super::{Decision, Flushed, Kind, Purpose, REASONS};

/// How many payload words a buffer slot has besides its tag and time.
pub const PAYLOAD_WORDS: usize = 8;

/// Stands for "none" in a slot word (no address space, no range).
const NONE: u64 = u64::MAX;

impl Kind {
    /// The event's name on the line, which is also its tag in a slot
    /// (its index here, plus one: tag 0 is an empty slot).
    pub(super) const NAMES: [&'static str; 10] = [
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
