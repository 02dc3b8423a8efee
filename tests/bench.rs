//! Smoke runs of the benchmarks (`cargo run -- bench ...`) with tiny
//! counts: the whole pipeline (boots, parsing, tables, CSV, SVG) works and
//! its numbers are sane. No time is judged: only counts and counters.
//!
//! The real measurements, with their commands, are in docs/BENCHMARKS.md.

use std::{collections::HashMap, path::PathBuf, process::Command};

/// Runs `cargo run -- bench <args>` (this build's binary); returns stdout,
/// failing with stderr if the command failed.
fn bench(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_shootdown"))
        .arg("bench")
        .args(args)
        .output()
        .expect("cannot start the shootdown binary");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "bench {args:?} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(
        stderr.contains("bench: run 1/"),
        "no progress line on stderr:\n{stderr}"
    );
    stdout
}

fn scratch(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// The fields of one CSV line (quoted fields may hold commas).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            (c, _) => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

/// Every run of a CSV file, as column name -> value.
fn csv_runs(path: &PathBuf) -> Vec<HashMap<String, String>> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("{} not written: {error}", path.display()));
    let mut lines = text.lines();
    let header = csv_fields(lines.next().expect("a header line"));
    lines
        .map(|line| {
            let fields = csv_fields(line);
            assert_eq!(fields.len(), header.len(), "ragged CSV line '{line}'");
            header.iter().cloned().zip(fields).collect()
        })
        .collect()
}

fn number(run: &HashMap<String, String>, key: &str) -> f64 {
    let text = run
        .get(key)
        .unwrap_or_else(|| panic!("no column {key} in {run:?}"));
    text.parse()
        .unwrap_or_else(|_| panic!("{key}='{text}' is not a number in {run:?}"))
}

