//! The timeline end to end: boot with `tlb.timeline=on`, read the events
//! back, and check that the picture tells what the counters tell: one IPI
//! arrow per flush IPI `mm` counted, a handler at the end of each, and,
//! once an address space is promoted, broadcasts instead of targeted IPIs.

use std::time::Duration;

use boot::{
    machine::{self, Config, Outcome, Qemu, Run},
    timeline::{
        self, Lanes, RunInfo, Window,
        lanes::{InstantKind, Slice, SliceKind},
    },
};
use kernel::timeline::{Purpose, parse_lines};
use mm::TraceReason;

fn boot(cpus: u32, cmdline: &str) -> Run {
    boot_on(Config::default(), cpus, cmdline)
}

fn boot_on(machine: Config, cpus: u32, cmdline: &str) -> Run {
    let config = machine
        .cpus(cpus)
        .cmdline(cmdline)
        .timeout(Duration::from_secs(300))
        .stall_timeout(Duration::from_secs(120));
    let run = machine::run(&config).unwrap_or_else(|error| panic!("cannot boot: {error}"));
    assert_eq!(run.outcome, Outcome::Success, "{}", run.describe());
    run
}

/// Writes the run's timeline files (all of it) into a scratch directory,
/// checks both are there, and returns what was written and the JSON.
fn write_files(run: &Run, name: &str) -> (timeline::Written, serde_json::Value) {
    let dir =
        std::env::temp_dir().join(format!("shootdown-timeline-{}-{name}", std::process::id()));
    let info = RunInfo {
        command_line: name.to_string(),
        dropped: 0,
    };
    let lines = run.serial.iter().map(String::as_str);
    let written =
        timeline::write(&dir, lines, &info, &Window::All).unwrap_or_else(|error| panic!("{error}"));
    assert!(dir.join("timeline.svg").exists(), "no picture");
    let raw = std::fs::read_to_string(dir.join("timeline.txt")).expect("the raw lines");
    let printed: Vec<&str> = run
        .serial
        .iter()
        .map(String::as_str)
        .filter(|line| line.starts_with("timeline: ") || line.starts_with("timeline-end: "))
        .collect();
    assert_eq!(
        raw.lines().collect::<Vec<_>>(),
        printed,
        "timeline.txt is not the event lines the kernel printed"
    );
    let json = std::fs::read_to_string(dir.join("timeline.json")).expect("the trace");
    let _ = std::fs::remove_dir_all(&dir);
    (
        written,
        serde_json::from_str(&json).expect("the trace is JSON"),
    )
}

/// The run's timeline, checked whole: nothing dropped, nothing unpaired,
/// and the files it makes pass the format check.
fn lanes_of(run: &Run, name: &str) -> Lanes {
    let (events, summary) =
        parse_lines(run.serial.iter().map(String::as_str)).expect("the timeline lines parse");
    let summary = summary.unwrap_or_else(|| panic!("no timeline-end line\n{}", run.describe()));
    assert_eq!(
        summary.dropped, 0,
        "the run fits in the buffers: {summary:?}"
    );
    assert_eq!(summary.recorded as usize, events.len());
    let lanes = Lanes::from_events(&events);
    assert_eq!(lanes.unmatched, 0, "every begin has its end");

    let (written, _) = write_files(run, name);
    assert_eq!(written.counts.flows, lanes.arrows.len());
    lanes
}

fn reason(request: &Slice) -> Option<TraceReason> {
    match &request.what {
        SliceKind::Request(Some(decision)) => Some(decision.reason),
        _ => None,
    }
}

