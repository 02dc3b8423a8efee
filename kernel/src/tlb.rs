//! The kernel's side of the `mm` crate: the instructions behind its
//! decisions, the choice of TLB mode, counters and the trace.
//!
//! `mm` decides *who* must flush *what* and *when*; [`KernelTlb`] turns each
//! decision into an instruction on the current CPU (INVLPG, a CR3 load), a
//! cross-CPU call that runs `mm`'s flush handler elsewhere, or a broadcast
//! through the chosen backend ([`KernelBroadcast`]).
//!
//! The mode is chosen once at boot (`tlb=` on the command line):
//! - `ipi`: targeted IPIs only; no global ASIDs.
//! - `broadcast-sw`: global ASIDs, promotion and the transition protocol,
//!   with every broadcast operation carried by IPIs to all online CPUs. The
//!   same semantics as INVLPGB, so the machinery runs under QEMU's TCG.
//! - `invlpgb`: global ASIDs flushed by AMD's INVLPGB/TLBSYNC
//!   ([`KernelBroadcast::Invlpgb`]). It needs CPUID's INVLPGB on Zen 3 or
//!   later *and* PCIDs (a global ASID is a PCID every CPU agrees on); asking
//!   for it without them is refused with the reason.
//! - `auto` (default): `invlpgb` when the CPU allows it, else `ipi`, as
//!   Linux chooses.
//!
//! PCIDs (`tlb.pcid=on`, the default) are used when CPUID reports PCID and
//! global pages: each CPU's dynamic ASIDs then keep their entries across
//! CR3 loads. QEMU's TCG has no PCID, so there every CR3 load flushes and
//! `mm` tracks its ASIDs in software only; the decisions are the same.

use alloc::{string::String, vec::Vec};
use core::fmt;

use mm::{
    AddressSpaceTlb, CpuId, CpuSet, CpuTlbState, FlushBatch, FlushRange, FlushRequest, Pcid,
    TlbConfig, TlbHardware, TlbSystem, TraceEvent, invlpgb::InvlpgbLimits,
};
use spin::Once;
use x86_64::PhysAddr;

pub use crate::tlb_broadcast::KernelBroadcast;
use crate::{cpu_features::CpuFeatures, smp};
use hal::time;
use hal::{cpu::without_interrupts, percpu};

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
];

