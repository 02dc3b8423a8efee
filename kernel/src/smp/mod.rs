//! Bringing up every CPU.
//!
//! The boot CPU (BSP) finds the others in the ACPI MADT, sets up its own
//! local APIC, measures the APIC timer, installs the real-mode trampoline
//! below 1 MiB and then starts each application processor (AP) in turn with
//! the INIT-SIPI-SIPI sequence:
//!
//! 1. INIT resets the target into a wait-for-startup state; wait 10 ms.
//! 2. STARTUP (SIPI) with the trampoline's page number; the AP begins there.
//! 3. If it has not reported in after a while, a second SIPI (the MP
//!    specification's belt and braces); then give up on it.
//!
//! APs start one at a time because they share the trampoline's parameter
//! block. An AP that never reports in stops the bring-up (a late riser
//! could otherwise run on the next AP's stack) with a message; the kernel
//! carries on with the CPUs it has.
//!
//! Each AP, in [`ap_entry`]: switches to the kernel page table, loads its own
//! GDT, TSS (with its own double-fault stack) and the shared IDT, points its
//! GS base at its [`PerCpu`] block, turns on SMEP and SMAP if the CPU has
//! them, enables its local APIC and timer, reports in, and runs its idle
//! thread, answering IPIs and running whatever the scheduler queues on it.

pub mod percpu;
pub mod timer;

use alloc::vec;
use core::{fmt, sync::atomic::Ordering, time::Duration};

use log::{info, warn};
use mm::{AtomicCpuSet, CpuId, CpuSet, MAX_CPUS};
use spin::{Lazy, Once};
use x86_64::PhysAddr;

use crate::{
    acpi::CpuTopology,
    arch::{
        self,
        apic::{self, ApicMode, IpiKind, LocalApic},
        trampoline,
    },
    cpu_features::CpuFeatures,
    interrupts::SPURIOUS_VECTOR,
    task::sched,
    time::{self, Deadline},
    tlb::{self, TlbOptions},
};
pub use percpu::PerCpu;

const AP_STACK_SIZE: usize = 64 * 1024;
const INIT_DELAY: Duration = Duration::from_millis(10);
const FIRST_SIPI_WAIT: Duration = Duration::from_millis(200);
const SECOND_SIPI_WAIT: Duration = Duration::from_secs(2);

static CPUS: [Once<&'static PerCpu>; MAX_CPUS] = [const { Once::new() }; MAX_CPUS];
/// `mm`'s CPU sets are not const-constructible (their atomics can be
/// loom's), hence the `Lazy`.
static ONLINE: Lazy<AtomicCpuSet> = Lazy::new(AtomicCpuSet::new);
static KERNEL_PAGE_TABLE: Once<PhysAddr> = Once::new();

/// CPU `index`'s block, once it was created.
pub fn cpu(index: CpuId) -> Option<&'static PerCpu> {
    CPUS.get(index).and_then(|slot| slot.get().copied())
}

/// The CPUs that are up and answering IPIs.
pub fn online() -> CpuSet {
    ONLINE.snapshot(Ordering::Acquire)
}

/// Whether `cpu` (any number, e.g. from a system call) names an online CPU.
pub fn is_online(cpu: u64) -> bool {
    usize::try_from(cpu).is_ok_and(|cpu| cpu < MAX_CPUS && ONLINE.contains(cpu, Ordering::Acquire))
}

/// What bring-up achieved, for the banner.
#[derive(Debug)]
pub struct SmpSummary {
    pub online: usize,
    pub listed: usize,
    pub bring_up: Duration,
    pub apic_mode: ApicMode,
    pub tsc_hz: u64,
    pub apic_timer_hz: u64,
    /// The TLB mode and instructions in force, and why.
    pub tlb: tlb::Choice,
}

#[derive(Debug)]
pub enum SmpError {
    Apic(apic::ApicError),
    Clock,
    Tlb(tlb::ModeUnavailable),
}

impl fmt::Display for SmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Apic(error) => write!(f, "cannot set up the local APIC: {error:?}"),
            Self::Clock => write!(
                f,
                "cannot measure the TSC rate: no PIT, or the TSC does not count"
            ),
            Self::Tlb(error) => write!(f, "{error}"),
        }
    }
}

