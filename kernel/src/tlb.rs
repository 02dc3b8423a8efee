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
//! - `invlpgb`: global ASIDs flushed by AMD's INVLPGB/TLBSYNC. It needs
//!   CPUID's INVLPGB on Zen 3 or later *and* PCIDs, which this kernel does
//!   not enable yet, so asking for it is refused with the reason. The
//!   operand encodings and range splitting are ready in `mm::invlpgb`.
//! - `auto` (default): `ipi` (Linux picks INVLPGB when it can, else IPIs).

use alloc::{string::String, vec::Vec};
use core::fmt;

use mm::{
    AddressSpaceTlb, BroadcastBackend, BroadcastOp, CpuId, CpuSet, CpuTlbState, FlushBatch,
    FlushRange, FlushRequest, Pcid, TlbConfig, TlbHardware, TlbSystem, TraceEvent,
};
use spin::Once;
use x86_64::PhysAddr;

use crate::{
    arch::{self, cpu::without_interrupts, ipi, percpu},
    cpu_features::CpuFeatures,
    smp, time,
};

/// This kernel does not turn CR4.PCIDE on yet: every CR3 load flushes the
/// non-global TLB entries, `mm` still tracks ASIDs in software, and INVLPGB
/// (whose global ASIDs need PCIDs) stays off.
const PCID_ENABLED: bool = false;

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
            bug: None,
        }
    }
}

/// The mode in force.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlbMode {
    Ipi,
    BroadcastSoftware,
}

impl fmt::Display for TlbMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Ipi => "ipi",
            Self::BroadcastSoftware => "broadcast-sw",
        })
    }
}

/// The broadcast backends the kernel has.
pub enum KernelBroadcast {
    /// Every operation as a cross-CPU call to all online CPUs, which each
    /// run `mm`'s broadcast handler. Completes before returning, so `sync`
    /// has nothing left to wait for.
    Software,
}

