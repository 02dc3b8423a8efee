use super::*;
use serde_json::Value;

/// A run's output: another line, the events of one shootdown, the summary.
fn output() -> Vec<&'static str> {
    let mut lines = vec!["tlb-counters: mode=ipi cpus=3 ipis_sent=2"];
    lines.extend_from_slice(lanes::tests::TWO_TARGETS);
    lines.push("timeline-end: cpus=4 capacity=4096 recorded=5 dropped=0");
    lines
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("shootdown-timeline-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn run() -> RunInfo {
    RunInfo {
        command_line: "exec=tlbtest:threads,2 tlb.timeline=on".to_string(),
        dropped: 0,
    }
}

#[test]
fn both_files_are_written_and_the_json_is_valid() {
    let dir = scratch("both");
    let written = write(&dir, output(), &run(), &Window::Shootdown(1)).expect("written");
    assert_eq!(written.summary.recorded, 5);
    assert_eq!((written.shootdowns, written.drawn_shootdowns), (1, 1));
    assert_eq!(written.counts.flows, 2, "one arrow per target");
    let json: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("timeline.json")).unwrap()).unwrap();
    assert_eq!(validate::validate(&json), Ok(written.counts));
    assert_eq!(
        json["otherData"]["kernel_command_line"],
        "exec=tlbtest:threads,2 tlb.timeline=on"
    );
    let svg = fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(svg.starts_with("<svg "), "{svg}");
    assert!(svg.contains("Shootdown 1 of 1: CPU 0 flushes address space 2, 1 page (Ipi)"));
    assert_eq!(
        svg.matches(r#"marker-end="url(#flush)"><title>IPI"#)
            .count(),
        2
    );
    for cpu in 0..4 {
        assert!(svg.contains(&format!(">CPU {cpu}</text>")), "lane {cpu}");
    }
    assert!(
        svg.contains("<title>skipped by CPU 0's flush of address space 2</title>"),
        "CPU 3's skip is marked: {svg}"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_run_without_a_timeline_or_that_shootdown_is_refused() {
    let dir = scratch("refused");
    let plain = ["tlb-counters: mode=ipi cpus=3"];
    assert!(matches!(
        write(&dir, plain, &run(), &Window::All),
        Err(TimelineError::NotRecorded)
    ));
    assert!(matches!(
        write(&dir, output(), &run(), &Window::Shootdown(2)),
        Err(TimelineError::NoSuchShootdown {
            asked: 2,
            shootdowns: 1
        })
    ));
    let cut = [
        "timeline: cpu=0 ns=1",
        "timeline-end: cpus=1 capacity=1 recorded=1 dropped=0",
    ];
    assert!(matches!(
        write(&dir, cut, &run(), &Window::All),
        Err(TimelineError::BadLine { line: 1, .. })
    ));
    assert!(!dir.exists(), "nothing is written on an error");
}

#[test]
fn windows_parse_or_say_why_not() {
    assert_eq!(Window::parse("3"), Ok(Window::Shootdown(3)));
    assert_eq!(Window::parse("all"), Ok(Window::All));
    assert_eq!(Window::parse("typical"), Ok(Window::Typical));
    assert_eq!(Window::parse("last"), Ok(Window::Last));
    assert_eq!(Window::parse("promotion"), Ok(Window::Promotion));
    assert_eq!(Window::parse("lazy"), Ok(Window::Lazy));
    assert_eq!(
        Window::parse("2-256"),
        Ok(Window::Shootdowns {
            first: 2,
            last: 256
        })
    );
    assert_eq!(
        Window::parse("120.5..180"),
        Ok(Window::Span {
            from_us: 120.5,
            to_us: 180.0
        })
    );
    for bad in [
        "0", "-1", "x", "5..2", "1..x", "..3", "3-2", "0-4", "1-", "1-x",
    ] {
        assert!(Window::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn the_typical_shootdown_is_the_one_of_median_length() {
    // Three shootdowns of CPU 0, each with one IPI to CPU 1: 100, 900 and
    // 300 ns long. The median is the third.
    let mut lines = Vec::new();
    for (round, (begin, end)) in [(1000u64, 1100u64), (2000, 2900), (4000, 4300)]
        .into_iter()
        .enumerate()
    {
        let round = round + 1;
        lines.push(format!(
            "timeline: cpu=0 ns={} ipi-round round={round} for=flush targets=1 sent={}",
            begin + 40,
            begin + 10
        ));
        lines.push(format!(
            "timeline: cpu=1 ns={} handler from=0 round={round} began={} full=0 partial=1 pages=1 trims=0 lazy_leaves=0",
            begin + 30,
            begin + 20
        ));
        lines.push(format!("timeline: cpu=0 ns={end} request began={begin}"));
    }
    lines.push("timeline-end: cpus=2 capacity=4096 recorded=9 dropped=0".to_string());
    let dir = scratch("typical");
    let written = write(
        &dir,
        lines.iter().map(String::as_str),
        &run(),
        &Window::Typical,
    )
    .expect("written");
    assert_eq!(written.shootdowns, 3);
    let svg = fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(svg.contains("Shootdown 3 of 3 (of median length)"), "{svg}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn the_promotion_window_finds_the_shootdown_that_promoted() {
    let dir = scratch("promotion");
    assert!(matches!(
        write(&dir, output(), &run(), &Window::Promotion),
        Err(TimelineError::NoPromotion)
    ));
    let mut lines = output();
    // mm reports the promotion after the request's own decision.
    let at = lines
        .iter()
        .position(|line| line.contains("reason=Ipi"))
        .expect("the request's decision");
    lines.insert(
        at + 1,
        "timeline: cpu=0 ns=1960 decision ctx=2 range=all reason=Promotion skipped=-",
    );
    write(&dir, lines, &run(), &Window::Promotion).expect("written");
    let svg = fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(svg.contains("A promotion, in shootdown 1 of 1"), "{svg}");
    assert!(
        svg.contains("&#9650; Promotion</text>") || svg.contains("Promotion &#9650;</text>"),
        "the promotion is marked and named"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn the_lazy_window_runs_from_the_first_skip_to_the_switch_that_caught_up() {
    let dir = scratch("lazy");
    assert!(matches!(
        write(&dir, output(), &run(), &Window::Lazy),
        Err(TimelineError::NoCatchUp)
    ));
    // CPU 1 switches in (at 50, nothing skipped it before), then two
    // requests of CPU 0 skip it, and it switches back in from lazy mode.
    let lines = [
        "timeline: cpu=0 ns=30 request began=10",
        "timeline: cpu=1 ns=50 switch-flush ctx=2 lazy=no",
        "timeline: cpu=0 ns=1150 decision ctx=2 range=0x1000..0x2000 reason=LocalOnly skipped=1",
        "timeline: cpu=0 ns=1200 request began=1100",
        "timeline: cpu=0 ns=5150 decision ctx=2 range=0x1000..0x2000 reason=LocalOnly skipped=1",
        "timeline: cpu=0 ns=5200 request began=5100",
        "timeline: cpu=1 ns=9000 switch-flush ctx=2 lazy=yes",
        "timeline-end: cpus=2 capacity=4096 recorded=7 dropped=0",
    ];
    write(&dir, lines, &run(), &Window::Lazy).expect("written");
    let svg = fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(
        svg.contains("CPU 1 skipped by 2 flushes, then back from lazy mode and flushing"),
        "{svg}"
    );
    // From the first of the two requests (1100), less a tenth of 7900.
    assert!(svg.contains("microseconds from 0.3 us after boot"), "{svg}");
    assert_eq!(svg.matches("<title>skipped by CPU 0").count(), 2, "{svg}");
    assert!(svg.contains("<title>back from lazy mode in address space 2: flush</title>"));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_run_of_shootdowns_fills_the_window() {
    let dir = scratch("several");
    let mut lines = output();
    lines.insert(1, "timeline: cpu=0 ns=900 request began=800");
    lines.insert(
        1,
        "timeline: cpu=0 ns=880 ipi-round round=7 for=flush targets=1 sent=810",
    );
    lines.insert(
        1,
        "timeline: cpu=1 ns=850 handler from=0 round=7 began=820 full=1 partial=0 pages=0 trims=0 lazy_leaves=0",
    );
    let written = write(
        &dir,
        lines,
        &run(),
        &Window::Shootdowns { first: 1, last: 2 },
    )
    .expect("written");
    assert_eq!((written.shootdowns, written.drawn_shootdowns), (2, 2));
    let svg = fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(
        svg.contains("Shootdowns 1 to 2 of 2, from CPU 0 flushes"),
        "{svg}"
    );
    assert!(matches!(
        write(
            &dir,
            output(),
            &run(),
            &Window::Shootdowns { first: 1, last: 3 }
        ),
        Err(TimelineError::NoSuchShootdown {
            asked: 3,
            shootdowns: 1
        })
    ));
    let _ = fs::remove_dir_all(&dir);
}

/// Thirty requests that skip CPU 1 within a few nanoseconds of each other,
/// in a window of microseconds, are one ring on CPU 1's lane with their
/// count beside it; one that skips it much later is a ring of its own.
#[test]
fn crowded_skips_are_one_ring_with_their_count() {
    let dir = scratch("crowded");
    let mut lines: Vec<String> = (0..30u64)
        .flat_map(|i| {
            let ns = 1000 + 2 * i;
            [
                format!(
                    "timeline: cpu=0 ns={ns} decision ctx=2 range=0x1000..0x2000 reason=LocalOnly skipped=1"
                ),
                format!("timeline: cpu=0 ns={} request began={}", ns + 1, ns - 1),
            ]
        })
        .collect();
    lines.push(String::from(
        "timeline: cpu=0 ns=8000 decision ctx=2 range=0x1000..0x2000 reason=LocalOnly skipped=1",
    ));
    lines.push(String::from("timeline: cpu=0 ns=8001 request began=7999"));
    lines.push(String::from(
        "timeline-end: cpus=2 capacity=4096 recorded=62 dropped=0",
    ));
    write(&dir, lines.iter().map(String::as_str), &run(), &Window::All).expect("written");
    let svg = fs::read_to_string(dir.join("timeline.svg")).unwrap();
    assert!(svg.contains("&#215;30</text>"), "no count of the 30: {svg}");
    assert!(
        svg.contains("<title>30 times: skipped by CPU 0's flush of address space 2</title>"),
        "{svg}"
    );
    // One ring per cluster (the legend draws one more, without a tooltip).
    assert_eq!(
        svg.matches("flush of address space 2</title></circle>")
            .count(),
        2,
        "one ring per cluster: {svg}"
    );
    let _ = fs::remove_dir_all(&dir);
}