/// Registers `cpu` in the CPU table (does not mark it online).
fn register(cpu: &'static PerCpu) {
    CPUS[cpu.index].call_once(|| cpu);
}

/// Sets up the boot CPU's interrupts and starts every other enabled CPU.
pub fn init(
    topology: &CpuTopology,
    cpu: &CpuFeatures,
    tlb_options: &TlbOptions,
) -> Result<SmpSummary, SmpError> {
    arch::pic::disable();
    let tsc_hz = time::init().map_err(|_| SmpError::Clock)?;
    let apic_mode = apic::init_mode(cpu.x2apic, PhysAddr::new(topology.local_apic_address))
        .map_err(SmpError::Apic)?;
    let apic = LocalApic::get().map_err(SmpError::Apic)?;
    apic.enable(SPURIOUS_VECTOR);

    let boot_cpu = PerCpu::new_static(0, apic.id(), arch::gdt::boot_cpu_tss());
    register(boot_cpu);
    arch::percpu::install(boot_cpu);
    let kernel_page_table = *KERNEL_PAGE_TABLE.call_once(arch::cpu::page_table_root);
    let cpu_count = topology.enabled_apic_ids().count().clamp(1, MAX_CPUS);
    let tlb_choice =
        tlb::init(cpu_count, kernel_page_table, tlb_options, cpu).map_err(SmpError::Tlb)?;
    tlb::init_this_cpu();
    arch::syscall::init_this_cpu();
    arch::protection::init(cpu.smep, cpu.smap);
    sched::init_boot_cpu();
    let apic_timer_hz = timer::calibrate(&apic);
    timer::start(&apic);
    ONLINE.insert(0, Ordering::Release);
    arch::cpu::enable_interrupts();

    let started = time::now_ns();
    trampoline::install(kernel_page_table);
    let others: vec::Vec<u32> = topology
        .enabled_apic_ids()
        .filter(|&id| id != boot_cpu.apic_id)
        .collect();
    for (index, apic_id) in (1..).zip(others) {
        if index >= cpu_count {
            warn!("smp: more than {MAX_CPUS} CPUs listed; the rest stay offline");
            break;
        }
        if let Err(waited) = start_ap(&apic, index, apic_id) {
            warn!(
                "smp: CPU with APIC id {apic_id} did not start within {waited:?}; \
                 not starting any further CPUs"
            );
            break;
        }
    }
    let bring_up = Duration::from_nanos(time::now_ns() - started);
    let online = online().count();
    info!(
        "smp: {online}/{} CPUs online, bring-up took {:.1} ms",
        topology.enabled_apic_ids().count(),
        bring_up.as_secs_f64() * 1000.0
    );
    Ok(SmpSummary {
        online,
        listed: topology.enabled_apic_ids().count(),
        bring_up,
        apic_mode,
        tsc_hz,
        apic_timer_hz,
        tlb: tlb_choice,
    })
}

/// Starts the AP with APIC id `apic_id` as CPU `index` and waits until it
/// reports in. Returns how long it waited if it never did.
fn start_ap(apic: &LocalApic, index: CpuId, apic_id: u32) -> Result<(), Duration> {
    let stack: &'static mut [u128] = vec![0u128; AP_STACK_SIZE / 16].leak();
    let stack_top = stack.as_ptr() as u64 + AP_STACK_SIZE as u64;
    trampoline::set_parameters(stack_top, ap_entry, index as u64);

    apic.send(apic_id, IpiKind::Init);
    time::delay(INIT_DELAY);
    for wait in [FIRST_SIPI_WAIT, SECOND_SIPI_WAIT] {
        apic.send(apic_id, IpiKind::Startup(trampoline::startup_vector()));
        let deadline = Deadline::after(wait);
        while !deadline.has_passed() {
            if ONLINE.contains(index, Ordering::Acquire) {
                return Ok(());
            }
            core::hint::spin_loop();
        }
    }
    Err(FIRST_SIPI_WAIT + SECOND_SIPI_WAIT)
}