struct State {
    system: TlbSystem<'static>,
    no_flush_ipis: bool,
    mode: TlbMode,
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

/// Chooses the mode for `cpu` as `options` ask and creates the TLB system
/// for `cpu_count` CPUs whose kernel page table is `kernel_root`. Called once
/// by the boot CPU before any AP starts. Returns the mode and why.
pub fn init(
    cpu_count: usize,
    kernel_root: PhysAddr,
    options: &TlbOptions,
    cpu: &CpuFeatures,
) -> Result<(TlbMode, &'static str), ModeUnavailable> {
    let no_hardware_broadcast = if !cpu.invlpgb_usable() {
        "the CPU reports no usable INVLPGB (none before Zen 3; QEMU's TCG has none)"
    } else {
        "INVLPGB needs PCIDs, which this kernel does not enable yet"
    };
    let (mode, reason) = match options.mode {
        ModeRequest::Ipi => (TlbMode::Ipi, "requested on the command line"),
        ModeRequest::BroadcastSoftware => (
            TlbMode::BroadcastSoftware,
            "requested on the command line; broadcasts travel by IPI",
        ),
        ModeRequest::Invlpgb => {
            return Err(ModeUnavailable(alloc::format!(
                "tlb=invlpgb is not possible: {no_hardware_broadcast}; \
                 tlb=broadcast-sw runs global ASIDs with a software broadcast instead"
            )));
        }
        ModeRequest::Auto => (TlbMode::Ipi, no_hardware_broadcast),
    };
    let mut config = TlbConfig {
        promotion_threshold: options.promotion_threshold,
        ..TlbConfig::default()
    };
    if let Some(limit) = options.global_asids {
        config.global_asid_limit = (mm::FIRST_GLOBAL_ASID + limit).min(mm::MAX_ASID_AVAILABLE);
    }
    let state = STATE.call_once(|| {
        let states: &'static [CpuTlbState] = (0..cpu_count)
            .map(|_| CpuTlbState::new())
            .collect::<Vec<_>>()
            .leak();
        State {
            system: TlbSystem::new(states, kernel_root.as_u64(), config),
            no_flush_ipis: options.bug == Some(Bug::NoFlushIpis),
            mode,
            broadcast: (mode == TlbMode::BroadcastSoftware).then_some(KernelBroadcast::Software),
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
    Ok((mode, reason))
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

/// Brings this CPU's TLB state in line with `mm`'s (kernel page table loaded).
pub fn init_this_cpu() {
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
    let timing = crate::tlb_latency::Timing::start();
    system().flush_tlb_mm_range(
        &KernelTlb,
        space,
        FlushRange::pages(start, end),
        freed_tables,
    );
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
    if let Err(unanswered) = ipi::call_on(&targets, &leave) {
        crate::fatal::stop(
            format_args!("address-space eviction not acknowledged: {unanswered}"),
            None,
        );
    }
}

/// Makes every CPU stop using anything of `space`.
pub fn flush_all(space: &AddressSpaceTlb, freed_tables: bool) {
    let timing = crate::tlb_latency::Timing::start();
    system().flush_tlb_mm_range(&KernelTlb, space, FlushRange::All, freed_tables);
    timing.finish();
}

/// Flushes the pages of `space` whose entries reclaim cleared: one deferred
/// batch flush for them all, or, with batching turned off
/// (`tlb.batch=off`), one flush per page.
pub fn flush_reclaimed(space: &AddressSpaceTlb, pages: &[u64]) {
    if state().batch_reclaim {
        let timing = crate::tlb_latency::Timing::start();
        let mut batch = FlushBatch::new();
        system().batch_add_pending(&mut batch, space);
        system().batch_flush(&KernelTlb, &mut batch);
        timing.finish();
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

/// Runs `op` on every online CPU (the software broadcast backend).
fn broadcast_by_ipi(op: BroadcastOp) {
    let handler = || system().handle_broadcast_ipi(&KernelTlb, &op);
    if let Err(unanswered) = ipi::call_on(&smp::online(), &handler) {
        crate::fatal::stop(
            format_args!("TLB broadcast not acknowledged: {unanswered}"),
            None,
        );
    }
}

impl BroadcastBackend for KernelBroadcast {
    fn flush_pcid_range(&self, pcid: Pcid, start: u64, end: u64, stride_shift: u8) {
        broadcast_by_ipi(BroadcastOp::PcidRange {
            pcid,
            start,
            end,
            stride_shift,
        });
    }

    fn flush_pcid(&self, pcid: Pcid) {
        broadcast_by_ipi(BroadcastOp::Pcid(pcid));
    }

    fn flush_all_nonglobal(&self) {
        broadcast_by_ipi(BroadcastOp::AllNonGlobal);
    }

    fn flush_kernel_range(&self, start: u64, end: u64) {
        broadcast_by_ipi(BroadcastOp::KernelRange { start, end });
    }

    fn flush_all_including_global(&self) {
        broadcast_by_ipi(BroadcastOp::AllIncludingGlobal);
    }

    fn sync(&self) {
        // Every operation above returned only after all CPUs ran it.
    }
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
        PCID_ENABLED
    }

    /// Milliseconds, the unit of `TlbConfig`'s intervals.
    fn now(&self) -> u64 {
        time::now_ns() / 1_000_000
    }

    fn invlpg(&self, va: u64) {
        arch::tlb::invlpg(va);
    }

    fn flush_pcid(&self, _pcid: Pcid) {
        // Without PCIDs there is one tag: reload CR3.
        arch::tlb::load_root(arch::cpu::page_table_root());
    }

    fn flush_all_nonglobal(&self) {
        arch::tlb::load_root(arch::cpu::page_table_root());
    }

    fn flush_everything(&self) {
        arch::tlb::flush_everything();
    }

    fn load_address_space(&self, root: u64, _pcid: Pcid, _flush: bool) {
        arch::tlb::load_root(PhysAddr::new(root));
    }

    fn send_flush_ipis(&self, targets: &CpuSet, request: &FlushRequest<'_>) {
        if state().no_flush_ipis {
            return;
        }
        let handler = || system().handle_flush_ipi(&KernelTlb, request);
        if let Err(unanswered) = ipi::call_on(targets, &handler) {
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
            crate::println!(
                "tlb-trace: cpu={} ctx={ctx} range={range} targets={:?} reason={:?}",
                event.initiator,
                event.targets,
                event.reason
            );
        }
    }
}

pub mod tests {
    //! In-kernel tests of the kernel's TLB glue.

    use crate::check_eq;
    use crate::ktest::{Test, TestResult};

    pub const TESTS: &[Test] = &[Test::new(
        "tlb::counter_names_match_the_abi",
        counter_names_match_the_abi,
    )];

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
}
