use super::*;
use alloc::string::ToString;

fn cpus(list: &[usize]) -> CpuSet {
    list.iter().copied().collect()
}

/// One event of every kind, with payloads that use every word.
fn one_of_each() -> Vec<Kind> {
    vec![
        Kind::Decision(Decision {
            ctx: Some(2),
            range: Some((0x1000_0001_f000, 0x1000_0002_0000)),
            reason: TraceReason::Ipi,
            skipped: cpus(&[3, 200]),
        }),
        Kind::Decision(Decision {
            ctx: None,
            range: None,
            reason: TraceReason::Kernel,
            skipped: CpuSet::new(),
        }),
        Kind::IpiRound {
            round: 7,
            purpose: Purpose::Flush,
            targets: cpus(&[1, 2, 255]),
            sent: 10,
        },
        Kind::IpiRound {
            round: 8,
            purpose: Purpose::Broadcast,
            targets: cpus(&[0]),
            sent: 20,
        },
        Kind::Handler {
            from: 0,
            round: 7,
            began: 30,
            flushed: Flushed {
                full: 1,
                partial: 2,
                pages: 3,
                trims: 4,
                lazy_leaves: 5,
            },
        },
        Kind::Invlpgb(InvlpgbOperands {
            rax: 0x1000_0000_1007,
            ecx: 0x8000_0001,
            edx: 0x1_0000,
        }),
        Kind::Tlbsync { began: 40 },
        Kind::Request { began: 50 },
        Kind::SwitchFlush { ctx: 9, lazy: true },
        Kind::SwitchFlush {
            ctx: 3,
            lazy: false,
        },
    ]
}

#[test]
fn every_kind_survives_its_slot() {
    let kinds = one_of_each();
    let mut tags: Vec<u64> = Vec::new();
    for kind in kinds {
        let (tag, words, used) = kind.pack();
        assert_ne!(tag, 0, "tag 0 is an empty slot");
        assert!(
            words[used..].iter().all(|&word| word == 0),
            "{kind:?} uses more than the {used} words it stores"
        );
        // The recorder stores the used words into a slot that was all 0.
        let mut slot = [0; PAYLOAD_WORDS];
        slot[..used].copy_from_slice(&words[..used]);
        assert_eq!(Kind::unpack(tag, &slot), Some(kind));
        tags.push(tag);
    }
    tags.sort_unstable();
    tags.dedup();
    assert_eq!(tags.len(), Kind::NAMES.len(), "one tag per kind");
}

#[test]
fn times_are_converted_and_nothing_else() {
    let double = |ticks: u64| ticks * 2;
    for kind in one_of_each() {
        let converted = kind.map_times(double);
        assert_eq!(converted.began(), kind.began().map(double), "{kind:?}");
        assert_eq!(converted.name(), kind.name());
        if kind.began().is_none() {
            assert_eq!(converted, kind);
        }
    }
}

#[test]
fn every_reason_survives_its_slot_and_line() {
    for reason in REASONS {
        let kind = Kind::Decision(Decision {
            ctx: Some(1),
            range: None,
            reason,
            skipped: CpuSet::new(),
        });
        let (tag, words, _) = kind.pack();
        assert_eq!(Kind::unpack(tag, &words), Some(kind));
        let event = Event {
            cpu: 0,
            ns: 5,
            kind,
        };
        assert_eq!(Event::parse(&event.to_string()), Ok(event));
    }
}

#[test]
fn an_empty_or_unknown_slot_is_no_event() {
    let words = [0; PAYLOAD_WORDS];
    assert_eq!(Kind::unpack(0, &words), None);
    assert_eq!(Kind::unpack(Kind::NAMES.len() as u64 + 1, &words), None);
    // A decision whose reason word is out of range.
    let mut bad_reason = words;
    bad_reason[3] = REASONS.len() as u64;
    assert_eq!(Kind::unpack(1, &bad_reason), None);
    // A round whose purpose word is neither.
    let mut bad_purpose = words;
    bad_purpose[1] = 2;
    assert_eq!(Kind::unpack(2, &bad_purpose), None);
    // A switch whose lazy word is neither.
    assert_eq!(Kind::unpack(7, &bad_purpose), None);
}

#[test]
fn every_kind_survives_its_line() {
    for (index, kind) in one_of_each().into_iter().enumerate() {
        let event = Event {
            cpu: index % 4,
            // After every time the events carry.
            ns: 1_000_000 + index as u64,
            kind,
        };
        let line = event.to_string();
        assert!(line.starts_with(PREFIX), "{line}");
        assert_eq!(Event::parse(&line), Ok(event), "{line}");
    }
}

