//! The kernel's timeline events, turned into what both pictures draw: per
//! CPU, the slices, the instants, and the arrows from each IPI's sender to
//! its receiver's handler.
//!
//! The kernel records a span (a request, a round of IPIs, a handler, a
//! TLBSYNC) as one event when it ends, with the time it began, so each is a
//! slice as it stands. An IPI round's event on the sender gives its
//! "waiting for answers" slice, and one arrow to each target's handler of
//! that round. A `decision` describes the innermost request it falls in
//! on its CPU. A handler whose round is missing (the sender's buffer was
//! full) is drawn without its arrow and counted.

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
    /// The CPU switched into address space `ctx` and flushed its entries
    /// of it: it caught up with flushes that skipped it (`lazy`: it came
    /// back from lazy mode).
    SwitchFlush { ctx: u64, lazy: bool },
    /// CPU `by`'s flush of address space `ctx` skipped this CPU, which had
    /// it loaded lazily or ran another one: it catches up when it switches
    /// in.
    Skipped { by: usize, ctx: Option<u64> },
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
    /// Handlers whose IPI round is missing (it did not fit in the sender's
    /// buffer): drawn without their arrow.
    pub unmatched: usize,
}

/// A round as its sender recorded it.
struct Round {
    sent_ns: u64,
    purpose: Purpose,
    targets: Vec<usize>,
}

/// A point of a CPU's requests and decisions, in the order they are taken
/// at the same time: a request opens before a decision in it, and closes
/// after.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum RequestPoint {
    Opens,
    Decides(usize),
    Closes,
}

impl Lanes {
    /// Turns `events` (any order) into slices, instants and arrows.
    pub fn from_events(events: &[Event]) -> Self {
        let mut sorted = events.to_vec();
        sorted.sort_by_key(|event| (event.cpu, event.ns));
        let mut lanes = Self {
            cpus: sorted.iter().map(|event| event.cpu + 1).max().unwrap_or(0),
            ..Self::default()
        };
        let rounds = rounds_of(&sorted);
        for event in &sorted {
            lanes.take(event, &rounds);
        }
        for cpu in 0..lanes.cpus {
            lanes.take_requests(cpu, &sorted);
        }
        lanes
            .slices
            .sort_by_key(|slice| (slice.begin_ns, slice.cpu));
        lanes.arrows.sort_by_key(|arrow| (arrow.sent_ns, arrow.to));
        lanes
            .instants
            .sort_by_key(|instant| (instant.ns, instant.cpu));
        lanes
    }

    /// Adds what `event` draws on its CPU, given every sender's `rounds`;
    /// requests and decisions are [`Lanes::take_requests`]'.
    fn take(&mut self, event: &Event, rounds: &Rounds) {
        let (cpu, ns) = (event.cpu, event.ns);
        let slice = |begin_ns, what| Slice {
            cpu,
            begin_ns,
            end_ns: ns,
            what,
        };
        match event.kind {
            Kind::Request { .. } | Kind::Decision(_) => {}
            Kind::IpiRound {
                round,
                purpose,
                targets,
                sent,
            } => self.slices.push(slice(
                sent,
                SliceKind::Waiting {
                    round,
                    purpose,
                    targets: targets.count(),
                },
            )),
            Kind::Handler {
                from,
                round,
                began,
                flushed,
            } => {
                let sent = rounds
                    .get(&(from, round))
                    .filter(|sent| sent.targets.contains(&cpu));
                match sent {
                    Some(sent) => self.arrows.push(Arrow {
                        from,
                        sent_ns: sent.sent_ns,
                        to: cpu,
                        received_ns: began,
                        round,
                        purpose: sent.purpose,
                    }),
                    None => self.unmatched += 1,
                }
                self.slices.push(slice(
                    began,
                    SliceKind::Handler {
                        from,
                        round,
                        purpose: sent.map_or(Purpose::Flush, |sent| sent.purpose),
                        flushed,
                    },
                ));
            }
            Kind::Invlpgb(operands) => self.instants.push(Instant {
                cpu,
                ns,
                what: InstantKind::Invlpgb(operands),
            }),
            Kind::Tlbsync { began } => self.slices.push(slice(began, SliceKind::Tlbsync)),
            Kind::SwitchFlush { ctx, lazy } => self.instants.push(Instant {
                cpu,
                ns,
                what: InstantKind::SwitchFlush { ctx, lazy },
            }),
        }
    }

    /// `cpu`'s requests, each named by a decision. `mm` reports a request's
    /// own decision last (a broadcast after the IPIs of the transition it
    /// finishes), so the last one in the innermost request names it and an
    /// earlier one becomes an instant; so do a promotion or rollover, which
    /// a request causes but is not, and a decision outside any request.
    fn take_requests(&mut self, cpu: usize, sorted: &[Event]) {
        let mut decisions = Vec::new();
        let mut points = Vec::new();
        for event in sorted.iter().filter(|event| event.cpu == cpu) {
            match event.kind {
                Kind::Request { began } => {
                    points.push((began, RequestPoint::Opens));
                    points.push((event.ns, RequestPoint::Closes));
                }
                Kind::Decision(decision) => {
                    points.push((event.ns, RequestPoint::Decides(decisions.len())));
                    decisions.push(decision);
                }
                _ => {}
            }
        }
        points.sort_by_key(|&(ns, point)| (ns, point));
        let instant = |ns, decision| Instant {
            cpu,
            ns,
            what: InstantKind::Decision(decision),
        };
        // Each open request's begin, and its decision so far (with when).
        let mut open: Vec<(u64, Option<(u64, Decision)>)> = Vec::new();
        for (ns, point) in points {
            match point {
                RequestPoint::Opens => open.push((ns, None)),
                RequestPoint::Decides(index) => {
                    let decision: Decision = decisions[index];
                    self.instants
                        .extend(decision.skipped.iter().map(|skipped| Instant {
                            cpu: skipped,
                            ns,
                            what: InstantKind::Skipped {
                                by: cpu,
                                ctx: decision.ctx,
                            },
                        }));
                    let side_effect = matches!(
                        decision.reason,
                        TraceReason::Promotion | TraceReason::Rollover
                    );
                    match open.last_mut() {
                        Some((_, slot)) if !side_effect => {
                            if let Some((earlier_ns, earlier)) = slot.replace((ns, decision)) {
                                self.instants.push(instant(earlier_ns, earlier));
                            }
                        }
                        _ => self.instants.push(instant(ns, decision)),
                    }
                }
                RequestPoint::Closes => {
                    let (begin_ns, decision) = open.pop().expect("a request closes after it opens");
                    self.slices.push(Slice {
                        cpu,
                        begin_ns,
                        end_ns: ns,
                        what: SliceKind::Request(decision.map(|(_, decision)| decision)),
                    });
                }
            }
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
            Kind::IpiRound {
                round,
                purpose,
                targets,
                sent,
            } => Some((
                (event.cpu, round),
                Round {
                    sent_ns: sent,
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
