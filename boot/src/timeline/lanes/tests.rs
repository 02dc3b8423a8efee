use super::*;
use kernel::timeline::{Flushed, parse_lines};

/// Events written as the kernel prints them, so that a test reads as a run.
fn events(lines: &[&str]) -> Vec<Event> {
    let (events, _) = parse_lines(lines.iter().copied()).expect("test lines parse");
    events
}

/// CPU 0 flushes one page of address space 2 with IPIs to CPUs 1 and 2;
/// CPU 3 was lazy and skipped. CPU 2's line comes first (the kernel prints
/// CPU by CPU; any order must do).
pub(in crate::timeline) const TWO_TARGETS: &[&str] = &[
    "timeline: cpu=2 ns=1700 handler from=0 round=1 began=1300 full=0 partial=1 pages=1 trims=0 lazy_leaves=0",
    "timeline: cpu=0 ns=1050 decision ctx=2 range=0x1000..0x2000 reason=Ipi skipped=3",
    "timeline: cpu=0 ns=1900 ipi-round round=1 for=flush targets=1,2 sent=1100",
    "timeline: cpu=0 ns=2000 request began=1000",
    "timeline: cpu=1 ns=1600 handler from=0 round=1 began=1200 full=1 partial=0 pages=0 trims=0 lazy_leaves=0",
];

#[test]
fn a_shootdown_becomes_slices_and_one_arrow_per_target() {
    let lanes = Lanes::from_events(&events(TWO_TARGETS));
    assert_eq!(lanes.cpus, 3);
    assert_eq!(lanes.unmatched, 0);
    // CPU 3, skipped, is marked on its lane, though it recorded nothing.
    assert_eq!(
        lanes.instants,
        [Instant {
            cpu: 3,
            ns: 1050,
            what: InstantKind::Skipped {
                by: 0,
                ctx: Some(2)
            }
        }]
    );
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
fn a_handler_whose_round_was_dropped_is_drawn_without_its_arrow() {
    // The sender's buffer was full when its round was answered.
    let lines = [
        "timeline: cpu=1 ns=30 handler from=0 round=9 began=20 full=1 partial=0 pages=0 trims=0 lazy_leaves=0",
        "timeline: cpu=0 ns=40 request began=10",
    ];
    let lanes = Lanes::from_events(&events(&lines));
    assert!(lanes.arrows.is_empty());
    assert_eq!(lanes.unmatched, 1);
    assert_eq!(
        lanes.slices.len(),
        2,
        "the handler and the request are whole"
    );
}

#[test]
fn a_decision_outside_a_request_is_an_instant_and_invlpgb_too() {
    let lines = [
        "timeline: cpu=0 ns=5 decision ctx=4 range=all reason=Promotion skipped=-",
        "timeline: cpu=0 ns=7 invlpgb rax=0x100000001007 ecx=0x0 edx=0x10000",
        "timeline: cpu=0 ns=9 tlbsync began=8",
        "timeline: cpu=0 ns=10 decision ctx=4 range=0x100000001000..0x100000002000 reason=Broadcast skipped=-",
        "timeline: cpu=0 ns=11 request began=6",
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
    assert_eq!(early.instants.len(), 1, "CPU 3 was skipped at 1050");
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
        "timeline: cpu=0 ns=2 decision ctx=2 range=0x1000..0x2000 reason=Ipi skipped=-",
        "timeline: cpu=0 ns=3 decision ctx=2 range=0x1000..0x2000 reason=Broadcast skipped=-",
        "timeline: cpu=0 ns=4 request began=1",
        "timeline: cpu=0 ns=6 decision ctx=3 range=0x1000..0x2000 reason=Ipi skipped=-",
        "timeline: cpu=0 ns=7 decision ctx=3 range=all reason=Promotion skipped=-",
        "timeline: cpu=0 ns=8 request began=5",
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

#[test]
fn a_decision_names_the_innermost_request_it_falls_in() {
    // A request preempted by another on the same CPU: the inner one's
    // decision is its own, the outer one's comes after the inner ended.
    let lines = [
        "timeline: cpu=0 ns=30 decision ctx=3 range=all reason=LocalOnly skipped=-",
        "timeline: cpu=0 ns=40 request began=20",
        "timeline: cpu=0 ns=50 decision ctx=2 range=all reason=Ipi skipped=-",
        "timeline: cpu=0 ns=60 request began=10",
    ];
    let lanes = Lanes::from_events(&events(&lines));
    let requests: Vec<_> = lanes
        .slices
        .iter()
        .map(|slice| match &slice.what {
            SliceKind::Request(Some(decision)) => (slice.begin_ns, slice.end_ns, decision.ctx),
            other => panic!("only named requests here: {other:?}"),
        })
        .collect();
    assert_eq!(requests, [(10, 60, Some(2)), (20, 40, Some(3))]);
    assert!(lanes.instants.is_empty());
}

#[test]
fn a_switch_that_flushed_is_a_mark_on_its_lane() {
    let lines = ["timeline: cpu=1 ns=70 switch-flush ctx=2 lazy=yes"];
    let lanes = Lanes::from_events(&events(&lines));
    assert_eq!(
        lanes.instants,
        [Instant {
            cpu: 1,
            ns: 70,
            what: InstantKind::SwitchFlush { ctx: 2, lazy: true }
        }]
    );
    assert!(lanes.shootdowns().is_empty(), "a switch is no shootdown");
}
