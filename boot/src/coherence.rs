//! The coherence stress's summary line, read as numbers.
//!
//! `exec=coherence:ROUNDS,CPUS[,PAGES]` ends with one line:
//!
//! ```text
//! coherence: 300 rounds, 3 readers, 9 pages, 1385069 reads: 22604 stale reads, 15 lost writes
//! ```
//!
//! (`, N pages` only when more than one page is stressed.) Tests used to
//! look for the text `0 stale reads, 0 lost writes` in it, and text is the
//! wrong tool: `724730 stale reads, 0 lost writes` contains it too, so a
//! broken kernel's summary passed for a clean one's and a check that a
//! broken kernel is caught failed on a run that caught it. Parsed, a count
//! is a count.

/// The numbers of one coherence summary line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoherenceSummary {
    pub rounds: u64,
    pub readers: u64,
    /// Pages stressed per round (1 when the line does not say).
    pub pages: u64,
    pub reads: u64,
    /// Reads that saw a value older than the writer's last published one:
    /// a translation that outlived its flush.
    pub stale_reads: u64,
    /// Writes through a stale translation that the new page never saw.
    pub lost_writes: u64,
}

impl CoherenceSummary {
    /// Parses one summary line; `None` for any other line, including the
    /// progress lines (`coherence: 250/300 rounds, 22371 stale reads so far`).
    pub fn parse(line: &str) -> Option<Self> {
        let rest = line.strip_prefix("coherence: ")?;
        let (setup, results) = rest.split_once(": ")?;
        let mut counts = Vec::new();
        for part in setup.split(", ").chain(results.split(", ")) {
            let (count, label) = part.split_once(' ')?;
            counts.push((label, count.parse::<u64>().ok()?));
        }
        let once = |label: &str| {
            let mut matching = counts.iter().filter(|(seen, _)| *seen == label);
            match (matching.next(), matching.next()) {
                (Some(&(_, count)), None) => Some(count),
                _ => None,
            }
        };
        let pages = if counts.iter().any(|(label, _)| *label == "pages") {
            once("pages")?
        } else {
            1
        };
        let summary = CoherenceSummary {
            rounds: once("rounds")?,
            readers: once("readers")?,
            pages,
            reads: once("reads")?,
            stale_reads: once("stale reads")?,
            lost_writes: once("lost writes")?,
        };
        let labels = 5 + usize::from(once("pages").is_some());
        (counts.len() == labels).then_some(summary)
    }

    /// The last summary line among `lines`, if the program got that far.
    pub fn find(lines: &[String]) -> Option<Self> {
        lines.iter().rev().find_map(|line| Self::parse(line))
    }

    /// No stale read and no lost write.
    pub fn coherent(&self) -> bool {
        self.stale_reads == 0 && self.lost_writes == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_count() {
        let summary = CoherenceSummary::parse(
            "coherence: 300 rounds, 3 readers, 9 pages, 1385069 reads: 22604 stale reads, 15 lost writes",
        );
        assert_eq!(
            summary,
            Some(CoherenceSummary {
                rounds: 300,
                readers: 3,
                pages: 9,
                reads: 1385069,
                stale_reads: 22604,
                lost_writes: 15,
            })
        );
    }

    #[test]
    fn a_count_that_ends_in_zero_is_not_zero() {
        // The line CI printed when the text check failed on a run that had
        // caught the bug.
        let summary = CoherenceSummary::parse(
            "coherence: 300 rounds, 1 readers, 893560 reads: 724730 stale reads, 0 lost writes",
        )
        .expect("a summary");
        assert_eq!(summary.pages, 1);
        assert_eq!(summary.stale_reads, 724730);
        assert!(!summary.coherent());
        let clean = CoherenceSummary::parse(
            "coherence: 300 rounds, 1 readers, 62085 reads: 0 stale reads, 0 lost writes",
        )
        .expect("a summary");
        assert!(clean.coherent());
    }

    #[test]
    fn other_lines_are_not_summaries() {
        for line in [
            "coherence: 250/300 rounds, 22371 stale reads so far",
            "coherence: setup failed",
            "coherence: 300 rounds, 1 readers, 10 reads: 0 stale reads",
            "coherence: 300 rounds, 1 readers, x reads: 0 stale reads, 0 lost writes",
            "coherence: 300 rounds, 1 readers, 10 reads: 0 stale reads, 0 lost writes, 1 ghosts",
            "tlb-counters: mode=ipi",
        ] {
            assert_eq!(CoherenceSummary::parse(line), None, "{line}");
        }
    }

    #[test]
    fn find_takes_the_summary_not_the_progress() {
        let lines = [
            "coherence: 150/300 rounds, 1 stale reads so far",
            "coherence: 300 rounds, 1 readers, 10 reads: 2 stale reads, 0 lost writes",
            "tlb-counters: mode=ipi cpus=2",
        ]
        .map(String::from);
        assert_eq!(
            CoherenceSummary::find(&lines).map(|s| s.stale_reads),
            Some(2)
        );
        assert_eq!(CoherenceSummary::find(&lines[..1]), None);
    }
}
