//! The kernel's side of the `mm` crate: the instructions behind its
//! decisions, the choice of TLB mode, counters and the trace.
//!
//! `mm` decides *who* must flush *what* and *when*, and even which
//! instruction a local flush takes; [`KernelTlb`] carries each decision out:
//! the local instruction `mm` chose (passed to `hal::tlb::execute` as it
//! is), a cross-CPU call that runs `mm`'s flush handler elsewhere, or a
//! broadcast through the chosen backend ([`KernelBroadcast`]).
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

pub mod breakdown;
pub mod broadcast;
pub mod invlpgb_log;
pub mod latency;
mod lend;
pub mod recorder;
mod trace;

use alloc::{string::String, vec::Vec};
use mm::PageTableRoot;
use mm::{
    AddressSpaceTlb, CpuId, CpuSet, CpuTlbState, FlushBatch, FlushRange, FlushRequest, Instruction,
    Pcid, TlbConfig, TlbHardware, TlbSystem, TraceEvent, instructions::LocalTlb,
    invlpgb::InvlpgbLimits,
};
use spin::Once;

use crate::{
    cpu_features::CpuFeatures,
    smp,
    timeline::Purpose,
    tlb_mode::{Bug, Choice, ModeUnavailable, TlbHardwareChoice, TlbMode, TlbOptions, choose},
};
pub use broadcast::KernelBroadcast;
use hal::time;
use hal::{cpu::without_interrupts, percpu};
pub use lend::{LendError, lend_software_broadcast, return_software_broadcast};

struct State {
    system: TlbSystem<'static>,
    no_flush_ipis: bool,
    mode: TlbMode,
    hardware: TlbHardwareChoice,
    /// What every CPU's instruction choice is made for.
    local: LocalTlb,
    broadcast: Option<KernelBroadcast>,
    trace: bool,
    batch_reclaim: bool,
    /// `tlb.switch-delay=`, as a duration.
    switch_delay: core::time::Duration,
}

static STATE: Once<State> = Once::new();

/// Chooses the mode for `cpu` as `options` ask and creates the TLB system
/// for `cpu_count` CPUs whose kernel page table is `kernel_root`. Called once
/// by the boot CPU before any AP starts (and before [`init_this_cpu`]).
pub fn init(
    cpu_count: usize,
    kernel_root: PageTableRoot,
    options: &TlbOptions,
    cpu: &CpuFeatures,
) -> Result<Choice, ModeUnavailable> {
    let choice = choose(options, cpu)?;
    let config = config_for(options);
    let broadcast = backend_for(choice.mode, options, cpu);
    let state = STATE.call_once(|| {
        let states: &'static [CpuTlbState] = (0..cpu_count)
            .map(|_| CpuTlbState::new())
            .collect::<Vec<_>>()
            .leak();
        State {
            system: TlbSystem::new(states, kernel_root, config),
            no_flush_ipis: options.bug == Some(Bug::NoFlushIpis),
            mode: choice.mode,
            hardware: choice.hardware,
            local: LocalTlb {
                pcide: choice.hardware.pcids,
                pge: choice.hardware.global_pages,
                invpcid: choice.hardware.invpcid,
            },
            broadcast,
            trace: options.trace,
            batch_reclaim: options.batch_reclaim,
            switch_delay: core::time::Duration::from_micros(u64::from(options.switch_delay_us)),
        }
    });
    if let Some(bug) = options.bug {
        switch_on_bug(&state.system, bug, choice.mode);
    }
    if let Some(capacity) = options.timeline
        && let Err(no_room) = recorder::start(cpu_count, capacity)
    {
        log::warn!(
            "tlb: the timeline's buffers ({} KiB for {capacity} events per CPU) do not fit in \
             the heap: no timeline",
            no_room.bytes / 1024
        );
    }
    Ok(choice)
}

/// `mm`'s policy as `options` set it (the rest is Linux's).
fn config_for(options: &TlbOptions) -> TlbConfig {
    let mut config = TlbConfig {
        promotion_threshold: options.promotion_threshold,
        ..TlbConfig::default()
    };
    if let Some(limit) = options.global_asids {
        config.global_asid_limit = mm::FIRST_GLOBAL_ASID
            .get()
            .saturating_add(limit)
            .min(mm::MAX_ASID_AVAILABLE);
    }
    config
}

/// The broadcast backend of `mode`; for `invlpgb`, with this CPU's limits
/// (and the instructions enabled where the CPU needs it).
fn backend_for(mode: TlbMode, options: &TlbOptions, cpu: &CpuFeatures) -> Option<KernelBroadcast> {
    match mode {
        TlbMode::Ipi => None,
        TlbMode::BroadcastSoftware => Some(KernelBroadcast::Software),
        TlbMode::Invlpgb => {
            let limits = InvlpgbLimits::from_cpuid_edx(u32::from(
                cpu.invlpgb.expect("the invlpgb mode implies the feature"),
            ));
            hal::tlb::enable_invlpgb(limits.max_pages());
            Some(KernelBroadcast::Invlpgb(broadcast::Invlpgb {
                limits,
                trace: options.trace,
                bug: match options.bug {
                    Some(Bug::Invlpgb(bug)) => Some(bug),
                    _ => None,
                },
            }))
        }
    }
}

