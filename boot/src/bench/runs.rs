//! Booting every run of a plan, with a progress line per run on stderr, and
//! reading each run's numbers from its serial output.
//!
//! A run counts only if the kernel reported success, the program printed
//! its summary line with every metric, and the workload's sanity check
//! passed. Anything else stops the benchmark with the run's last serial
//! lines: a failed run is a finding (a bug, a broken check), never a
//! number to average away.
//!
//! One failure is not the run's: Linux 6.17 under TCG panics now and then
//! while it boots (an `int3` oops, seen once in a few dozen boots), before
//! the project's init has started and so before the run's program could
//! have done anything. Such a boot is said on stderr and booted again, at
//! most [`LINUX_BOOT_RETRIES`] times; every other failure still stops the
//! benchmark.

use std::time::{Duration, Instant};

use kernel::profile::Profile;

use super::plan::{Plan, Sample, Source, Step};
use crate::machine::{self, Guest, Outcome, Run};

/// How many times one Linux run is booted again after Linux panicked
/// before its init started.
const LINUX_BOOT_RETRIES: u32 = 2;

/// The `key=value` words of the first line that starts with `prefix`.
pub fn fields<'a>(serial: &'a [String], prefix: &str) -> Option<Vec<(&'a str, &'a str)>> {
    let line = serial.iter().find(|line| line.starts_with(prefix))?;
    Some(
        line.split_whitespace()
            .filter_map(|word| word.split_once('='))
            .collect(),
    )
}

/// Whether a kernel command line turns the profiler on.
fn profiled(cmdline: &str) -> bool {
    cmdline
        .split_whitespace()
        .any(|word| word.starts_with("profile=") && word != "profile=off")
}

/// Reads the workload's metrics from one run's serial output.
pub fn parse(plan: &Plan, step: Step, serial: &[String]) -> Result<Sample, String> {
    let workload = &plan.workload;
    let program = fields(serial, workload.summary_prefix).ok_or_else(|| {
        format!(
            "no line starting with '{}' (did the program run?)",
            workload.summary_prefix
        )
    })?;
    // Linux prints neither of this kernel's closing lines, nor the
    // counters only this kernel has: its missing values stay empty.
    let linux = plan.config(step).guest != Guest::Shootdown;
    let latency = fields(serial, "tlb-latency:");
    if latency.is_none() && !linux {
        return Err(String::from(
            "no 'tlb-latency:' line (the kernel prints one at the end of every run)",
        ));
    }
    // Read only if a metric needs it.
    let breakdown = fields(serial, "tlb-breakdown:");
    let mut values = Vec::with_capacity(workload.metrics.len());
    for metric in &workload.metrics {
        let line = match metric.source {
            Source::Program => Some(&program),
            Source::Latency => latency.as_ref(),
            Source::Breakdown => breakdown.as_ref(),
        };
        let text = line.and_then(|line| {
            line.iter()
                .find(|(key, _)| *key == metric.key)
                .map(|(_, value)| *value)
        });
        let text = match (text, linux, metric.source) {
            (Some(text), _, _) => text,
            (None, true, _) => {
                values.push(None);
                continue;
            }
            (None, false, Source::Program) => {
                return Err(format!("no {}= in the output", metric.key));
            }
            (None, false, Source::Latency) => {
                return Err(format!("no {}= in the 'tlb-latency:' line", metric.key));
            }
            (None, false, Source::Breakdown) => {
                return Err(String::from(
                    "no 'tlb-breakdown:' line with every value (the kernel prints one at the end of every run)",
                ));
            }
        };
        let value = match text.parse::<f64>() {
            Ok(value) if value.is_finite() => Some(value),
            // Nothing to divide by, or no sample: the workload's check
            // decides whether that is acceptable.
            _ if text == "none" => None,
            _ => return Err(format!("{}={text} is not a number", metric.key)),
        };
        values.push(value);
    }
    let profile = match serial.iter().find(|line| line.starts_with("profile: ")) {
        Some(line) => Some(
            Profile::parse_line(line)
                .map_err(|error| format!("unreadable 'profile:' line: {}", error.0))?,
        ),
        None if profiled(&plan.config(step).cmdline) => {
            return Err(String::from(
                "the run was profiled but printed no 'profile:' line",
            ));
        }
        None => None,
    };
    let sample = Sample {
        step,
        values,
        profile,
    };
    (workload.check)(plan, &sample)?;
    Ok(sample)
}

/// `1m05s`, `42s`.
fn duration(duration: Duration) -> String {
    let seconds = duration.as_secs();
    if seconds >= 60 {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    } else {
        format!("{seconds}s")
    }
}

