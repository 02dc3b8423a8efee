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
    pub(super) const NAMES: [&'static str; 7] = [
        "decision",
        "ipi-round",
        "handler",
        "invlpgb",
        "tlbsync",
        "request",
        "switch-flush",
    ];

    fn index(&self) -> usize {
        match self {
            Self::Decision(_) => 0,
            Self::IpiRound { .. } => 1,
            Self::Handler { .. } => 2,
            Self::Invlpgb(_) => 3,
            Self::Tlbsync { .. } => 4,
            Self::Request { .. } => 5,
            Self::SwitchFlush { .. } => 6,
        }
    }

    /// The name on the line (`handler`).
    pub fn name(&self) -> &'static str {
        Self::NAMES[self.index()]
    }

    /// The slot words: a tag (never 0), the payload, and how many of its
    /// words the event uses (the recorder stores only those; the rest of a
    /// slot stays 0).
    pub fn pack(&self) -> (u64, [u64; PAYLOAD_WORDS], usize) {
        let mut words = [0; PAYLOAD_WORDS];
        let used = match *self {
            Self::Decision(decision) => {
                words[0] = decision.ctx.unwrap_or(NONE);
                let (start, end) = decision.range.unwrap_or((NONE, NONE));
                words[1] = start;
                words[2] = end;
                words[3] = reason_index(decision.reason) as u64;
                words[4..4 + CPU_SET_WORDS].copy_from_slice(&decision.skipped.words());
                4 + CPU_SET_WORDS
            }
            Self::IpiRound {
                round,
                purpose,
                targets,
                sent,
            } => {
                words[0] = round;
                words[1] = purpose as u64;
                words[2] = sent;
                words[3..3 + CPU_SET_WORDS].copy_from_slice(&targets.words());
                3 + CPU_SET_WORDS
            }
            Self::Handler {
                from,
                round,
                began,
                flushed,
            } => {
                words.copy_from_slice(&[
                    from as u64,
                    round,
                    began,
                    flushed.full,
                    flushed.partial,
                    flushed.pages,
                    flushed.trims,
                    flushed.lazy_leaves,
                ]);
                PAYLOAD_WORDS
            }
            Self::Invlpgb(operands) => {
                words[..3].copy_from_slice(&[
                    operands.rax,
                    u64::from(operands.ecx),
                    u64::from(operands.edx),
                ]);
                3
            }
            Self::Tlbsync { began } | Self::Request { began } => {
                words[0] = began;
                1
            }
            Self::SwitchFlush { ctx, lazy } => {
                words[..2].copy_from_slice(&[ctx, u64::from(lazy)]);
                2
            }
        };
        (self.index() as u64 + 1, words, used)
    }

    /// The event that [`Kind::pack`] packed into `tag` and `words`; `None`
    /// for a tag no event has (an empty slot is tag 0) or words no event of
    /// the tag has.
    pub fn unpack(tag: u64, words: &[u64; PAYLOAD_WORDS]) -> Option<Self> {
        let cpu_set = |first: usize| {
            let mut set = [0; CPU_SET_WORDS];
            set.copy_from_slice(&words[first..first + CPU_SET_WORDS]);
            CpuSet::from_words(set)
        };
        let some = |word: u64| (word != NONE).then_some(word);
        Some(match tag {
            1 => Self::Decision(Decision {
                ctx: some(words[0]),
                range: some(words[1]).map(|start| (start, words[2])),
                reason: *REASONS.get(usize::try_from(words[3]).ok()?)?,
                skipped: cpu_set(4),
            }),
            2 => Self::IpiRound {
                round: words[0],
                purpose: match words[1] {
                    0 => Purpose::Flush,
                    1 => Purpose::Broadcast,
                    _ => return None,
                },
                sent: words[2],
                targets: cpu_set(3),
            },
            3 => Self::Handler {
                from: usize::try_from(words[0]).ok()?,
                round: words[1],
                began: words[2],
                flushed: Flushed {
                    full: words[3],
                    partial: words[4],
                    pages: words[5],
                    trims: words[6],
                    lazy_leaves: words[7],
                },
            },
            4 => Self::Invlpgb(InvlpgbOperands {
                rax: words[0],
                ecx: u32::try_from(words[1]).ok()?,
                edx: u32::try_from(words[2]).ok()?,
            }),
            5 => Self::Tlbsync { began: words[0] },
            6 => Self::Request { began: words[0] },
            7 => Self::SwitchFlush {
                ctx: words[0],
                lazy: match words[1] {
                    0 => false,
                    1 => true,
                    _ => return None,
                },
            },
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