#[test]
fn a_two_thread_run_draws_one_arrow_per_flush_ipi() {
    let run = boot(2, "tlb=ipi tlb.timeline=on exec=tlbtest:promote,2,20");
    let lanes = lanes_of(&run, "two-threads");
    let ipis_sent = run.number("tlb-counters:", "ipis_sent");
    assert!(ipis_sent >= 20, "the workload sends IPIs: {ipis_sent}");
    assert_eq!(
        lanes.arrows.len() as u64,
        ipis_sent,
        "one arrow per flush IPI"
    );
    assert!(
        lanes
            .arrows
            .iter()
            .all(|arrow| arrow.purpose == Purpose::Flush)
    );
    // Each arrow ends where its target's handler for that round begins.
    for arrow in &lanes.arrows {
        assert!(
            lanes.slices.iter().any(|slice| slice.cpu == arrow.to
                && slice.begin_ns == arrow.received_ns
                && matches!(slice.what, SliceKind::Handler { from, round, .. }
                    if from == arrow.from && round == arrow.round)),
            "no handler at the end of {arrow:?}"
        );
    }
    assert_eq!(
        lanes.shootdowns().len() as u64,
        ipis_sent,
        "one target each"
    );
}

/// The last `count` flush requests of CPU 0: in `tlbtest promote`, the
/// program's measured discards, made after the promotion.
fn last_requests(lanes: &Lanes, count: usize) -> Vec<&Slice> {
    let requests: Vec<&Slice> = lanes
        .slices
        .iter()
        .filter(|slice| slice.cpu == 0 && reason(slice).is_some())
        .collect();
    assert!(requests.len() >= count, "{} requests", requests.len());
    requests[requests.len() - count..].to_vec()
}

/// The arrows of `purpose` that `request`'s CPU sent while it ran.
fn sent_during(lanes: &Lanes, request: &Slice, purpose: Purpose) -> usize {
    lanes
        .arrows
        .iter()
        .filter(|arrow| {
            arrow.from == request.cpu
                && arrow.purpose == purpose
                && (request.begin_ns..=request.end_ns).contains(&arrow.sent_ns)
        })
        .count()
}

/// `request` was a broadcast: no targeted IPI went out while it ran, and
/// `broadcast_ipis` IPIs of the software backend did (0 with INVLPGB).
fn assert_broadcast(lanes: &Lanes, request: &Slice, broadcast_ipis: usize) {
    assert_eq!(reason(request), Some(TraceReason::Broadcast), "{request:?}");
    let sent = |purpose| sent_during(lanes, request, purpose);
    assert_eq!(sent(Purpose::Flush), 0, "a targeted IPI in {request:?}");
    assert_eq!(sent(Purpose::Broadcast), broadcast_ipis, "in {request:?}");
}

#[test]
fn a_promoted_run_broadcasts_instead_of_sending_targeted_ipis() {
    let run = boot(
        4,
        "tlb=broadcast-sw tlb.timeline=on exec=tlbtest:promote,4,20",
    );
    assert!(run.printed("promoted=yes"), "{}", run.describe());
    let lanes = lanes_of(&run, "promoted");
    for request in last_requests(&lanes, 20) {
        assert_broadcast(&lanes, request, 3);
    }
}

/// On the patched QEMU (`SHOOTDOWN_QEMU_INVLPGB`, as in tests/invlpgb.rs;
/// ignored without it), a promoted flush interrupts nobody: its picture is
/// INVLPGBs and one TLBSYNC on the flushing CPU, and no arrow at all.
#[test]
#[cfg_attr(
    not(tier_qemu_invlpgb),
    ignore = "needs SHOOTDOWN_QEMU_INVLPGB=$(.ci/qemu-invlpgb)"
)]
fn a_promoted_run_on_invlpgb_sends_no_ipi_at_all() {
    let qemu = Qemu::from_prefix_variable(
        "SHOOTDOWN_QEMU_INVLPGB",
        ".ci/run builds it with .ci/qemu-invlpgb",
    );
    let machine = Config::default()
        .emulator(qemu)
        .cpu_model("EPYC-Milan,+invlpgb");
    let run = boot_on(
        machine,
        4,
        "tlb=invlpgb tlb.timeline=on exec=tlbtest:promote,4,20",
    );
    assert!(run.printed("promoted=yes"), "{}", run.describe());
    let lanes = lanes_of(&run, "invlpgb");
    for request in last_requests(&lanes, 20) {
        assert_broadcast(&lanes, request, 0);
        let within = |ns: u64| (request.begin_ns..=request.end_ns).contains(&ns);
        assert!(
            lanes.instants.iter().any(|instant| instant.cpu == 0
                && within(instant.ns)
                && matches!(instant.what, InstantKind::Invlpgb(_))),
            "no INVLPGB in {request:?}"
        );
        let syncs = lanes
            .slices
            .iter()
            .filter(|slice| {
                slice.cpu == 0 && slice.what == SliceKind::Tlbsync && within(slice.begin_ns)
            })
            .count();
        assert_eq!(syncs, 1, "one TLBSYNC in {request:?}");
    }
}