/// Switches on the deliberate bug `tlb.bug=` names, and says so.
fn switch_on_bug(system: &TlbSystem<'_>, bug: Bug, mode: TlbMode) {
    if let Bug::Mm(fault) = bug {
        system.faults().set(fault, true);
    }
    log::warn!("tlb: deliberate bug {bug:?} is switched on (tlb.bug=)");
    if matches!(bug, Bug::Invlpgb(_)) && mode != TlbMode::Invlpgb {
        log::warn!("tlb: {bug:?} breaks only mode invlpgb, and this boot runs {mode}");
    }
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

/// The mode in force: the boot's, or `broadcast-sw` while the demo has
/// the software backend lent ([`lend_software_broadcast`]).
pub fn mode() -> TlbMode {
    match (state().mode, broadcast_backend()) {
        (TlbMode::Ipi, Some(_)) => TlbMode::BroadcastSoftware,
        (mode, _) => mode,
    }
}

/// The broadcast backend `mm` is handed: the boot's choice, or the lent
/// software backend.
fn broadcast_backend() -> Option<&'static KernelBroadcast> {
    state().broadcast.as_ref().or_else(lend::lent_backend)
}

/// Sets this CPU's TLB control bits as chosen and brings its TLB state in
/// line with `mm`'s (kernel page table loaded, interrupts off).
pub fn init_this_cpu() {
    let hardware = state().hardware;
    // Global pages first: PCIDs rely on them (a kernel page is dropped by
    // INVLPG under every PCID only if it is global).
    if hardware.global_pages {
        hal::tlb::enable_global_pages();
        assert!(
            hal::tlb::global_pages_enabled(),
            "CR4.PGE did not stick on this CPU"
        );
    }
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
    recorder::switching(next.ctx_id(), || system().switch_mm(&KernelTlb, next));
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
/// ([`latency`]) and, with the timeline on, when it began and ended.
fn timed(flush: impl FnOnce()) {
    let timing = latency::Timing::start();
    flush();
    let (began, ended) = timing.finish();
    recorder::request(began, ended);
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
    let mut line = alloc::format!(
        "tlb-counters: mode={} cpus={} {}",
        mode(),
        smp::online().count(),
        system().total_counters()
    );
    if mode() == TlbMode::Invlpgb {
        line.push(' ');
        line.push_str(&invlpgb_log::counters());
    }
    line
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

    fn local_tlb(&self) -> LocalTlb {
        state().local
    }

    fn current_pcid(&self) -> Pcid {
        hal::tlb::current_pcid()
    }

    /// Milliseconds, the unit of `TlbConfig`'s intervals.
    fn now(&self) -> u64 {
        time::now_ns() / 1_000_000
    }

    fn execute(&self, instruction: Instruction) {
        if cfg!(debug_assertions) {
            check_pge_assumption(instruction);
        }
        hal::tlb::execute(instruction);
    }

    /// `tlb.switch-delay=`: a debugging option that makes the switch
    /// window long enough for a ring-3 program to fall into it often.
    fn switch_window(&self) {
        let delay = state().switch_delay;
        if !delay.is_zero() {
            time::delay(delay);
        }
    }

    fn send_flush_ipis(&self, targets: &CpuSet, request: &FlushRequest<'_>) {
        if state().no_flush_ipis {
            return;
        }
        let round = recorder::send_round(Purpose::Flush, targets);
        let handler =
            || recorder::handling(round, || system().handle_flush_ipi(&KernelTlb, request));
        let sending = breakdown::sending();
        match smp::call_on(targets, &handler) {
            Ok(steps) => {
                breakdown::ipis_answered(sending, &steps);
                if let Some(round) = round {
                    round.answered();
                }
                if state().trace {
                    breakdown::keep_for_trace(&steps);
                }
            }
            // A translation that may still be in use cannot be given back:
            // stopping with a report is the only safe outcome.
            Err(unanswered) => crate::fatal::stop(
                format_args!("TLB shootdown not acknowledged: {unanswered}"),
                None,
            ),
        }
    }

    fn broadcast(&self) -> Option<&KernelBroadcast> {
        broadcast_backend()
    }

    fn without_interrupts(&self, f: &mut dyn FnMut()) {
        without_interrupts(f);
    }

    fn trace(&self, event: &TraceEvent) {
        if state().trace {
            trace::print_decision(event);
        }
        recorder::decision(event);
    }
}

/// Two choices rely on CR4.PGE being what the kernel told `mm`: an INVLPG
/// for a kernel page (which reaches it under every PCID only if it is
/// global, PGE on), and INVPCID type 3 for one (which drops it only if it
/// is not global, PGE off; `mm` also chooses it for every non-global entry,
/// where the check costs a CR4 read). Debug builds check it before such an
/// instruction; release builds pay nothing on the local flush path.
fn check_pge_assumption(instruction: Instruction) {
    let relies_on_pge = match instruction {
        Instruction::Invlpg { va } => va >= mm::invlpgb::HIGHER_HALF_START,
        Instruction::InvpcidAllNonGlobal => !state().local.pge,
        _ => false,
    };
    if relies_on_pge {
        assert_eq!(
            state().local.pge,
            hal::tlb::global_pages_enabled(),
            "CR4.PGE differs from what the instruction choice assumes"
        );
    }
}
