//! Which part of a run the picture shows. A whole run is thousands of
//! shootdowns; a window picks a few, so that they fill the width: by
//! default a typical shootdown (a flush request that reached other CPUs,
//! of median length), or the N-th, a run of them, the promotion, a lazy CPU
//! skipped and then caught up, or a span of time.

use super::{
    TimelineError,
    chrome::{plural, slice_name},
    lanes::{Instant, InstantKind, Lanes, Slice, SliceKind},
};
use kernel::timeline::TraceReason;

/// Which part of the run the picture shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Window {
    /// The N-th shootdown (from 1), with a margin around it.
    Shootdown(usize),
    /// Shootdowns `first` to `last` (from 1), with a margin.
    Shootdowns { first: usize, last: usize },
    /// The run's last shootdown.
    Last,
    /// The shootdown in which an address space was promoted to a global
    /// ASID, and the two after it (the transition, then a broadcast).
    Promotion,
    /// A CPU that flush requests skipped (lazy, or running another address
    /// space) until it switched back in and flushed: from the last request
    /// that skipped it to that switch.
    Lazy,
    /// The shootdown of median length: a typical one, where the first may
    /// be slow (cold caches) and any one may have waited for the host to
    /// run a virtual CPU.
    #[default]
    Typical,
    /// From..to, in microseconds since boot (the JSON's times).
    Span { from_us: f64, to_us: f64 },
    /// Everything.
    All,
}

impl Window {
    /// `N` (the N-th shootdown), `N-M` (shootdowns N to M), `typical`,
    /// `last`, `promotion`, `lazy`, `FROM..TO` (microseconds since boot) or
    /// `all`, as `--timeline-window` takes it.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "all" => return Ok(Self::All),
            "typical" => return Ok(Self::Typical),
            "last" => return Ok(Self::Last),
            "promotion" => return Ok(Self::Promotion),
            "lazy" => return Ok(Self::Lazy),
            _ => {}
        }
        if let Some((from, to)) = text.split_once("..") {
            let number = |text: &str| text.trim().parse::<f64>().ok().filter(|v| v.is_finite());
            return match (number(from), number(to)) {
                (Some(from_us), Some(to_us)) if from_us < to_us => {
                    Ok(Self::Span { from_us, to_us })
                }
                _ => Err(format!(
                    "'{text}' is not FROM..TO with FROM below TO (microseconds since boot)"
                )),
            };
        }
        let shootdown = |text: &str| text.parse::<usize>().ok().filter(|&n| n >= 1);
        if let Some((first, last)) = text.split_once('-') {
            return match (shootdown(first), shootdown(last)) {
                (Some(first), Some(last)) if first <= last => Ok(Self::Shootdowns { first, last }),
                _ => Err(format!(
                    "'{text}' is not N-M, shootdowns N to M with 1 <= N <= M"
                )),
            };
        }
        shootdown(text).map(Self::Shootdown).ok_or_else(|| {
            format!(
                "'{text}' is not a shootdown number (1, 2, ...), N-M, typical, last, promotion, \
                 lazy, FROM..TO in microseconds, or all"
            )
        })
    }

    /// The part of the run `lanes` this window asks for (from and to, in
    /// nanoseconds since boot) and the picture's title.
    pub fn span(&self, lanes: &Lanes) -> Result<(u64, u64, String), TimelineError> {
        let shootdowns = lanes.shootdowns();
        let numbered = |n: usize| {
            shootdowns
                .get(n.wrapping_sub(1))
                .copied()
                .ok_or(TimelineError::NoSuchShootdown {
                    asked: n,
                    shootdowns: shootdowns.len(),
                })
        };
        let of = shootdowns.len();
        let one = |n: usize, how: &str| -> Result<(u64, u64, String), TimelineError> {
            let shootdown = numbered(n)?;
            let (from, to) = with_margin(shootdown.begin_ns, shootdown.end_ns);
            Ok((
                from,
                to,
                format!("Shootdown {n} of {of}{how}: {}", describe(shootdown)),
            ))
        };
        let several = |first: usize, last: usize, title: String| {
            let (from, to) = with_margin(numbered(first)?.begin_ns, numbered(last)?.end_ns);
            Ok((from, to, title))
        };
        match *self {
            Self::Shootdown(n) => one(n, ""),
            Self::Shootdowns { first, last } => several(
                first,
                last,
                format!(
                    "Shootdowns {first} to {last} of {of}, from {}",
                    describe(numbered(first)?)
                ),
            ),
            Self::Last => one(of, " (the last)"),
            Self::Typical => one(
                median_shootdown(&shootdowns).unwrap_or(1),
                " (of median length)",
            ),
            Self::Promotion => {
                let first =
                    promotion_shootdown(lanes, &shootdowns).ok_or(TimelineError::NoPromotion)?;
                let last = (first + 2).min(of);
                let title = format!(
                    "A promotion, in shootdown {first} of {of}, and the shootdowns up to {last}"
                );
                several(first, last, title)
            }
            Self::Lazy => lazy_span(lanes).ok_or(TimelineError::NoCatchUp),
            Self::Span { from_us, to_us } => Ok((
                (from_us * 1000.0) as u64,
                (to_us * 1000.0) as u64,
                format!("{from_us} us to {to_us} us after boot"),
            )),
            Self::All => {
                let (first, last) = lanes.span().unwrap_or((0, 1));
                Ok((first, last.max(first + 1), "The whole run".to_string()))
            }
        }
    }
}

