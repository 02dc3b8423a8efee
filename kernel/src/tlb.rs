//! The kernel's side of the `mm` crate: the instructions behind its
//! decisions, and the one [`TlbSystem`] of the machine.
//!
//! `mm` decides *who* must flush *what* and *when*; [`KernelTlb`] turns each
//! decision into an instruction on the current CPU (INVLPG, a CR3 load) or a
//! cross-CPU call that runs `mm`'s flush handler on other CPUs.

use alloc::vec::Vec;

use mm::{
    AddressSpaceTlb, CpuId, CpuSet, CpuTlbState, FlushRange, FlushRequest, NoBroadcast, Pcid,
    TlbConfig, TlbHardware, TlbSystem,
};
use spin::Once;
use x86_64::PhysAddr;

use crate::{
    arch::{self, cpu::without_interrupts, ipi, percpu},
    smp, time,
};

/// The zero-sized handle `mm` calls back into; every method acts on the
/// CPU that runs it.
pub struct KernelTlb;

static SYSTEM: Once<TlbSystem<'static>> = Once::new();

/// Creates the TLB system for `cpu_count` CPUs whose kernel page table is
/// `kernel_root`. Called once by the boot CPU before any AP starts.
pub fn init(cpu_count: usize, kernel_root: PhysAddr) {
    SYSTEM.call_once(|| {
        let states: &'static [CpuTlbState] = (0..cpu_count)
            .map(|_| CpuTlbState::new())
            .collect::<Vec<_>>()
            .leak();
        TlbSystem::new(states, kernel_root.as_u64(), TlbConfig::default())
    });
}

/// The machine's TLB system.
pub fn system() -> &'static TlbSystem<'static> {
    SYSTEM
        .get()
        .expect("tlb::init runs before any TLB operation")
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
    let range = FlushRange::Range {
        start,
        end,
        stride_shift: mm::PAGE_SHIFT,
    };
    system().flush_tlb_mm_range(&KernelTlb, space, range, freed_tables);
}

/// Makes every CPU stop using anything of `space`.
pub fn flush_all(space: &AddressSpaceTlb, freed_tables: bool) {
    system().flush_tlb_mm_range(&KernelTlb, space, FlushRange::All, freed_tables);
}

impl TlbHardware for KernelTlb {
    type Broadcast = NoBroadcast;

    fn current_cpu(&self) -> CpuId {
        percpu::current().index
    }

    fn online_cpus(&self) -> CpuSet {
        smp::online()
    }

    fn pcid_enabled(&self) -> bool {
        false
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

    fn broadcast(&self) -> Option<&NoBroadcast> {
        None
    }

    fn without_interrupts(&self, f: &mut dyn FnMut()) {
        without_interrupts(f);
    }
}
