//! What a finished run produced, and how it reads in a message.
//!
//! One [`Outcome`] for every emulator: the kernel reported success or
//! failure, the emulator stopped before the kernel's report, or a limit
//! ended the run. How the kernel reports differs (QEMU's exit status,
//! Bochs's closing line), so the words for an outcome ([`Run::ending`])
//! name the emulator's mechanism; what the emulator printed besides the
//! serial output is its [`Diagnostics`].

use std::{path::PathBuf, time::Duration};

use super::qemu::{EXIT_FAILURE, EXIT_SUCCESS};
use crate::{
    coherence::CoherenceSummary,
    report::{self, TestReport},
};

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The kernel reported success (QEMU: exit status 33; Bochs: the
    /// closing line said so).
    Success,
    /// The kernel reported failure (QEMU: exit status 35).
    Failure,
    /// The emulator stopped without the kernel's report (a triple fault,
    /// an emulator error or panic, a bad configuration): its exit status,
    /// `None` for a signal.
    UnexpectedExit(Option<i32>),
    /// The run outlived its timeout and was killed.
    Timeout(Duration),
    /// The kernel printed nothing for this long and was killed.
    Stalled(Duration),
}

/// What the emulator said besides the kernel's serial output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Diagnostics {
    /// What QEMU printed on stderr.
    Qemu { stderr: String },
    /// The last lines of Bochs's log file, and the run's directory
    /// (bochsrc, disk, serial file, log), kept when the run did not
    /// succeed.
    Bochs {
        log_tail: Vec<String>,
        kept: Option<PathBuf>,
    },
}

impl Diagnostics {
    /// The emulator's name.
    pub fn emulator(&self) -> &'static str {
        match self {
            Self::Qemu { .. } => "QEMU",
            Self::Bochs { .. } => "Bochs",
        }
    }

    /// The diagnostics as lines for a failure message; empty when there
    /// are none.
    pub fn describe(&self) -> String {
        match self {
            Self::Qemu { stderr } if stderr.trim().is_empty() => String::new(),
            Self::Qemu { stderr } => format!("QEMU stderr:\n{stderr}"),
            Self::Bochs { log_tail, kept } => {
                let mut text = String::new();
                if !log_tail.is_empty() {
                    text.push_str("end of Bochs's log:\n");
                    for line in log_tail {
                        text.push_str(&format!("  | {line}\n"));
                    }
                }
                if let Some(dir) = kept {
                    text.push_str(&format!("the run's files are in {}\n", dir.display()));
                }
                text
            }
        }
    }
}

/// What a finished run produced.
#[derive(Debug)]
pub struct Run {
    pub outcome: Outcome,
    /// Every line the kernel printed on the serial console.
    pub serial: Vec<String>,
    /// From the emulator's start to the kernel's first line.
    pub kernel_entry: Option<Duration>,
    /// From the emulator's start to the end of the run.
    pub elapsed: Duration,
    pub diagnostics: Diagnostics,
}

impl Run {
    /// How the run ended, in words (`success (QEMU exit status 33)`).
    pub fn ending(&self) -> String {
        let emulator = self.diagnostics.emulator();
        let qemu = matches!(self.diagnostics, Diagnostics::Qemu { .. });
        match &self.outcome {
            Outcome::Success if qemu => format!("success (QEMU exit status {EXIT_SUCCESS})"),
            Outcome::Success => String::from("success (the kernel halted reporting success)"),
            Outcome::Failure if qemu => {
                format!("the kernel reported failure (QEMU exit status {EXIT_FAILURE})")
            }
            Outcome::Failure => String::from("the kernel halted reporting failure"),
            Outcome::UnexpectedExit(Some(0)) if qemu => String::from(
                "QEMU exited with status 0 without a kernel report (a triple fault or reset?)",
            ),
            Outcome::UnexpectedExit(Some(code)) if qemu => {
                format!("QEMU exited with status {code} without a kernel report")
            }
            Outcome::UnexpectedExit(Some(code)) => {
                format!("Bochs exited (status {code}) before the kernel's last line; see its log")
            }
            Outcome::UnexpectedExit(None) => format!("{emulator} was killed by a signal"),
            Outcome::Stalled(silence) => format!(
                "no output for {} s (hung?); {emulator} was killed",
                silence.as_secs_f64()
            ),
            Outcome::Timeout(limit) => format!(
                "timed out after {} s; {emulator} was killed",
                limit.as_secs_f64()
            ),
        }
    }

    /// The kernel's in-kernel test results.
    pub fn test_report(&self) -> TestReport {
        TestReport::parse(&self.serial)
    }

    /// The coherence stress's summary, if the run printed one.
    pub fn coherence(&self) -> Option<CoherenceSummary> {
        CoherenceSummary::find(&self.serial)
    }

