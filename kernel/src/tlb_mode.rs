//! Which TLB mode and instructions the kernel uses, and why: the options of
//! `tlb=...` on the command line and the rules that turn them and the CPU's
//! features into a choice.
//!
//! Pure: no instruction runs here, so the rules are unit-tested on the host
//! with CPUs that no emulator here has (a Zen 3 with PCIDs and INVLPGB).
//! [`crate::tlb`] applies the choice on the machine.

use alloc::string::String;
use core::fmt;

use mm::TlbConfig;

use crate::cpu_features::CpuFeatures;

/// What `tlb=` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModeRequest {
    Auto,
    Ipi,
    BroadcastSoftware,
    Invlpgb,
}

/// The TLB options of the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbOptions {
    pub mode: ModeRequest,
    /// CPUs an address space must run on at once to be promoted.
    pub promotion_threshold: usize,
    /// Print every flush decision.
    pub trace: bool,
    /// Record every CPU's part in each shootdown, with timestamps, and print
    /// the events at the end of the run (`tlb.timeline=on` or `=N`): how
    /// many events each CPU keeps, or `None` to record nothing.
    pub timeline: Option<usize>,
    /// `madvise(PAGEOUT)` flushes once per call (deferred batch) instead of
    /// once per page.
    pub batch_reclaim: bool,
    /// Global ASIDs available (lower it to test exhaustion); `None`: all.
    pub global_asids: Option<u16>,
    /// Use PCIDs when the CPU has them (`tlb.pcid=off` shows the cost of
    /// flushing at every CR3 load, and turns global ASIDs off).
    pub pcid: bool,
    /// A deliberately broken protocol (`tlb.bug=`), to watch the tests fail.
    pub bug: Option<Bug>,
    /// Microseconds every switch into another address space waits right
    /// after reading its generation (`tlb.switch-delay=`), to widen the
    /// window that `skip-switching` and `generation-before-cpuset` open.
    pub switch_delay_us: u32,
}

/// The bugs `tlb.bug=` can switch on. Each one is a real bug class; the
/// coherence stress and the host TLB model must catch them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// The kernel "sends" flush IPIs without sending them: remote CPUs keep
    /// stale translations (the most basic shootdown bug).
    NoFlushIpis,
    /// One of `mm`'s deliberate faults.
    Mm(mm::Fault),
    /// A fault in issuing INVLPGB/TLBSYNC (mode `invlpgb`), which only an
    /// emulator or CPU that executes them can catch.
    Invlpgb(InvlpgbBug),
}

/// Ways to issue INVLPGB/TLBSYNC wrongly (`tlb.bug=`), each a bug that
/// corrupts memory on a real EPYC: the patched QEMU's INVLPGB tier must
/// catch every one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvlpgbBug {
    /// Never execute TLBSYNC: flushes are in flight when memory is reused.
    SkipTlbsync,
    /// User ranges stop one page (one stride unit) short of their end.
    OnePageShort,
    /// User ranges of 4 KiB pages are issued with the 2 MiB stride.
    WrongStride,
    /// One page more per INVLPGB than CPUID allows (the CPU raises #GP).
    CountOverMax,
}

/// Names for `tlb.bug=`, and what each breaks.
pub const BUGS: &[(&str, Bug)] = &[
    ("no-flush-ipis", Bug::NoFlushIpis),
    ("skip-switching", Bug::Mm(mm::Fault::SkipSwitchingCpus)),
    (
        "skip-lazy-freed-tables",
        Bug::Mm(mm::Fault::SkipLazyWhenFreeingTables),
    ),
    (
        "no-ipi-in-transition",
        Bug::Mm(mm::Fault::NoIpiDuringTransition),
    ),
    (
        "reuse-asid-early",
        Bug::Mm(mm::Fault::ReuseGlobalAsidBeforeRollover),
    ),
    (
        "generation-before-cpuset",
        Bug::Mm(mm::Fault::GenerationReadBeforeCpuSet),
    ),
    (
        "partial-without-check",
        Bug::Mm(mm::Fault::PartialFlushWithoutGenerationCheck),
    ),
    (
        "transition-ignores-switching",
        Bug::Mm(mm::Fault::TransitionIgnoresSwitching),
    ),
    ("skip-tlbsync", Bug::Invlpgb(InvlpgbBug::SkipTlbsync)),
    (
        "invlpgb-one-page-short",
        Bug::Invlpgb(InvlpgbBug::OnePageShort),
    ),
    (
        "invlpgb-wrong-stride",
        Bug::Invlpgb(InvlpgbBug::WrongStride),
    ),
    (
        "invlpgb-count-over-max",
        Bug::Invlpgb(InvlpgbBug::CountOverMax),
    ),
];

