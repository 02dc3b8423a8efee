//! The kernel's timeline events, paired up into what both pictures draw:
//! per CPU, the slices (a begin and its end), the instants, and the arrows
//! from each IPI's sender to its receiver's handler.
//!
//! Each CPU's events are taken in time order. A request, a handler and a
//! TLBSYNC wait are a begin and an end; a round of IPIs is its
//! `ipis-sent` and `answers-seen` on the sender, which makes the sender's
//! "waiting for answers" slice, and one arrow to each target's handler of
//! that round. A `decision` describes the request it falls in. An event
//! whose partner was dropped (a full buffer) is counted, not drawn.

use std::collections::HashMap;

use kernel::timeline::{Decision, Event, Flushed, Kind, Purpose, TraceReason};

/// One span of time on one CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Slice {
    pub cpu: usize,
    pub begin_ns: u64,
    pub end_ns: u64,
    pub what: SliceKind,
}

/// What a slice is.
#[derive(Clone, Debug, PartialEq)]
pub enum SliceKind {
    /// A flush request, with `mm`'s decision if it was recorded.
    Request(Option<Decision>),
    /// The sender waits for the answers of its round `round`.
    Waiting {
        round: u64,
        purpose: Purpose,
        targets: usize,
    },
    /// A target's handler for `from`'s round `round`.
    Handler {
        from: usize,
        round: u64,
        purpose: Purpose,
        flushed: Flushed,
    },
    /// TLBSYNC: waiting for this CPU's INVLPGBs everywhere.
    Tlbsync,
}

/// One moment on one CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct Instant {
    pub cpu: usize,
    pub ns: u64,
    pub what: InstantKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum InstantKind {
    /// An INVLPGB with its operands.
    Invlpgb(tlb_types::InvlpgbOperands),
    /// A decision outside any recorded request (promotion, rollover).
    Decision(Decision),
}

/// An IPI: from its sender, when the round went out, to its receiver,
/// when the handler began.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arrow {
    pub from: usize,
    pub sent_ns: u64,
    pub to: usize,
    pub received_ns: u64,
    pub round: u64,
    pub purpose: Purpose,
}

/// Everything the pictures draw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lanes {
    /// How many CPUs recorded events (the lanes, 0..cpus).
    pub cpus: usize,
    pub slices: Vec<Slice>,
    pub instants: Vec<Instant>,
    pub arrows: Vec<Arrow>,
    /// Begins without an end and ends without a begin (their partner did
    /// not fit in the buffer).
    pub unmatched: usize,
}

/// What is open on one CPU.
#[derive(Default)]
struct Open {
    /// Each open request's begin, and its decision so far (with when).
    requests: Vec<(u64, Option<(u64, Decision)>)>,
    handlers: Vec<(u64, usize, u64)>,
    tlbsync: Option<u64>,
}

/// A round as its sender recorded it.
struct Round {
    sent_ns: u64,
    purpose: Purpose,
    targets: Vec<usize>,
}

impl Lanes {
    /// Pairs `events` up (any order; each CPU's are sorted by time).
    pub fn from_events(events: &[Event]) -> Self {
        let mut sorted = events.to_vec();
        sorted.sort_by_key(|event| (event.cpu, event.ns));
        let mut lanes = Self {
            cpus: sorted.iter().map(|event| event.cpu + 1).max().unwrap_or(0),
            ..Self::default()
        };
        let rounds = rounds_of(&sorted);
        let mut open: HashMap<usize, Open> = HashMap::new();
        for event in &sorted {
            lanes.take(event, open.entry(event.cpu).or_default(), &rounds);
        }
        lanes.unmatched += open
            .values()
            .map(|open| {
                open.requests.len() + open.handlers.len() + usize::from(open.tlbsync.is_some())
            })
            .sum::<usize>();
        lanes
            .slices
            .sort_by_key(|slice| (slice.begin_ns, slice.cpu));
        lanes.arrows.sort_by_key(|arrow| (arrow.sent_ns, arrow.to));
        lanes
    }

    /// Adds what `event` begins, ends or marks on its CPU, given what is
    /// `open` there and every sender's `rounds`.
    fn take(&mut self, event: &Event, open: &mut Open, rounds: &Rounds) {
        match event.kind {
            Kind::RequestBegin | Kind::Decision(_) | Kind::RequestEnd => {
                self.take_request_step(event, open)
            }
            Kind::IpisSent { .. } => {}
            Kind::AnswersSeen { round } => match rounds.get(&(event.cpu, round)) {
                Some(sent) => self.slices.push(Slice {
                    cpu: event.cpu,
                    begin_ns: sent.sent_ns,
                    end_ns: event.ns,
                    what: SliceKind::Waiting {
                        round,
                        purpose: sent.purpose,
                        targets: sent.targets.len(),
                    },
                }),
                None => self.unmatched += 1,
            },
            Kind::HandlerBegin { .. } | Kind::HandlerEnd { .. } => {
                self.take_handler_step(event, open, rounds)
            }
            Kind::Invlpgb(operands) => self.instants.push(Instant {
                cpu: event.cpu,
                ns: event.ns,
                what: InstantKind::Invlpgb(operands),
            }),
            Kind::TlbsyncBegin => open.tlbsync = Some(event.ns),
            Kind::TlbsyncEnd => match open.tlbsync.take() {
                Some(begin_ns) => self.slices.push(Slice {
                    cpu: event.cpu,
                    begin_ns,
                    end_ns: event.ns,
                    what: SliceKind::Tlbsync,
                }),
                None => self.unmatched += 1,
            },
        }
    }