#[test]
fn tlb_flush2_threads_in_both_modes() {
    let (csv, svg) = (scratch("bench-threads.csv"), scratch("bench-threads.svg"));
    let table = bench(&[
        "tlb_flush2",
        "--smp",
        "2",
        "--tasks",
        "1,2",
        "--modes",
        "ipi,broadcast-sw",
        "--repeat",
        "1",
        "--seconds",
        "1",
        "--warmup",
        "0.5",
        "--csv",
        csv.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(
        table.contains("| tasks | ipi") && table.contains("| broadcast-sw / ipi"),
        "{table}"
    );
    let runs = csv_runs(&csv);
    assert_eq!(runs.len(), 4, "one CSV line per run");
    for run in &runs {
        assert!(number(run, "iterations") > 0.0, "{run:?}");
        assert_eq!(number(run, "failed_tasks"), 0.0, "{run:?}");
        // Below the promotion threshold (4 CPUs) nothing is promoted.
        assert_eq!(number(run, "promotions"), 0.0, "{run:?}");
        assert_eq!(number(run, "broadcast_ops_per_iter"), 0.0, "{run:?}");
        // Every discard flushes at least this CPU's entry.
        assert!(number(run, "flush_handler_runs_per_iter") >= 1.0, "{run:?}");
        let ipis = number(run, "ipis_sent_per_iter");
        match run["tasks"].as_str() {
            // One thread: the one-CPU shortcut, never an IPI.
            "1" => assert_eq!(ipis, 0.0, "{run:?}"),
            // Two running threads: discards reach the other CPU, and each
            // shootdown's steps were timed.
            _ => {
                assert!(ipis > 0.0, "{run:?}");
                for step in ["bookkeeping_ns", "send_ns", "delivery_ns", "handler_ns"] {
                    assert!(number(run, step) > 0.0, "{step}: {run:?}");
                }
            }
        }
    }
    assert!(
        table.contains("one shootdown step by step") && table.contains("| bookkeeping | send "),
        "{table}"
    );
    let plot = std::fs::read_to_string(&svg).expect("the SVG plot");
    assert!(
        plot.starts_with("<svg") && plot.contains("<polyline"),
        "{plot}"
    );
}

#[test]
fn tlb_flush2_processes_never_need_remote_flushes() {
    let csv = scratch("bench-processes.csv");
    let report = bench(&[
        "tlb_flush2",
        "--profile",
        "--processes",
        "--smp",
        "2",
        "--tasks",
        "2",
        "--modes",
        "ipi",
        "--repeat",
        "1",
        "--seconds",
        "1",
        "--warmup",
        "0.5",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let runs = csv_runs(&csv);
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert!(number(run, "iterations") > 0.0, "{run:?}");
    assert_eq!(number(run, "failed_tasks"), 0.0, "{run:?}");
    assert_eq!(number(run, "ipis_sent_per_iter"), 0.0, "{run:?}");
    // --profile: the run's profile, named and printed for its cell.
    assert!(
        report.contains("tasks=2 mode=ipi: profile") && report.contains("where the time went: "),
        "{report}"
    );
    let named_rows = report
        .lines()
        .filter(|line| line.contains("kernel::") || line.contains("hal::"))
        .count();
    assert!(named_rows >= 3, "kernel functions by name: {report}");
    assert!(report.contains("[user]"), "{report}");
}

#[test]
fn batched_pageout_sends_fewer_ipis_than_per_page_flushes() {
    let csv = scratch("bench-pageout.csv");
    let table = bench(&[
        "pageout",
        "--modes",
        "ipi",
        "--batch",
        "on,off",
        "--helpers",
        "sleep,busy",
        "--loops",
        "2",
        "--repeat",
        "1",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(table.contains("| helpers | mode | on"), "{table}");
    let runs = csv_runs(&csv);
    assert_eq!(runs.len(), 4);
    let ipis = |helpers: &str, batch: &str| {
        let run = runs
            .iter()
            .find(|run| run["helpers"] == helpers && run["batch"] == batch)
            .unwrap_or_else(|| panic!("no run with helpers={helpers} batch={batch}"));
        assert!(number(run, "ns_per_loop") > 0.0, "{run:?}");
        number(run, "ipis_sent_per_loop")
    };
    // Three busy CPUs: one round of 3 IPIs per loop against one per page.
    let (batched, per_page) = (ipis("busy", "on"), ipis("busy", "off"));
    assert!(batched <= 3.0, "batched: {batched} IPIs per loop");
    assert!(per_page >= 256.0, "per page: {per_page} IPIs per loop");
    // Sleeping helpers: their CPUs are lazy, and ordinary flushes skip
    // lazy CPUs; only a helper still on its way to sleep gets an IPI.
    let (sleep_batched, sleep_per_page) = (ipis("sleep", "on"), ipis("sleep", "off"));
    assert!(sleep_batched <= 3.0, "sleeping, batched: {sleep_batched}");
    assert!(
        sleep_per_page < 64.0,
        "sleeping, per page: {sleep_per_page}"
    );
}

/// Whether Debian's Linux package is in the cache or can be fetched; if
/// not, says that the calling test is skipped, and why.
fn linux_is_at_hand() -> bool {
    let package = boot::linux::DEFAULT_PACKAGE;
    match boot::linux::kernel(package, boot::linux::DEFAULT_SUITE) {
        Ok(_) => true,
        Err(error) => {
            println!("skipped: cannot fetch {package} ({error})");
            false
        }
    }
}

/// Checks that `table` names the checksum of the built `program`: the
/// file both kernels ran.
fn assert_same_file(table: &str, program: &str) {
    let file = boot::linux::Program::built(program).expect("the C program is built");
    assert!(
        table.contains(&format!("{program} sha256 {}", file.sha256())),
        "no checksum of the file both kernels ran:\n{table}"
    );
}

/// `--against linux` boots Linux with the very file this kernel runs: one
/// short run of each, a `linux` column, and the file's checksum under the
/// tables. Where Debian's package cannot be fetched (no archive reachable),
/// the test says so and skips.
#[test]
fn against_linux_runs_the_same_file_on_both_kernels() {
    if !linux_is_at_hand() {
        return;
    }
    let table = bench(&[
        "tlb_flush2",
        "--against",
        "linux",
        "--tasks",
        "2",
        "--modes",
        "ipi",
        "--smp",
        "2",
        "--repeat",
        "1",
        "--seconds",
        "0.5",
        "--warmup",
        "0.3",
    ]);
    assert!(
        table.contains("| tasks | ipi") && table.contains("| linux |"),
        "no ipi and linux columns:\n{table}"
    );
    assert_same_file(&table, "tlb_flush2-musl");
}

/// `bench pageout --against linux`: Linux gets swap on zram from its init
/// (`bench.swap=`), and its pages really go out (the program fails a run
/// whose pages stayed resident); this kernel batches its reclaim flush.
#[test]
fn against_linux_pages_out_on_both_kernels() {
    if !linux_is_at_hand() {
        return;
    }
    let csv = scratch("bench-pageout-linux.csv");
    let table = bench(&[
        "pageout",
        "--against",
        "linux",
        "--modes",
        "ipi",
        "--batch",
        "on",
        "--helpers",
        "busy",
        "--loops",
        "2",
        "--repeat",
        "1",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    assert!(
        table.contains("| on ") && table.contains("| linux "),
        "{table}"
    );
    assert_same_file(&table, "pageout-musl");
    let runs = csv_runs(&csv);
    let linux = runs
        .iter()
        .find(|run| run["batch"] == "linux")
        .unwrap_or_else(|| panic!("no Linux run in {runs:?}"));
    assert!(
        number(linux, "pages_swapped_out_per_loop") >= 256.0,
        "{linux:?}"
    );
    let ours = runs
        .iter()
        .find(|run| run["batch"] == "on")
        .unwrap_or_else(|| panic!("no run of this kernel in {runs:?}"));
    assert_eq!(number(ours, "batch_flushes_per_loop"), 1.0, "{ours:?}");
}
