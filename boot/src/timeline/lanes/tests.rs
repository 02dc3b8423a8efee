use super::*;
use kernel::timeline::{Flushed, parse_lines};

/// Events written as the kernel prints them, so that a test reads as a run.
fn events(lines: &[&str]) -> Vec<Event> {
    let (events, _) = parse_lines(lines.iter().copied()).expect("test lines parse");
    events
}

/// CPU 0 flushes one page of address space 2 with IPIs to CPUs 1 and 2;
/// CPU 3 was lazy and skipped. CPU 2's lines come first (the kernel prints
/// CPU by CPU; any order must do).
pub(in crate::timeline) const TWO_TARGETS: &[&str] = &[
    "timeline: cpu=2 ns=1300 handler-begin from=0 round=1",
    "timeline: cpu=2 ns=1700 handler-end from=0 round=1 full=0 partial=1 pages=1 trims=0",
    "timeline: cpu=0 ns=1000 request-begin",
    "timeline: cpu=0 ns=1100 ipis-sent round=1 for=flush targets=1,2",
    "timeline: cpu=0 ns=1900 answers-seen round=1",
    "timeline: cpu=0 ns=1950 decision ctx=2 range=0x1000..0x2000 reason=Ipi skipped=3",
    "timeline: cpu=0 ns=2000 request-end",
    "timeline: cpu=1 ns=1200 handler-begin from=0 round=1",
    "timeline: cpu=1 ns=1600 handler-end from=0 round=1 full=1 partial=0 pages=0 trims=0",
];

#[test]
fn a_shootdown_becomes_slices_and_one_arrow_per_target() {
    let lanes = Lanes::from_events(&events(TWO_TARGETS));
    assert_eq!(lanes.cpus, 3);
    assert_eq!(lanes.unmatched, 0);
    let arrows: Vec<_> = lanes
        .arrows
        .iter()
        .map(|arrow| (arrow.from, arrow.sent_ns, arrow.to, arrow.received_ns))
        .collect();
    assert_eq!(arrows, [(0, 1100, 1, 1200), (0, 1100, 2, 1300)]);
    let request = &lanes.slices[0];
    assert_eq!(
        (request.cpu, request.begin_ns, request.end_ns),
        (0, 1000, 2000)
    );
    let SliceKind::Request(Some(decision)) = &request.what else {
        panic!("the request carries its decision: {request:?}");
    };
    assert_eq!(decision.ctx, Some(2));
    assert_eq!(decision.skipped.iter().collect::<Vec<_>>(), [3]);
    assert!(lanes.slices.iter().any(|slice| slice.what
        == SliceKind::Waiting {
            round: 1,
            purpose: Purpose::Flush,
            targets: 2
        }
        && (slice.begin_ns, slice.end_ns) == (1100, 1900)));
    let handler_on_1 = lanes
        .slices
        .iter()
        .find(|slice| slice.cpu == 1)
        .expect("CPU 1's handler");
    assert_eq!(
        handler_on_1.what,
        SliceKind::Handler {
            from: 0,
            round: 1,
            purpose: Purpose::Flush,
            flushed: Flushed {
                full: 1,
                ..Flushed::default()
            }
        }
    );
    assert_eq!(lanes.shootdowns().len(), 1);
    assert_eq!(lanes.span(), Some((1000, 2000)));
}

#[test]
fn events_whose_partner_was_dropped_are_counted_not_drawn() {
    let lines = [
        // The end of a request whose begin did not fit.
        "timeline: cpu=0 ns=10 request-end",
        // A handler for a round whose sender's buffer was full.
        "timeline: cpu=1 ns=20 handler-begin from=0 round=9",
        "timeline: cpu=1 ns=30 handler-end from=0 round=9 full=1 partial=0 pages=0 trims=0",
        // A TLBSYNC that never ended in the buffer.
        "timeline: cpu=1 ns=40 tlbsync-begin",
    ];
    let lanes = Lanes::from_events(&events(&lines));
    assert!(lanes.arrows.is_empty());
    // The unmatched end, the arrow without a round, the open TLBSYNC.
    assert_eq!(lanes.unmatched, 3);
    assert_eq!(lanes.slices.len(), 1, "the handler itself is whole");
}