impl Default for TlbOptions {
    fn default() -> Self {
        Self {
            mode: ModeRequest::Auto,
            promotion_threshold: TlbConfig::default().promotion_threshold,
            trace: false,
            timeline: None,
            batch_reclaim: true,
            global_asids: None,
            pcid: true,
            bug: None,
            switch_delay_us: 0,
        }
    }
}

/// The mode in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbMode {
    Ipi,
    BroadcastSoftware,
    Invlpgb,
}

impl fmt::Display for TlbMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ipi => "ipi",
            Self::BroadcastSoftware => "broadcast-sw",
            Self::Invlpgb => "invlpgb",
        })
    }
}

/// Why the mode could not be set up.
#[derive(Debug)]
pub struct ModeUnavailable(String);

impl fmt::Display for ModeUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The TLB instructions this kernel uses on this machine: the part of the
/// choice every CPU applies to itself at bring-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbHardwareChoice {
    /// CR4.PGE on: entries of global pages (the kernel's thread stacks)
    /// survive CR3 loads and INVLPG drops them whatever PCID is loaded. On
    /// whenever the CPU has it; PCIDs need it.
    pub global_pages: bool,
    /// CR4.PCIDE on: CR3 loads carry a PCID and may keep entries.
    pub pcids: bool,
    /// INVPCID flushes one PCID (or all) without a CR3 load.
    pub invpcid: bool,
    /// EFER.TCE on: invalidations keep unrelated page-walk cache entries.
    pub translation_cache_extension: bool,
}

/// Everything [`choose`] decides, with the reasons the banner prints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub mode: TlbMode,
    pub mode_reason: String,
    pub hardware: TlbHardwareChoice,
    pub pcid_reason: &'static str,
}

/// Decides the TLB mode and instructions for a machine with `cpu` as
/// `options` ask. Pure, so the rules are tested with CPUs QEMU cannot
/// emulate (`tests::*`).
pub fn choose(options: &TlbOptions, cpu: &CpuFeatures) -> Result<Choice, ModeUnavailable> {
    let (pcids, pcid_reason) = if !cpu.pcid {
        (false, "off: the CPU has no PCID (QEMU's TCG has none)")
    } else if !cpu.global_pages {
        // Flushing global entries without INVPCID toggles CR4.PGE; Linux
        // too leaves PCIDs off on the (virtual) CPUs that lack PGE.
        (false, "off: the CPU has PCID but no global pages")
    } else if !options.pcid {
        (false, "off: tlb.pcid=off")
    } else {
        (true, "on: CR3 loads keep each ASID's entries")
    };
    let hardware = TlbHardwareChoice {
        global_pages: cpu.global_pages,
        pcids,
        invpcid: pcids && cpu.invpcid,
        translation_cache_extension: cpu.tce,
    };
    let no_invlpgb = if !cpu.invlpgb_usable() {
        Some("the CPU reports no usable INVLPGB (none before Zen 3; QEMU's TCG has none)")
    } else if !pcids {
        Some("INVLPGB flushes global ASIDs, which need PCIDs, and PCIDs are off")
    } else {
        None
    };
    let (mode, mode_reason) = match (options.mode, no_invlpgb) {
        (ModeRequest::Ipi, _) => (TlbMode::Ipi, "requested on the command line"),
        (ModeRequest::BroadcastSoftware, _) => (
            TlbMode::BroadcastSoftware,
            "requested on the command line; broadcasts travel by IPI",
        ),
        (ModeRequest::Invlpgb, None) => (TlbMode::Invlpgb, "requested on the command line"),
        (ModeRequest::Invlpgb, Some(why)) => {
            return Err(ModeUnavailable(alloc::format!(
                "tlb=invlpgb is not possible: {why}; \
                 tlb=broadcast-sw runs global ASIDs with a software broadcast instead"
            )));
        }
        (ModeRequest::Auto, None) => (
            TlbMode::Invlpgb,
            "the CPU has a usable INVLPGB and PCIDs are on",
        ),
        (ModeRequest::Auto, Some(why)) => (TlbMode::Ipi, why),
    };
    Ok(Choice {
        mode,
        mode_reason: String::from(mode_reason),
        hardware,
        pcid_reason,
    })
}

#[cfg(test)]
mod tests;