impl Default for TlbOptions {
    fn default() -> Self {
        Self {
            mode: ModeRequest::Auto,
            promotion_threshold: TlbConfig::default().promotion_threshold,
            trace: false,
            batch_reclaim: true,
            global_asids: None,
            pcid: true,
            bug: None,
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

struct State {
    system: TlbSystem<'static>,
    no_flush_ipis: bool,
    mode: TlbMode,
    hardware: TlbHardwareChoice,
    broadcast: Option<KernelBroadcast>,
    trace: bool,
    batch_reclaim: bool,
}

static STATE: Once<State> = Once::new();

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

/// Chooses the mode for `cpu` as `options` ask and creates the TLB system
/// for `cpu_count` CPUs whose kernel page table is `kernel_root`. Called once
/// by the boot CPU before any AP starts (and before [`init_this_cpu`]).
pub fn init(
    cpu_count: usize,
    kernel_root: PhysAddr,
    options: &TlbOptions,
    cpu: &CpuFeatures,
) -> Result<Choice, ModeUnavailable> {
    let choice = choose(options, cpu)?;
    let mut config = TlbConfig {
        promotion_threshold: options.promotion_threshold,
        ..TlbConfig::default()
    };
    if let Some(limit) = options.global_asids {
        config.global_asid_limit = (mm::FIRST_GLOBAL_ASID + limit).min(mm::MAX_ASID_AVAILABLE);
    }
    let broadcast = match choice.mode {
        TlbMode::Ipi => None,
        TlbMode::BroadcastSoftware => Some(KernelBroadcast::Software),
        TlbMode::Invlpgb => {
            let limits = InvlpgbLimits::from_cpuid_edx(u32::from(
                cpu.invlpgb.expect("the invlpgb mode implies the feature"),
            ));
            hal::tlb::enable_invlpgb(limits.max_pages());
            Some(KernelBroadcast::Invlpgb(limits))
        }
    };
    let state = STATE.call_once(|| {
        let states: &'static [CpuTlbState] = (0..cpu_count)
            .map(|_| CpuTlbState::new())
            .collect::<Vec<_>>()
            .leak();
        State {
            system: TlbSystem::new(states, kernel_root.as_u64(), config),
            no_flush_ipis: options.bug == Some(Bug::NoFlushIpis),
            mode: choice.mode,
            hardware: choice.hardware,
            broadcast,
            trace: options.trace,
            batch_reclaim: options.batch_reclaim,
        }
    });
    if let Some(Bug::Mm(fault)) = options.bug {
        state.system.faults().set(fault, true);
    }
    if let Some(bug) = options.bug {
        log::warn!("tlb: deliberate bug {bug:?} is switched on (tlb.bug=)");
    }
    Ok(choice)
}

fn state() -> &'static State {
    STATE
        .get()
        .expect("tlb::init runs before any TLB operation")
}

/// The machine's TLB system.
pub fn system() -> &'static TlbSystem<'static> {
    &state().system
}

/// The mode in force.
pub fn mode() -> TlbMode {
    state().mode
}

/// Sets this CPU's TLB control bits as chosen and brings its TLB state in
/// line with `mm`'s (kernel page table loaded, interrupts off).
pub fn init_this_cpu() {
    let hardware = state().hardware;
    if hardware.pcids {
        hal::tlb::enable_pcids();
    }
    if hardware.translation_cache_extension {
        hal::tlb::enable_translation_cache_extension();
    }
    system().init_cpu(&KernelTlb);
}

/// Switches this CPU to `next` (interrupts off).
pub fn switch_to(next: &AddressSpaceTlb) {
    system().switch_mm(&KernelTlb, next);
}

/// Switches this CPU to the kernel's own address space (interrupts off).
pub fn switch_to_kernel() {
    system().switch_mm(&KernelTlb, system().kernel_address_space());
}

/// Enters lazy TLB mode: this CPU runs a kernel thread and keeps whatever
/// user address space it had loaded until a flush or a switch says otherwise.
pub fn enter_lazy() {
    system().enter_lazy(&KernelTlb);
}

/// Makes every CPU stop using `start..end` of `space` (after the page-table
/// change). `freed_tables`: page-table pages are about to be freed.
pub fn flush_range(space: &AddressSpaceTlb, start: u64, end: u64, freed_tables: bool) {
    timed(|| {
        system().flush_tlb_mm_range(
            &KernelTlb,
            space,
            FlushRange::pages(start, end),
            freed_tables,
        );
    });
}

/// Runs the flush request `flush`, recording how long it took
/// ([`crate::tlb_latency`]).
fn timed(flush: impl FnOnce()) {
    let timing = crate::tlb_latency::Timing::start();
    flush();
    timing.finish();
}

/// Makes every CPU that still has `space` loaded (lazily: no thread of it
/// runs any more) switch to the kernel's address space, so its page tables
/// can be freed and its ASID given back. A flush that frees page tables
/// reaches lazy CPUs in IPI mode, but a global ASID's broadcast flush does
/// not make anyone leave; this does, in every mode.
pub fn evict(space: &AddressSpaceTlb) {
    let targets = space.cpus().intersection(&smp::online());
    let leave = || {
        let me = percpu::current().index;
        if system().cpu(me).loaded_ctx() == space.ctx_id() {
            switch_to_kernel();
        }
    };
    if let Err(unanswered) = smp::call_on(&targets, &leave) {
        crate::fatal::stop(
            format_args!("address-space eviction not acknowledged: {unanswered}"),
            None,
        );
    }
}

/// Makes every online CPU, lazy ones included, forget the kernel mappings
/// of `start..end` (after they were changed or removed). Interrupts on or
/// off, no lock held: the flush waits for every CPU.
pub fn flush_kernel_range(start: u64, end: u64) {
    timed(|| system().flush_kernel_range(&KernelTlb, start, end));
}

/// Makes every CPU stop using anything of `space`.
pub fn flush_all(space: &AddressSpaceTlb, freed_tables: bool) {
    timed(|| system().flush_tlb_mm_range(&KernelTlb, space, FlushRange::All, freed_tables));
}

/// Flushes the pages of `space` whose entries reclaim cleared: one deferred
/// batch flush for them all, or, with batching turned off
/// (`tlb.batch=off`), one flush per page.
pub fn flush_reclaimed(space: &AddressSpaceTlb, pages: &[u64]) {
    if state().batch_reclaim {
        timed(|| {
            let mut batch = FlushBatch::new();
            system().batch_add_pending(&mut batch, space);
            system().batch_flush(&KernelTlb, &mut batch);
        });
    } else {
        for &page in pages {
            flush_range(space, page, page + abi::PAGE_SIZE, false);
        }
    }
}

/// The counters of every CPU, summed, as one parsable line.
pub fn counters_line() -> String {
    alloc::format!(
        "tlb-counters: mode={} cpus={} {}",
        mode(),
        smp::online().count(),
        system().total_counters()
    )
}

/// The PCID in this CPU's CR3 (0 without PCIDs).
fn current_pcid() -> Pcid {
    (hal::cpu::cr3_raw() & 0xfff) as Pcid
}

/// The zero-sized handle `mm` calls back into; every method acts on the
/// CPU that runs it.
pub struct KernelTlb;

impl TlbHardware for KernelTlb {
    type Broadcast = KernelBroadcast;

    fn current_cpu(&self) -> CpuId {
        percpu::current().index
    }

    fn online_cpus(&self) -> CpuSet {
        smp::online()
    }

    fn pcid_enabled(&self) -> bool {
        state().hardware.pcids
    }

    /// Milliseconds, the unit of `TlbConfig`'s intervals.
    fn now(&self) -> u64 {
        time::now_ns() / 1_000_000
    }

    fn invlpg(&self, va: u64) {
        hal::tlb::invlpg(va);
    }

    fn flush_pcid(&self, pcid: Pcid) {
        let hardware = state().hardware;
        if hardware.invpcid {
            hal::tlb::invpcid_single(pcid);
        } else if !hardware.pcids || current_pcid() == pcid {
            // A CR3 load without the keep bit flushes the loaded PCID (the
            // only tag there is without PCIDs).
            hal::tlb::reload_root();
        } else {
            // Another PCID and no INVPCID: flushing everything is the only
            // way, and always correct.
            hal::tlb::flush_everything();
        }
    }

    fn flush_all_nonglobal(&self) {
        let hardware = state().hardware;
        if hardware.invpcid {
            hal::tlb::invpcid_all_nonglobal();
        } else if hardware.pcids {
            hal::tlb::flush_everything();
        } else {
            hal::tlb::reload_root();
        }
    }

    fn flush_everything(&self) {
        if state().hardware.invpcid {
            hal::tlb::invpcid_everything();
        } else {
            hal::tlb::flush_everything();
        }
    }

    fn load_address_space(&self, root: u64, pcid: Pcid, flush: bool) {
        if state().hardware.pcids {
            hal::tlb::load_root(PhysAddr::new(root), pcid, !flush);
        } else {
            hal::tlb::load_root(PhysAddr::new(root), 0, false);
        }
    }

    fn send_flush_ipis(&self, targets: &CpuSet, request: &FlushRequest<'_>) {
        if state().no_flush_ipis {
            return;
        }
        let handler = || system().handle_flush_ipi(&KernelTlb, request);
        if let Err(unanswered) = smp::call_on(targets, &handler) {
            // A translation that may still be in use cannot be given back:
            // stopping with a report is the only safe outcome.
            crate::fatal::stop(
                format_args!("TLB shootdown not acknowledged: {unanswered}"),
                None,
            );
        }
    }

    fn broadcast(&self) -> Option<&KernelBroadcast> {
        state().broadcast.as_ref()
    }

    fn without_interrupts(&self, f: &mut dyn FnMut()) {
        without_interrupts(f);
    }

    fn trace(&self, event: &TraceEvent) {
        if state().trace {
            let range = match event.range {
                Some((start, end)) => alloc::format!("{start:#x}..{end:#x}"),
                None => String::from("all"),
            };
            let ctx = event
                .ctx_id
                .map_or(String::from("kernel"), |id| alloc::format!("{id}"));
            hal::println!(
                "tlb-trace: cpu={} ctx={ctx} range={range} targets={:?} reason={:?}",
                event.initiator,
                event.targets,
                event.reason
            );
        }
    }
}

pub mod tests {
    //! In-kernel tests of the kernel's TLB glue. The mode rules are tested
    //! with made-up CPUs: QEMU's TCG can emulate none with PCID or INVLPGB.

    use super::{ModeRequest, TlbMode, TlbOptions, choose};
    use crate::cpu_features::CpuFeatures;
    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq, require_ok};

    pub const TESTS: &[Test] = &[
        Test::new(
            "tlb::counter_names_match_the_abi",
            counter_names_match_the_abi,
        ),
        Test::new(
            "tlb::zen3_with_pcids_uses_invlpgb",
            zen3_with_pcids_uses_invlpgb,
        ),
        Test::new(
            "tlb::invlpgb_needs_zen3_and_pcids",
            invlpgb_needs_zen3_and_pcids,
        ),
        Test::new(
            "tlb::pcids_need_pge_and_permission",
            pcids_need_pge_and_permission,
        ),
        Test::new(
            "tlb::explicit_modes_are_honoured",
            explicit_modes_are_honoured,
        ),
    ];

    /// `tlb_stats` copies `mm`'s counters in declaration order; user programs
    /// find them by the names in `abi`. The two lists must agree.
    fn counter_names_match_the_abi() -> TestResult {
        let names: alloc::vec::Vec<&str> = super::system()
            .total_counters()
            .fields()
            .map(|(name, _)| name)
            .collect();
        check_eq!(names.as_slice(), &abi::TLB_COUNTER_NAMES[..]);
        Ok(())
    }

    /// An EPYC 7763 as its CPUID reads on real hardware.
    fn milan() -> CpuFeatures {
        let mut cpu = CpuFeatures::detect();
        cpu.vendor = *b"AuthenticAMD";
        cpu.family = 0x19;
        cpu.pcid = true;
        cpu.invpcid = true;
        cpu.global_pages = true;
        cpu.invlpgb = Some(7);
        cpu.tce = true;
        cpu
    }

    fn auto() -> TlbOptions {
        TlbOptions::default()
    }

    fn zen3_with_pcids_uses_invlpgb() -> TestResult {
        let choice = require_ok!(choose(&auto(), &milan()));
        check_eq!(choice.mode, TlbMode::Invlpgb);
        check!(choice.hardware.pcids && choice.hardware.invpcid);
        check!(choice.hardware.translation_cache_extension);
        let explicit = TlbOptions {
            mode: ModeRequest::Invlpgb,
            ..auto()
        };
        check_eq!(
            require_ok!(choose(&explicit, &milan())).mode,
            TlbMode::Invlpgb
        );
        Ok(())
    }

    fn invlpgb_needs_zen3_and_pcids() -> TestResult {
        let explicit = TlbOptions {
            mode: ModeRequest::Invlpgb,
            ..auto()
        };
        let mut rome = milan();
        rome.family = 0x17;
        let mut no_pcid = milan();
        no_pcid.pcid = false;
        let pcid_off = TlbOptions {
            pcid: false,
            ..auto()
        };
        for (cpu, options) in [(&rome, auto()), (&no_pcid, auto()), (&milan(), pcid_off)] {
            let choice = require_ok!(choose(&options, cpu));
            check_eq!(choice.mode, TlbMode::Ipi, "auto falls back to IPIs");
            let refused = choose(
                &TlbOptions {
                    mode: ModeRequest::Invlpgb,
                    ..options
                },
                cpu,
            );
            check!(
                refused.is_err(),
                "tlb=invlpgb must be refused, got {refused:?}"
            );
        }
        check!(choose(&explicit, &no_pcid).is_err_and(|why| why.0.contains("PCIDs")));
        Ok(())
    }

    fn pcids_need_pge_and_permission() -> TestResult {
        let mut no_pge = milan();
        no_pge.global_pages = false;
        let choice = require_ok!(choose(&auto(), &no_pge));
        check!(!choice.hardware.pcids && !choice.hardware.invpcid);
        let off = TlbOptions {
            pcid: false,
            ..auto()
        };
        let choice = require_ok!(choose(&off, &milan()));
        check!(!choice.hardware.pcids && !choice.hardware.invpcid);
        check!(choice.pcid_reason.contains("tlb.pcid=off"));
        Ok(())
    }

    fn explicit_modes_are_honoured() -> TestResult {
        for cpu in [milan(), CpuFeatures::detect()] {
            for (request, mode) in [
                (ModeRequest::Ipi, TlbMode::Ipi),
                (ModeRequest::BroadcastSoftware, TlbMode::BroadcastSoftware),
            ] {
                let options = TlbOptions {
                    mode: request,
                    ..auto()
                };
                check_eq!(require_ok!(choose(&options, &cpu)).mode, mode);
            }
        }
        Ok(())
    }
}
