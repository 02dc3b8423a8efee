//! The CPUs: the table of per-CPU blocks, the online set, and starting the
//! application processors.
//!
//! The boot CPU (BSP) starts each application processor (AP) in turn with
//! the INIT-SIPI-SIPI sequence:
//!
//! 1. INIT resets the target into a wait-for-startup state; wait 10 ms.
//! 2. STARTUP (SIPI) with the trampoline's page number; the AP begins there
//!    ([`crate::trampoline`]).
//! 3. If it has not reported in after a while, a second SIPI (the MP
//!    specification's belt and braces); then give up on it.
//!
//! APs start one at a time because they share the trampoline's parameter
//! block. An AP that never reports in stops the bring-up (a late riser
//! could otherwise run on the next AP's stack); the kernel carries on with
//! the CPUs it has.
//!
//! Each AP arrives in `ap_entry`, which does only what every later step
//! needs: the kernel's page table, its own GDT and TSS, the shared IDT, and
//! its [`PerCpu`] block behind its GS base. The AP's APIC id comes from the
//! boot CPU (which read it from the MADT), not from the AP's own APIC: an AP
//! must not touch an x2APIC register before it has switched its APIC into
//! x2APIC mode. Then it calls the kernel's AP function, which enables the
//! rest in the kernel's boot order and marks the CPU online with
//! [`mark_this_cpu_online`].

use alloc::vec;
use core::{
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use spin::Once;
use tlb_types::{CpuId, CpuSet, MAX_CPUS};
use x86_64::PhysAddr;

use crate::{
    apic::{IpiKind, LocalApic},
    atomic_cpus::AtomicCpus,
    cpu, gdt, idt,
    percpu::{self, PerCpu},
    time::{self, Deadline},
    trampoline,
};

const AP_STACK_SIZE: usize = 64 * 1024;
const INIT_DELAY: Duration = Duration::from_millis(10);
const FIRST_SIPI_WAIT: Duration = Duration::from_millis(200);
const SECOND_SIPI_WAIT: Duration = Duration::from_secs(2);

static CPUS: [Once<&'static PerCpu>; MAX_CPUS] = [const { Once::new() }; MAX_CPUS];
static ONLINE: AtomicCpus = AtomicCpus::new();
static KERNEL_PAGE_TABLE: Once<PhysAddr> = Once::new();
/// What each AP runs once its block is installed.
static AP_MAIN: Once<fn() -> !> = Once::new();
/// The APIC id of the AP being started (one at a time).
static STARTING_APIC_ID: AtomicU32 = AtomicU32::new(0);

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

/// Marks this CPU online: from now on cross-calls and shootdowns wait for
/// it, so it must be ready to answer them.
pub fn mark_this_cpu_online() {
    ONLINE.insert(percpu::current().index, Ordering::Release);
}

fn register(cpu: &'static PerCpu) -> &'static PerCpu {
    CPUS[cpu.index].call_once(|| cpu);
    percpu::install(cpu);
    cpu
}

/// Creates and installs the boot CPU's block (CPU 0, APIC id `apic_id`) and
/// records the kernel page table the APs will switch to: the one loaded now.
pub fn init_boot_cpu(apic_id: u32) -> &'static PerCpu {
    KERNEL_PAGE_TABLE.call_once(|| PhysAddr::new(cpu::page_table_root().address()));
    register(PerCpu::new_static(0, apic_id, gdt::boot_cpu_tss()))
}

/// How bring-up of the APs ended.
#[derive(Clone, Copy, Debug)]
pub enum BringUpStop {
    /// Every listed CPU was started.
    Complete,
    /// More CPUs are listed than [`MAX_CPUS`]; the rest stay offline.
    TooMany,
    /// The CPU with this APIC id did not report in within `waited`; no
    /// further CPU was started.
    NoAnswer { apic_id: u32, waited: Duration },
}

/// Starts every CPU in `apic_ids` other than this one, in order, as CPUs 1,
/// 2, ...; each runs `ap_main` once its block is installed, and counts as
/// started when it calls [`mark_this_cpu_online`].
pub fn start_application_processors(
    apic: &LocalApic,
    apic_ids: impl Iterator<Item = u32>,
    ap_main: fn() -> !,
) -> BringUpStop {
    AP_MAIN.call_once(|| ap_main);
    let kernel_page_table = *KERNEL_PAGE_TABLE
        .get()
        .expect("init_boot_cpu runs before the APs start");
    trampoline::install(kernel_page_table);
    let me = percpu::current().apic_id;
    for (index, apic_id) in (1..).zip(apic_ids.filter(|&id| id != me)) {
        if index >= MAX_CPUS {
            return BringUpStop::TooMany;
        }
        if let Err(waited) = start_ap(apic, index, apic_id) {
            return BringUpStop::NoAnswer { apic_id, waited };
        }
    }
    BringUpStop::Complete
}

/// Starts the AP with APIC id `apic_id` as CPU `index` and waits until it
/// reports in. Returns how long it waited if it never did.
fn start_ap(apic: &LocalApic, index: CpuId, apic_id: u32) -> Result<(), Duration> {
    let stack: &'static mut [u128] = vec![0u128; AP_STACK_SIZE / 16].leak();
    let stack_top = stack.as_ptr() as u64 + AP_STACK_SIZE as u64;
    STARTING_APIC_ID.store(apic_id, Ordering::Release);
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
    let tss = gdt::load_for_ap();
    idt::load();
    let apic_id = STARTING_APIC_ID.load(Ordering::Acquire);
    register(PerCpu::new_static(index as CpuId, apic_id, tss));
    let ap_main = AP_MAIN.get().expect("set before any AP starts");
    ap_main()
}
