//! Parsing the kernel's `ktest:` lines into per-test results.
//!
//! The kernel prints `ktest: run NAME` before a test and `ktest: ok NAME` or
//! `ktest: FAIL NAME: REASON` after it, then `ktest: P passed, F failed`.
//! A `run` with no result means the test never returned: it hung (the run
//! timed out) or took the machine down in a way the kernel could not report.

/// The result of one in-kernel test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TestOutcome {
    Passed,
    Failed(String),
}

/// Everything the kernel said about its tests in one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TestReport {
    /// Results in the order the tests ran.
    pub results: Vec<(String, TestOutcome)>,
    /// A test that started and never reported a result.
    pub unfinished: Option<String>,
    /// The closing `P passed, F failed` line.
    pub summary: Option<(usize, usize)>,
    /// Tests printed by `run=list`.
    pub listed: Vec<ListedTest>,
}

/// One entry of `run=list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedTest {
    pub name: String,
    /// Runs only when named exactly (the harness's deliberate failures).
    pub explicit_only: bool,
}

impl TestReport {
    pub fn parse(lines: &[String]) -> Self {
        let mut report = Self::default();
        for line in lines {
            let Some(rest) = line.trim_end().strip_prefix("ktest: ") else {
                continue;
            };
            if let Some(name) = rest.strip_prefix("run ") {
                report.unfinished = Some(name.to_string());
            } else if let Some(name) = rest.strip_prefix("ok ") {
                report.finish(name, TestOutcome::Passed);
            } else if let Some(failure) = rest.strip_prefix("FAIL ") {
                let (name, reason) = failure
                    .split_once(": ")
                    .unwrap_or((failure, "(no reason given)"));
                report.finish(name, TestOutcome::Failed(reason.to_string()));
            } else if let Some(listed) = rest.strip_prefix("test ") {
                let (name, note) = listed.split_once(' ').unwrap_or((listed, ""));
                report.listed.push(ListedTest {
                    name: name.to_string(),
                    explicit_only: !note.is_empty(),
                });
            } else if let Some(summary) = parse_summary(rest) {
                report.summary = Some(summary);
            }
        }
        report
    }

    fn finish(&mut self, name: &str, outcome: TestOutcome) {
        if self.unfinished.as_deref() == Some(name) {
            self.unfinished = None;
        }
        self.results.push((name.to_string(), outcome));
    }

    /// Whether every test that ran passed, none was left unfinished and the
    /// closing summary counts them all; if not, what went wrong.
    pub fn all_passed(&self) -> Result<(), String> {
        let failed: Vec<String> = self
            .results
            .iter()
            .filter_map(|(name, outcome)| match outcome {
                TestOutcome::Passed => None,
                TestOutcome::Failed(reason) => Some(format!("{name}: {reason}")),
            })
            .collect();
        if !failed.is_empty() || self.unfinished.is_some() {
            return Err(format!(
                "failed {failed:?}, unfinished {:?}",
                self.unfinished
            ));
        }
        match self.summary {
            Some((passed, 0)) if passed == self.results.len() => Ok(()),
            summary => Err(format!(
                "summary {summary:?} for {} tests that ran",
                self.results.len()
            )),
        }
    }

    /// Whether a test whose name starts with `prefix` (an area, `ipi::`)
    /// reported a result.
    pub fn ran_any(&self, prefix: &str) -> bool {
        self.results
            .iter()
            .any(|(name, _)| name.starts_with(prefix))
    }

    /// The outcome of test `name`, if it reported one.
    pub fn outcome(&self, name: &str) -> Option<&TestOutcome> {
        self.results
            .iter()
            .find(|(test, _)| test == name)
            .map(|(_, outcome)| outcome)
    }
}

/// Parses `P passed, F failed`.
fn parse_summary(text: &str) -> Option<(usize, usize)> {
    let (passed, failed) = text.split_once(" passed, ")?;
    Some((
        passed.parse().ok()?,
        failed.strip_suffix(" failed")?.parse().ok()?,
    ))
}

/// How many of the last serial lines a failure message shows.
const TAIL_LINES: usize = 40;

/// Whether any of the kernel's serial `lines` contains `text`.
pub fn printed(lines: &[String], text: &str) -> bool {
    lines.iter().any(|line| line.contains(text))
}

/// The last serial lines, indented, under a line saying how many: the body
/// of every runner's failure message.
pub fn serial_tail(lines: &[String]) -> String {
    let skip = lines.len().saturating_sub(TAIL_LINES);
    let mut text = format!("last {} serial lines:\n", lines.len() - skip);
    for line in &lines[skip..] {
        text.push_str("  | ");
        text.push_str(line);
        text.push('\n');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(String::from).collect()
    }

    #[test]
    fn parses_results_and_summary() {
        let report = TestReport::parse(&lines(
            "noise\nktest: running 2 tests\nktest: run a::b\n[ INFO] log line\nktest: ok a::b\n\
             ktest: run c\nktest: FAIL c: file.rs:3: 1 == 2: left 1, right 2\nktest: 1 passed, 1 failed\n",
        ));
        assert_eq!(report.outcome("a::b"), Some(&TestOutcome::Passed));
        assert_eq!(
            report.outcome("c"),
            Some(&TestOutcome::Failed(
                "file.rs:3: 1 == 2: left 1, right 2".into()
            ))
        );
        assert_eq!(report.summary, Some((1, 1)));
        assert_eq!(report.unfinished, None);
    }

    #[test]
    fn a_test_without_result_is_unfinished() {
        let report = TestReport::parse(&lines("ktest: run a\nktest: ok a\nktest: run hangs\n"));
        assert_eq!(report.unfinished.as_deref(), Some("hangs"));
        assert_eq!(report.summary, None);
    }

    #[test]
    fn parses_the_list() {
        let report = TestReport::parse(&lines(
            "ktest: test x::y\nktest: test z (runs only when named exactly)\n",
        ));
        assert_eq!(
            report.listed,
            vec![
                ListedTest {
                    name: "x::y".into(),
                    explicit_only: false
                },
                ListedTest {
                    name: "z".into(),
                    explicit_only: true
                }
            ]
        );
    }
}