/// Boots `config` with `boot`, and again while Linux panics before its
/// init starts, at most [`LINUX_BOOT_RETRIES`] times; `retried` counts the
/// boots made again.
fn boot_past_linux_panics(
    config: &machine::Config,
    retried: &mut u32,
    mut boot: impl FnMut(&machine::Config) -> Result<Run, String>,
) -> Result<Run, String> {
    let mut again = 0;
    loop {
        let run = boot(config)?;
        let panic = match (&config.guest, &run.outcome) {
            (Guest::Linux { .. }, Outcome::UnexpectedExit(Some(0))) => {
                machine::linux_panic_before_init(&run.serial)
            }
            _ => None,
        };
        match panic {
            Some(line) if again < LINUX_BOOT_RETRIES => {
                again += 1;
                *retried += 1;
                eprintln!(
                    "bench: Linux panicked while booting, before its init started ('{}'): booting it again ({again} of {LINUX_BOOT_RETRIES})",
                    line.trim()
                );
            }
            _ => return Ok(run),
        }
    }
}

/// Boots every run of `plan` in order and returns their samples; stops at
/// the first run that fails, with a description of it.
pub fn run_all(plan: &Plan) -> Result<Vec<Sample>, String> {
    let steps = plan.steps();
    let started = Instant::now();
    let mut samples = Vec::with_capacity(steps.len());
    let mut retried = 0;
    for (done, &step) in steps.iter().enumerate() {
        let left = if done == 0 {
            String::new()
        } else {
            let per_run = started.elapsed() / done as u32;
            format!(
                ", about {} left",
                duration(per_run * (steps.len() - done) as u32)
            )
        };
        let label = format!(
            "{} {} rep={}/{}",
            plan.title,
            plan.describe(step),
            step.rep,
            plan.repeat
        );
        eprintln!("bench: run {}/{} {label}{left}", done + 1, steps.len());
        let config = plan.config(step);
        let run_config = machine::Config {
            cpus: config.cpus,
            cmdline: config.cmdline.clone(),
            timeout: config.timeout,
            guest: config.guest.clone(),
            ..plan.machine.config()
        };
        let run = boot_past_linux_panics(&run_config, &mut retried, |config| {
            machine::run(config).map_err(|error| error.to_string())
        })?;
        let sample = match run.outcome {
            Outcome::Success => parse(plan, step, &run.serial),
            _ => Err(String::from("the run did not succeed")),
        }
        .map_err(|why| {
            format!(
                "run {}/{} ({label}, kernel command line '{}') failed: {why}\n{}",
                done + 1,
                steps.len(),
                config.cmdline,
                run.describe()
            )
        })?;
        samples.push(sample);
    }
    let retries = match retried {
        0 => String::new(),
        1 => String::from(" (1 Linux boot panicked and was booted again)"),
        n => format!(" ({n} Linux boots panicked and were booted again)"),
    };
    eprintln!(
        "bench: {} runs in {}{retries}",
        steps.len(),
        duration(started.elapsed())
    );
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::plan::{Format, Metric, tests::small_plan};

    fn lines(text: &[&str]) -> Vec<String> {
        text.iter().map(|line| line.to_string()).collect()
    }

    const STEP: Step = Step {
        row: 0,
        column: 1,
        rep: 1,
    };

    #[test]
    fn reads_the_summary_line() {
        let plan = small_plan(1);
        let serial = lines(&[
            "exec: test (pid 1) exited with 0",
            "test: x=12.5 y=3",
            "tlb-latency: mode=ipi remote_count=0 remote_median_ns=none",
        ]);
        let sample = parse(&plan, STEP, &serial).unwrap();
        assert_eq!(sample.values, [Some(12.5)]);
        assert_eq!(sample.step, STEP);
    }

    #[test]
    fn missing_lines_and_values_are_errors() {
        let plan = small_plan(1);
        let no_summary = parse(&plan, STEP, &lines(&["tlb-latency: mode=ipi"]));
        assert!(
            no_summary
                .unwrap_err()
                .contains("no line starting with 'test:'")
        );
        let no_latency = parse(&plan, STEP, &lines(&["test: x=1"]));
        assert!(no_latency.unwrap_err().contains("tlb-latency"));
        let no_key = parse(&plan, STEP, &lines(&["test: y=1", "tlb-latency: mode=ipi"]));
        assert!(no_key.unwrap_err().contains("no x="));
        let not_a_number = parse(&plan, STEP, &lines(&["test: x=1.2.3", "tlb-latency: a=1"]));
        assert!(not_a_number.unwrap_err().contains("not a number"));
    }

    /// Linux prints the program's line only, and not every key of it: the
    /// values it lacks stay empty instead of failing the run.
    #[test]
    fn a_linux_run_leaves_what_it_lacks_empty() {
        let mut plan = small_plan(1);
        plan.workload
            .metrics
            .push(Metric::program("y", "y", Format::Ratio));
        plan.configs[0][1].guest = Guest::Linux {
            kernel: "vmlinuz".into(),
            initramfs: "initramfs.cpio".into(),
        };
        let sample = parse(&plan, STEP, &lines(&["test: x=7 counters=proc"])).unwrap();
        assert_eq!(sample.values, [Some(7.0), None]);
    }

    #[test]
    fn a_profiled_run_must_print_its_profile() {
        let mut plan = small_plan(1);
        let serial = lines(&["test: x=1", "tlb-latency: mode=ipi"]);
        assert_eq!(parse(&plan, STEP, &serial).unwrap().profile, None);
        plan.configs[0][1].cmdline = String::from("profile=on exec=x");
        let missing = parse(&plan, STEP, &serial).unwrap_err();
        assert!(missing.contains("printed no 'profile:' line"), "{missing}");
        let mut with_line = serial.clone();
        with_line.push(String::from(
            "profile: hz=1000 cpus=2 seconds=1.00 samples=3 kernel=2 user=1 idle=0 held=0 unplaced=0 missed=0 runs=1 top=2:0 kernel::a | 1:0 [user]",
        ));
        let profile = parse(&plan, STEP, &with_line).unwrap().profile.unwrap();
        assert_eq!((profile.samples(), profile.rows.len()), (3, 2));
        with_line[2] = String::from("profile: hz=1000");
        let bad = parse(&plan, STEP, &with_line).unwrap_err();
        assert!(bad.contains("unreadable 'profile:' line"), "{bad}");
        assert!(!profiled("profile=off exec=x") && profiled("profile=2000"));
    }

    /// A run that ended as `outcome` after printing `serial`.
    fn ended(outcome: Outcome, serial: &[&str]) -> Run {
        Run {
            outcome,
            serial: lines(serial),
            kernel_entry: None,
            elapsed: Duration::ZERO,
            diagnostics: machine::Diagnostics::Qemu {
                stderr: String::new(),
            },
        }
    }

    /// Linux panicking before its init is booted again, twice at most; a
    /// panic after the init started, or any failure of this kernel, is
    /// the run's result.
    #[test]
    fn only_a_linux_panic_before_the_init_is_booted_again() {
        let panic = "Kernel panic - not syncing: Fatal exception in interrupt";
        let linux = machine::Config {
            guest: Guest::Linux {
                kernel: "vmlinuz".into(),
                initramfs: "initramfs.cpio".into(),
            },
            ..machine::Config::default()
        };
        let boot_sequence = |config: &machine::Config, runs: Vec<Run>| {
            let mut runs = runs.into_iter();
            let mut boots = 0;
            let mut retried = 0;
            let run = boot_past_linux_panics(config, &mut retried, |_| {
                boots += 1;
                Ok(runs.next().expect("no more runs than planned"))
            })
            .unwrap();
            (run, boots, retried)
        };
        let failed_boot = || ended(Outcome::UnexpectedExit(Some(0)), &["Oops: int3", panic]);
        let success = ended(
            Outcome::Success,
            &["linux-init: started", "linux-init: exited=0"],
        );

        let (run, boots, retried) = boot_sequence(&linux, vec![failed_boot(), success]);
        assert_eq!((run.outcome, boots, retried), (Outcome::Success, 2, 1));

        let (run, boots, retried) =
            boot_sequence(&linux, vec![failed_boot(), failed_boot(), failed_boot()]);
        assert_eq!(
            (run.outcome, boots, retried),
            (Outcome::UnexpectedExit(Some(0)), 3, 2)
        );

        let in_the_run = ended(
            Outcome::UnexpectedExit(Some(0)),
            &["linux-init: started", panic],
        );
        let (run, boots, _) = boot_sequence(&linux, vec![in_the_run]);
        assert_eq!((run.outcome, boots), (Outcome::UnexpectedExit(Some(0)), 1));

        let ours = machine::Config::default();
        let (run, boots, _) = boot_sequence(&ours, vec![failed_boot()]);
        assert_eq!((run.outcome, boots), (Outcome::UnexpectedExit(Some(0)), 1));
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(Duration::from_secs(42)), "42s");
        assert_eq!(duration(Duration::from_secs(65)), "1m05s");
    }
}