    /// Whether any serial line contains `text`.
    pub fn printed(&self, text: &str) -> bool {
        report::printed(&self.serial, text)
    }

    /// The value of `key=` in the first serial line that starts with
    /// `prefix` (`tlb-counters:`, `tlbtest promote:`, ...), if both exist.
    pub fn value(&self, prefix: &str, key: &str) -> Option<&str> {
        let line = self.serial.iter().find(|line| line.starts_with(prefix))?;
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(key)?.strip_prefix('='))
    }

    /// [`Run::value`] as a number; panics with the run's description if the
    /// line, the key or a number is missing (for tests).
    pub fn number(&self, prefix: &str, key: &str) -> u64 {
        self.value(prefix, key)
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| {
                panic!(
                    "no number {key}= in a line starting with '{prefix}'\n{}",
                    self.describe()
                )
            })
    }

    /// How the run ended, the last serial lines and the emulator's
    /// diagnostics, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "{} run ended after {:.1} s: {}\n{}{}",
            self.diagnostics.emulator(),
            self.elapsed.as_secs_f64(),
            self.ending(),
            report::serial_tail(&self.serial),
            self.diagnostics.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(outcome: Outcome, diagnostics: Diagnostics) -> Run {
        Run {
            outcome,
            serial: vec![
                String::from("tlb-counters: mode=ipi cpus=2 promotions=1 shootdowns=x"),
                String::from("tlb-counters: promotions=7"),
            ],
            kernel_entry: None,
            elapsed: Duration::from_millis(2500),
            diagnostics,
        }
    }

    fn qemu(stderr: &str) -> Diagnostics {
        Diagnostics::Qemu {
            stderr: stderr.into(),
        }
    }

    fn bochs() -> Diagnostics {
        Diagnostics::Bochs {
            log_tail: vec![String::from("00000000000i[      ] reset")],
            kept: Some(PathBuf::from("/tmp/run")),
        }
    }

    /// The words the book shows after `runner: ...:` stay as they were.
    #[test]
    fn the_ending_names_the_emulator_and_its_mechanism() {
        for (outcome, diagnostics, words) in [
            (Outcome::Success, qemu(""), "success (QEMU exit status 33)"),
            (
                Outcome::Failure,
                qemu(""),
                "the kernel reported failure (QEMU exit status 35)",
            ),
            (
                Outcome::UnexpectedExit(Some(0)),
                qemu(""),
                "QEMU exited with status 0 without a kernel report (a triple fault or reset?)",
            ),
            (
                Outcome::Success,
                bochs(),
                "success (the kernel halted reporting success)",
            ),
            (
                Outcome::UnexpectedExit(Some(1)),
                bochs(),
                "Bochs exited (status 1) before the kernel's last line; see its log",
            ),
            (
                Outcome::UnexpectedExit(None),
                bochs(),
                "Bochs was killed by a signal",
            ),
            (
                Outcome::Stalled(Duration::from_secs(20)),
                qemu(""),
                "no output for 20 s (hung?); QEMU was killed",
            ),
            (
                Outcome::Timeout(Duration::from_millis(2500)),
                bochs(),
                "timed out after 2.5 s; Bochs was killed",
            ),
        ] {
            assert_eq!(run(outcome, diagnostics).ending(), words);
        }
    }

    #[test]
    fn the_description_ends_with_the_diagnostics() {
        let text = run(Outcome::Failure, qemu("qemu: warning\n")).describe();
        assert!(text.starts_with("QEMU run ended after 2.5 s: the kernel reported failure"));
        assert!(
            text.contains("last 2 serial lines:\n  | tlb-counters:"),
            "{text}"
        );
        assert!(text.ends_with("QEMU stderr:\nqemu: warning\n"), "{text}");
        assert!(
            !run(Outcome::Success, qemu(" \n"))
                .describe()
                .contains("stderr")
        );
        let text = run(Outcome::Failure, bochs()).describe();
        assert!(
            text.ends_with(
                "end of Bochs's log:\n  | 00000000000i[      ] reset\n\
                 the run's files are in /tmp/run\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn values_come_from_the_first_matching_line() {
        let run = run(Outcome::Success, qemu(""));
        assert_eq!(run.value("tlb-counters:", "mode"), Some("ipi"));
        assert_eq!(run.number("tlb-counters:", "promotions"), 1);
        assert_eq!(run.value("tlb-counters:", "missing"), None);
        assert_eq!(run.value("tlb-latency:", "mode"), None);
    }

    #[test]
    #[should_panic(expected = "no number shootdowns= in a line starting with 'tlb-counters:'")]
    fn a_missing_number_panics_with_the_description() {
        run(Outcome::Success, qemu("")).number("tlb-counters:", "shootdowns");
    }
}