/// A run longer than the buffers (`tlb.timeline=256`: 256 events per CPU)
/// keeps each CPU's first events, counts the rest as dropped, and still
/// makes a valid trace of what it kept.
#[test]
fn a_full_buffer_keeps_its_start_and_counts_the_rest() {
    let run = boot(2, "tlb=ipi tlb.timeline=256 exec=tlbtest:promote,2,100");
    let (events, summary) =
        parse_lines(run.serial.iter().map(String::as_str)).expect("the timeline lines parse");
    let summary = summary.expect("a timeline-end line");
    assert_eq!(summary.capacity, 256, "{summary:?}");
    assert!(
        summary.dropped > 0,
        "400 flushes overflow 256 events: {summary:?}"
    );
    assert_eq!(summary.recorded as usize, events.len());
    let kept: Vec<usize> = (0..2)
        .map(|cpu| events.iter().filter(|event| event.cpu == cpu).count())
        .collect();
    assert!(
        kept.iter().all(|&kept| kept <= summary.capacity),
        "{kept:?}"
    );
    assert!(
        kept.contains(&summary.capacity),
        "a full buffer is full: {kept:?}"
    );
    let (written, json) = write_files(&run, "full");
    assert_eq!(written.summary, summary);
    assert_eq!(json["otherData"]["dropped_events"], summary.dropped);
}

/// `tlbtest lazy`: CPU 1 idles lazily with the address space loaded, so
/// CPU 0's discards skip it (a mark on CPU 1's lane for each), until a
/// munmap that frees a page table reaches it by IPI; when its thread
/// wakes, its switch back in flushes (a mark too), and the `lazy` window
/// draws that story.
#[test]
fn a_lazy_cpu_is_marked_skipped_and_then_caught_up() {
    let run = boot(2, "tlb=ipi tlb.timeline=on exec=tlbtest:lazy");
    let lanes = lanes_of(&run, "lazy");
    let skips = lanes
        .instants
        .iter()
        .filter(|instant| {
            instant.cpu == 1 && matches!(instant.what, InstantKind::Skipped { by: 0, .. })
        })
        .count();
    assert!(skips >= 51, "the 51 ordinary discards skip CPU 1: {skips}");
    // The freed page table reaches lazy CPU 1 by IPI, and its handler
    // leaves the address space instead of flushing pages.
    assert!(
        lanes.slices.iter().any(|slice| slice.cpu == 1
            && matches!(slice.what, SliceKind::Handler { from: 0, flushed, .. }
                if flushed.lazy_leaves == 1)),
        "no handler on CPU 1 that left lazy mode"
    );
    assert!(
        lanes
            .instants
            .iter()
            .any(|instant| instant.cpu == 1
                && matches!(instant.what, InstantKind::SwitchFlush { .. })),
        "CPU 1 flushes as it switches back in"
    );
    let (_, _, title) = Window::Lazy.span(&lanes).expect("a lazy window");
    // From the first discard after the sleeper's thread started on CPU 1:
    // the program's check that CPU 1 is lazy, then its 51.
    let skipped: u32 = title
        .strip_prefix("CPU 1 skipped by ")
        .and_then(|rest| rest.strip_suffix(" flushes, then switching back in and flushing"))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("{title}"));
    assert!(skipped >= 52, "{title}");
}