#[test]
fn the_lines_read_as_the_module_docs_show() {
    let handler = Event {
        cpu: 1,
        ns: 81237120,
        kind: Kind::Handler {
            from: 0,
            round: 3,
            began: 81236012,
            flushed: Flushed {
                partial: 1,
                pages: 1,
                ..Flushed::default()
            },
        },
    };
    assert_eq!(
        handler.to_string(),
        "timeline: cpu=1 ns=81237120 handler from=0 round=3 began=81236012 full=0 partial=1 pages=1 trims=0 lazy_leaves=0"
    );
    let round = Event {
        cpu: 0,
        ns: 81238003,
        kind: Kind::IpiRound {
            round: 3,
            purpose: Purpose::Flush,
            targets: cpus(&[1, 2]),
            sent: 81234567,
        },
    };
    assert_eq!(
        round.to_string(),
        "timeline: cpu=0 ns=81238003 ipi-round round=3 for=flush targets=1,2 sent=81234567"
    );
    let decision = Event {
        cpu: 0,
        ns: 9,
        kind: Kind::Decision(Decision {
            ctx: Some(2),
            range: Some((0x1000, 0x3000)),
            reason: TraceReason::Ipi,
            skipped: CpuSet::new(),
        }),
    };
    assert_eq!(
        decision.to_string(),
        "timeline: cpu=0 ns=9 decision ctx=2 range=0x1000..0x3000 reason=Ipi skipped=-"
    );
    let summary = Summary {
        cpus: 4,
        capacity: 4096,
        recorded: 9120,
        dropped: 0,
    };
    assert_eq!(
        summary.to_string(),
        "timeline-end: cpus=4 capacity=4096 recorded=9120 dropped=0"
    );
    assert_eq!(Summary::parse(&summary.to_string()), Ok(summary));
}

#[test]
fn bad_lines_are_refused_with_the_reason() {
    let refusals = [
        (
            "timeline: cpu=0 ns=5",
            "the line ends before the event's name",
        ),
        ("timeline: cpu=0 ns=5 nap", "no event is called 'nap'"),
        (
            "timeline: ns=5 cpu=0 request began=1",
            "expected cpu=..., found 'ns=5'",
        ),
        (
            "timeline: cpu=999 ns=5 request began=1",
            "cpu=999 is not a CPU",
        ),
        (
            "timeline: cpu=0 ns=five request began=1",
            "ns=five is not a number",
        ),
        (
            "timeline: cpu=0 ns=5 request began=1 extra",
            "unexpected 'extra' at the end",
        ),
        ("timeline: cpu=0 ns=5 request", "the line ends before began"),
        (
            "timeline: cpu=0 ns=5 request began=6",
            "the request began at 6, after it ended at 5",
        ),
        (
            "timeline: cpu=0 ns=5 ipi-round round=1 for=flush targets=1,x sent=1",
            "targets=1,x is not a CPU list",
        ),
        (
            "timeline: cpu=0 ns=5 ipi-round round=1 for=fun targets=1 sent=1",
            "for=fun is not flush or broadcast",
        ),
        (
            "timeline: cpu=0 ns=5 switch-flush ctx=2 lazy=maybe",
            "lazy=maybe is not yes or no",
        ),
        (
            "timeline: cpu=0 ns=5 decision ctx=2 range=10..20 reason=Ipi skipped=-",
            "range=10..20 is not 'all' or START..END in hex",
        ),
        (
            "timeline: cpu=0 ns=5 decision ctx=2 range=all reason=Often skipped=-",
            "reason=Often is not a reason",
        ),
        (
            "timeline: cpu=0 ns=5 invlpgb rax=0x1 ecx=0x100000000 edx=0x0",
            "ecx=0x100000000 is over 32 bits",
        ),
        ("tlb-trace: cpu=0", "does not start with 'timeline: '"),
    ];
    for (line, why) in refusals {
        assert_eq!(
            Event::parse(line),
            Err(ParseError(why.to_string())),
            "{line}"
        );
    }
    assert!(Summary::parse("timeline-end: cpus=4 capacity=4096 recorded=1").is_err());
}

#[test]
fn parse_lines_keeps_events_in_order_and_names_a_bad_line() {
    let lines = [
        "tlb-counters: mode=ipi cpus=2",
        "timeline: cpu=1 ns=20 request began=15",
        "timeline: cpu=0 ns=10 request began=5",
        "timeline-end: cpus=2 capacity=16 recorded=2 dropped=1",
    ];
    let (events, summary) = parse_lines(lines).expect("good lines");
    assert_eq!(
        events.iter().map(|event| event.ns).collect::<Vec<_>>(),
        vec![20, 10]
    );
    assert_eq!(summary.map(|summary| summary.dropped), Some(1));
    let broken = ["timeline: cpu=0 ns=1 request began=1", "timeline: cpu=0"];
    let (line, _) = parse_lines(broken).expect_err("the second line is cut");
    assert_eq!(line, 2);
}
