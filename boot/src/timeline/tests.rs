use super::*;
use serde_json::Value;

/// A run's output: another line, the events of one shootdown, the summary.
fn output() -> Vec<&'static str> {
    let mut lines = vec!["tlb-counters: mode=ipi cpus=3 ipis_sent=2"];
    lines.extend_from_slice(lanes::tests::TWO_TARGETS);
    lines.push("timeline-end: cpus=3 capacity=4096 recorded=9 dropped=0");
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
    let written = write(&dir, output(), &run(), &Window::default()).expect("written");
    assert_eq!(written.summary.recorded, 9);
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
    for cpu in 0..3 {
        assert!(svg.contains(&format!(">CPU {cpu}</text>")), "lane {cpu}");
    }
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
    assert_eq!(
        Window::parse("120.5..180"),
        Ok(Window::Span {
            from_us: 120.5,
            to_us: 180.0
        })
    );
    for bad in ["0", "-1", "x", "5..2", "1..x", "..3"] {
        assert!(Window::parse(bad).is_err(), "{bad}");
    }
}