#[test]
fn a_decision_outside_a_request_is_an_instant_and_invlpgb_too() {
    let lines = [
        "timeline: cpu=0 ns=5 decision ctx=4 range=all reason=Promotion skipped=-",
        "timeline: cpu=0 ns=6 request-begin",
        "timeline: cpu=0 ns=7 invlpgb rax=0x100000001007 ecx=0x0 edx=0x10000",
        "timeline: cpu=0 ns=8 tlbsync-begin",
        "timeline: cpu=0 ns=9 tlbsync-end",
        "timeline: cpu=0 ns=10 decision ctx=4 range=0x100000001000..0x100000002000 reason=Broadcast skipped=-",
        "timeline: cpu=0 ns=11 request-end",
    ];
    let lanes = Lanes::from_events(&events(&lines));
    assert_eq!(lanes.instants.len(), 2);
    assert!(matches!(lanes.instants[0].what, InstantKind::Decision(d) if d.ctx == Some(4)));
    assert!(matches!(lanes.instants[1].what, InstantKind::Invlpgb(_)));
    assert!(
        lanes
            .slices
            .iter()
            .any(|slice| slice.what == SliceKind::Tlbsync)
    );
    assert_eq!(lanes.shootdowns().len(), 1, "an INVLPGB reaches every CPU");
}

#[test]
fn a_window_keeps_what_overlaps_it() {
    let lanes = Lanes::from_events(&events(TWO_TARGETS));
    let early = lanes.window(0, 1050);
    assert_eq!(early.arrows.len(), 0, "the IPIs go out at 1100");
    assert_eq!(early.slices.len(), 1, "only the request has begun");
    let sending = lanes.window(1150, 1150);
    assert_eq!(sending.arrows.len(), 2, "both IPIs are on their way");
    assert_eq!(sending.slices.len(), 2, "the request and the wait");
    let all = lanes.window(0, u64::MAX);
    assert_eq!(all, lanes);
}

#[test]
fn a_request_is_named_by_its_last_decision_and_a_promotion_stays_an_instant() {
    // The broadcast that finishes a transition: the stragglers' IPI flush
    // is reported first, the broadcast (the request's own decision) last;
    // then the next request promotes another address space.
    let lines = [
        "timeline: cpu=0 ns=1 request-begin",
        "timeline: cpu=0 ns=2 decision ctx=2 range=0x1000..0x2000 reason=Ipi skipped=-",
        "timeline: cpu=0 ns=3 decision ctx=2 range=0x1000..0x2000 reason=Broadcast skipped=-",
        "timeline: cpu=0 ns=4 request-end",
        "timeline: cpu=0 ns=5 request-begin",
        "timeline: cpu=0 ns=6 decision ctx=3 range=0x1000..0x2000 reason=Ipi skipped=-",
        "timeline: cpu=0 ns=7 decision ctx=3 range=all reason=Promotion skipped=-",
        "timeline: cpu=0 ns=8 request-end",
    ];
    let lanes = Lanes::from_events(&events(&lines));
    let reasons: Vec<_> = lanes
        .slices
        .iter()
        .map(|slice| match &slice.what {
            SliceKind::Request(Some(decision)) => decision.reason,
            other => panic!("only requests here: {other:?}"),
        })
        .collect();
    assert_eq!(reasons, [TraceReason::Broadcast, TraceReason::Ipi]);
    let instants: Vec<_> = lanes
        .instants
        .iter()
        .map(|instant| match &instant.what {
            InstantKind::Decision(decision) => (instant.ns, decision.reason),
            other => panic!("only decisions here: {other:?}"),
        })
        .collect();
    assert_eq!(
        instants,
        [(2, TraceReason::Ipi), (7, TraceReason::Promotion)]
    );
}