/// `from..to` widened by a tenth on each side.
fn with_margin(from: u64, to: u64) -> (u64, u64) {
    let margin = (to - from) / 10 + 1;
    (from.saturating_sub(margin), to + margin)
}

/// The number (from 1) of the first shootdown that holds, or follows, the
/// run's first promotion.
fn promotion_shootdown(lanes: &Lanes, shootdowns: &[&Slice]) -> Option<usize> {
    let promotion = lanes.instants.iter().find(|instant| {
        matches!(instant.what, InstantKind::Decision(decision) if decision.reason == TraceReason::Promotion)
    })?;
    shootdowns
        .iter()
        .position(|shootdown| shootdown.end_ns >= promotion.ns)
        .map(|index| index + 1)
}

/// The number (from 1) of the shootdown whose length is the median.
fn median_shootdown(shootdowns: &[&Slice]) -> Option<usize> {
    let mut by_length: Vec<usize> = (0..shootdowns.len()).collect();
    by_length.sort_by_key(|&index| shootdowns[index].end_ns - shootdowns[index].begin_ns);
    by_length.get(by_length.len() / 2).map(|index| index + 1)
}

/// The first switch that flushed on a CPU that requests had skipped
/// since it last caught up: from the request of the first of those skips,
/// through the switch, and its title.
fn lazy_span(lanes: &Lanes) -> Option<(u64, u64, String)> {
    let on = |cpu: usize| {
        lanes
            .instants
            .iter()
            .filter(move |instant| instant.cpu == cpu)
    };
    let is_skip = |instant: &&Instant| matches!(instant.what, InstantKind::Skipped { .. });
    let is_switch = |instant: &&Instant| matches!(instant.what, InstantKind::SwitchFlush { .. });
    let (switch, skips) = lanes.instants.iter().filter(is_switch).find_map(|switch| {
        let since = on(switch.cpu)
            .filter(is_switch)
            .map(|earlier| earlier.ns)
            .filter(|&ns| ns < switch.ns)
            .max()
            .unwrap_or(0);
        let skips: Vec<&Instant> = on(switch.cpu)
            .filter(is_skip)
            .filter(|skip| (since..switch.ns).contains(&skip.ns))
            .collect();
        (!skips.is_empty()).then_some((switch, skips))
    })?;
    let first = skips[0];
    let InstantKind::Skipped { by, .. } = first.what else {
        unreachable!("only skips were kept");
    };
    // The request that skipped, on the CPU that made it.
    let begin = lanes
        .slices
        .iter()
        .filter(|slice| slice.cpu == by && matches!(slice.what, SliceKind::Request(_)))
        .find(|request| (request.begin_ns..=request.end_ns).contains(&first.ns))
        .map_or(first.ns, |request| request.begin_ns);
    let (from, to) = with_margin(begin, switch.ns);
    let lazy = matches!(switch.what, InstantKind::SwitchFlush { lazy: true, .. });
    let title = format!(
        "CPU {} skipped by {} flush{}, then {} and flushing",
        switch.cpu,
        skips.len(),
        if skips.len() == 1 { "" } else { "es" },
        if lazy {
            "back from lazy mode"
        } else {
            "switching back in"
        }
    );
    Some((from, to, title))
}

/// "CPU 0 flushes address space 2, 1 page (Ipi)".
fn describe(request: &Slice) -> String {
    let SliceKind::Request(decision) = &request.what else {
        return slice_name(&request.what);
    };
    let Some(decision) = decision else {
        return format!("CPU {} flushes", request.cpu);
    };
    // A flush without an address space: a reclaim batch flushes whatever
    // user address space each CPU has loaded, a rollover every PCID's
    // entries, the rest the kernel's own mappings.
    let space = match (decision.ctx, decision.reason) {
        (Some(ctx), _) => format!("address space {ctx}"),
        (None, TraceReason::Batch) => "each CPU's loaded address space".to_string(),
        (None, TraceReason::Rollover) => "every address space".to_string(),
        (None, _) => "the kernel's mappings".to_string(),
    };
    let range = match decision.range {
        Some((start, end)) => {
            let pages = (end - start).div_ceil(4096);
            format!("{pages} page{}", plural(pages))
        }
        None => "everything".to_string(),
    };
    format!(
        "CPU {} flushes {space}, {range} ({:?})",
        request.cpu, decision.reason
    )
}