    /// A request's begin, its decision, its end. `mm` reports a request's
    /// own decision last (a broadcast after the IPIs of the transition it
    /// finishes), so the last one names the request and an earlier one
    /// becomes an instant; so do a promotion or rollover, which a request
    /// causes but is not, and a decision outside any request.
    fn take_request_step(&mut self, event: &Event, open: &mut Open) {
        let instant = |(ns, decision)| Instant {
            cpu: event.cpu,
            ns,
            what: InstantKind::Decision(decision),
        };
        match event.kind {
            Kind::RequestBegin => open.requests.push((event.ns, None)),
            Kind::Decision(decision) => {
                let side_effect = matches!(
                    decision.reason,
                    TraceReason::Promotion | TraceReason::Rollover
                );
                match open.requests.last_mut() {
                    Some((_, slot)) if !side_effect => {
                        if let Some(earlier) = slot.replace((event.ns, decision)) {
                            self.instants.push(instant(earlier));
                        }
                    }
                    _ => self.instants.push(instant((event.ns, decision))),
                }
            }
            _ => match open.requests.pop() {
                Some((begin_ns, decision)) => self.slices.push(Slice {
                    cpu: event.cpu,
                    begin_ns,
                    end_ns: event.ns,
                    what: SliceKind::Request(decision.map(|(_, decision)| decision)),
                }),
                None => self.unmatched += 1,
            },
        }
    }

    /// A handler's begin (and the arrow of the IPI that started it), or its
    /// end (and its slice).
    fn take_handler_step(&mut self, event: &Event, open: &mut Open, rounds: &Rounds) {
        let cpu = event.cpu;
        match event.kind {
            Kind::HandlerBegin { from, round } => {
                open.handlers.push((event.ns, from, round));
                match rounds.get(&(from, round)) {
                    Some(sent) if sent.targets.contains(&cpu) => self.arrows.push(Arrow {
                        from,
                        sent_ns: sent.sent_ns,
                        to: cpu,
                        received_ns: event.ns,
                        round,
                        purpose: sent.purpose,
                    }),
                    _ => self.unmatched += 1,
                }
            }
            Kind::HandlerEnd {
                from,
                round,
                flushed,
            } => {
                let begun = open
                    .handlers
                    .iter()
                    .rposition(|&(_, f, r)| (f, r) == (from, round));
                let Some(index) = begun else {
                    self.unmatched += 1;
                    return;
                };
                let (begin_ns, ..) = open.handlers.remove(index);
                let purpose = rounds
                    .get(&(from, round))
                    .map_or(Purpose::Flush, |sent| sent.purpose);
                self.slices.push(Slice {
                    cpu,
                    begin_ns,
                    end_ns: event.ns,
                    what: SliceKind::Handler {
                        from,
                        round,
                        purpose,
                        flushed,
                    },
                });
            }
            _ => unreachable!("take passes only handler events"),
        }
    }

    /// The first and last time anything happened (`None`: nothing did).
    pub fn span(&self) -> Option<(u64, u64)> {
        let times = self
            .slices
            .iter()
            .flat_map(|slice| [slice.begin_ns, slice.end_ns])
            .chain(self.instants.iter().map(|instant| instant.ns));
        let (mut first, mut last) = (u64::MAX, 0);
        for ns in times {
            first = first.min(ns);
            last = last.max(ns);
        }
        (first <= last).then_some((first, last))
    }

    /// The flush requests that reached other CPUs, by IPI or by INVLPGB,
    /// in time order: the shootdowns a window can be centred on.
    pub fn shootdowns(&self) -> Vec<&Slice> {
        self.slices
            .iter()
            .filter(|slice| matches!(slice.what, SliceKind::Request(_)))
            .filter(|request| {
                let during = |cpu: usize, ns: u64| {
                    cpu == request.cpu && (request.begin_ns..=request.end_ns).contains(&ns)
                };
                self.arrows
                    .iter()
                    .any(|arrow| during(arrow.from, arrow.sent_ns))
                    || self.instants.iter().any(|instant| {
                        matches!(instant.what, InstantKind::Invlpgb(_))
                            && during(instant.cpu, instant.ns)
                    })
            })
            .collect()
    }

    /// Only what lies in `from_ns..=to_ns` (a slice or arrow that overlaps it).
    pub fn window(&self, from_ns: u64, to_ns: u64) -> Self {
        let overlaps = |begin: u64, end: u64| begin <= to_ns && end >= from_ns;
        Self {
            cpus: self.cpus,
            slices: self
                .slices
                .iter()
                .filter(|slice| overlaps(slice.begin_ns, slice.end_ns))
                .cloned()
                .collect(),
            instants: self
                .instants
                .iter()
                .filter(|instant| overlaps(instant.ns, instant.ns))
                .cloned()
                .collect(),
            arrows: self
                .arrows
                .iter()
                .filter(|arrow| overlaps(arrow.sent_ns, arrow.received_ns))
                .cloned()
                .collect(),
            unmatched: self.unmatched,
        }
    }
}

/// Every round by its sender and number.
type Rounds = HashMap<(usize, u64), Round>;

/// Every round of `events`.
fn rounds_of(events: &[Event]) -> Rounds {
    events
        .iter()
        .filter_map(|event| match event.kind {
            Kind::IpisSent {
                round,
                purpose,
                targets,
            } => Some((
                (event.cpu, round),
                Round {
                    sent_ns: event.ns,
                    purpose,
                    targets: targets.iter().collect(),
                },
            )),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
pub(super) mod tests;