/// Where an AP arrives from the trampoline, on its own stack, with
/// interrupts off and the trampoline's page table loaded.
extern "C" fn ap_entry(index: u64) -> ! {
    let kernel_page_table = *KERNEL_PAGE_TABLE.get().expect("set before any AP starts");
    trampoline::switch_to_kernel_page_table(kernel_page_table);
    let tss = arch::gdt::load_for_ap();
    arch::idt::load();
    let apic = LocalApic::get().expect("the BSP set up the APIC mode");
    let me = PerCpu::new_static(index as CpuId, apic.id(), tss);
    register(me);
    arch::percpu::install(me);
    tlb::init_this_cpu();
    arch::syscall::init_this_cpu();
    arch::protection::enable_this_cpu();
    apic.enable(SPURIOUS_VECTOR);
    timer::start(&apic);
    ONLINE.insert(me.index, Ordering::Release);
    sched::run_idle_on_ap()
}

pub mod tests {
    //! In-kernel tests of bring-up, the per-CPU tick and cross-CPU calls.

    use alloc::vec::Vec;
    use core::{
        sync::atomic::{AtomicU64, AtomicUsize, Ordering},
        time::Duration,
    };

    use mm::CpuSet;

    use super::{cpu, online};
    use crate::arch::{ipi, percpu};
    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq, require_ok, require_some, time};

    pub const TESTS: &[Test] = &[
        Test::new(
            "smp::every_listed_cpu_is_online",
            every_listed_cpu_is_online,
        ),
        Test::new(
            "smp::percpu_is_found_through_gs",
            percpu_is_found_through_gs,
        ),
        Test::new("smp::timer_ticks_on_every_cpu", timer_ticks_on_every_cpu),
        Test::new("ipi::round_trip_to_every_cpu", round_trip_to_every_cpu),
        Test::new(
            "ipi::concurrent_cross_calls_complete",
            concurrent_cross_calls_complete,
        ),
        Test::new("ipi::local_calls_send_no_ipi", local_calls_send_no_ipi),
        Test::new(
            "ipi::unanswered_call_is_retracted",
            unanswered_call_is_retracted,
        ),
    ];

    fn total_ipis_sent() -> u64 {
        online()
            .iter()
            .filter_map(cpu)
            .map(|cpu| cpu.ipis_sent.load(Ordering::Relaxed))
            .sum()
    }

    fn every_listed_cpu_is_online() -> TestResult {
        let summary = require_some!(
            crate::SMP_SUMMARY.get(),
            "smp::init did not record a summary"
        );
        check_eq!(
            summary.online,
            summary.listed,
            "CPUs listed in the MADT vs online"
        );
        check_eq!(online().count(), summary.online);
        Ok(())
    }

    fn percpu_is_found_through_gs() -> TestResult {
        check_eq!(percpu::current().index, 0, "tests run on the boot CPU");
        for index in &online() {
            let seen = AtomicUsize::new(usize::MAX);
            require_ok!(ipi::call_on(&CpuSet::single(index), &|| {
                seen.store(percpu::current().index, Ordering::Relaxed)
            }));
            check_eq!(
                seen.load(Ordering::Relaxed),
                index,
                "the call ran on the wrong CPU"
            );
        }
        Ok(())
    }

    fn timer_ticks_on_every_cpu() -> TestResult {
        let ticks = || -> Vec<u64> {
            online()
                .iter()
                .filter_map(cpu)
                .map(|cpu| cpu.ticks.load(Ordering::Relaxed))
                .collect()
        };
        let before = ticks();
        time::delay(Duration::from_millis(100));
        for ((index, before), after) in online().iter().zip(before).zip(ticks()) {
            check!(
                after > before,
                "CPU {index} took no timer tick in 100 ms ({before} -> {after})"
            );
        }
        Ok(())
    }

    fn round_trip_to_every_cpu() -> TestResult {
        const ROUNDS: usize = 200;
        let me = percpu::current().index;
        let mut samples = Vec::with_capacity(ROUNDS);
        for target in online().iter().filter(|&cpu| cpu != me) {
            let target_cpu = require_some!(cpu(target), "CPU {target} is not registered");
            let received_before = target_cpu.ipis_received.load(Ordering::Relaxed);
            for _ in 0..ROUNDS {
                let start = time::now_ns();
                require_ok!(ipi::call_on(&CpuSet::single(target), &|| {}));
                samples.push(time::now_ns() - start);
            }
            let received = target_cpu.ipis_received.load(Ordering::Relaxed) - received_before;
            check!(
                received >= ROUNDS as u64,
                "CPU {target} received {received} of {ROUNDS} IPIs"
            );
        }
        if !samples.is_empty() {
            samples.sort_unstable();
            crate::println!(
                "ipi: round trip to {} CPUs x {ROUNDS}: median {} us, p99 {} us",
                online().count() - 1,
                samples[samples.len() / 2] / 1000,
                samples[samples.len() * 99 / 100] / 1000
            );
        }
        Ok(())
    }

    fn concurrent_cross_calls_complete() -> TestResult {
        const ROUNDS: u64 = 100;
        let calls_made = AtomicU64::new(0);
        let failures = AtomicU64::new(0);
        let all = online();
        // Every CPU (this one included) makes ROUNDS calls to every other CPU
        // at the same time, from interrupt context on the others: each must
        // serve incoming calls while it waits for its own.
        require_ok!(ipi::call_on(&all, &|| {
            let others = online().without(percpu::current().index);
            for _ in 0..ROUNDS {
                if ipi::call_on(&others, &|| {
                    calls_made.fetch_add(1, Ordering::Relaxed);
                })
                .is_err()
                {
                    failures.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
        let cpus = all.count() as u64;
        check_eq!(
            failures.load(Ordering::Relaxed),
            0,
            "cross-calls that were not answered"
        );
        check_eq!(
            calls_made.load(Ordering::Relaxed),
            cpus * (cpus - 1) * ROUNDS,
            "calls executed"
        );
        Ok(())
    }

    fn local_calls_send_no_ipi() -> TestResult {
        let me = percpu::current().index;
        let before = total_ipis_sent();
        let ran = AtomicUsize::new(0);
        require_ok!(ipi::call_on(&CpuSet::single(me), &|| {
            ran.fetch_add(1, Ordering::Relaxed);
        }));
        check_eq!(ran.load(Ordering::Relaxed), 1);
        check_eq!(
            total_ipis_sent(),
            before,
            "calling only yourself must not send an IPI"
        );
        if online().count() == 1 {
            require_ok!(ipi::call_on(&CpuSet::first_n(mm::MAX_CPUS), &|| {}));
            check_eq!(
                total_ipis_sent(),
                0,
                "with one CPU online no IPI is ever sent"
            );
        }
        Ok(())
    }

    /// CPU 1 sits in a cross-call with interrupts off; CPU 2 calls it with a
    /// short timeout and must get `Err` naming CPU 1, with its request
    /// retracted (CPU 1 must never run it afterwards).
    fn unanswered_call_is_retracted() -> TestResult {
        use core::sync::atomic::AtomicBool;
        if online().count() < 3 {
            crate::println!("ipi: unanswered_call_is_retracted needs 3 CPUs; nothing to check");
            return Ok(());
        }
        let release = AtomicBool::new(false);
        let late_runs = AtomicUsize::new(0);
        let outcome = AtomicUsize::new(0);
        let (stuck, caller) = (1, 2);
        require_ok!(ipi::call_on(&CpuSet::from_iter([stuck, caller]), &|| {
            if percpu::current().index == stuck {
                while !release.load(Ordering::Acquire) {
                    core::hint::spin_loop();
                }
                return;
            }
            let result = ipi::call_on_within(
                &CpuSet::single(stuck),
                &|| {
                    late_runs.fetch_add(1, Ordering::Relaxed);
                },
                Duration::from_millis(200),
            );
            let named_stuck =
                matches!(&result, Err(unanswered) if unanswered.cpus == CpuSet::single(stuck));
            outcome.store(if named_stuck { 1 } else { 2 }, Ordering::Relaxed);
            release.store(true, Ordering::Release);
        }));
        time::delay(Duration::from_millis(50));
        check_eq!(
            outcome.load(Ordering::Relaxed),
            1,
            "1 = Err naming CPU 1; 2 = anything else"
        );
        check_eq!(
            late_runs.load(Ordering::Relaxed),
            0,
            "the retracted request ran anyway"
        );
        Ok(())
    }
}
