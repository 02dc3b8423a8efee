//! The CPUs as the rest of the kernel sees them: which are online, and how
//! to run a function on some of them.
//!
//! The hardware layer keeps the CPU table and the online set
//! ([`hal::smp`]) and carries out cross-CPU calls ([`hal::ipi`]). Its CPU
//! sets are the [`CpuSet`] every TLB decision uses (both layers take it
//! from `tlb_types`), so a flush's targets reach the IPIs as they are.

use core::time::Duration;

use hal::{apic::ApicMode, ipi, percpu::PerCpu};
use mm::{CpuId, CpuSet};

pub use hal::ipi::{CallSteps, Unanswered};

/// What bring-up achieved, for the banner and the tests.
#[derive(Debug)]
pub struct SmpSummary {
    pub online: usize,
    pub listed: usize,
    pub bring_up: Duration,
    pub apic_mode: ApicMode,
    pub tsc_hz: u64,
    pub apic_timer_hz: u64,
    /// The TLB mode and instructions in force, and why.
    pub tlb: crate::tlb_mode::Choice,
}

/// The CPUs that are up and answering IPIs.
pub fn online() -> CpuSet {
    hal::smp::online()
}

/// Whether `cpu` (any number, e.g. from a system call) names an online CPU.
pub fn is_online(cpu: u64) -> bool {
    hal::smp::is_online(cpu)
}

/// CPU `index`'s per-CPU block, once it was created.
pub fn cpu(index: CpuId) -> Option<&'static PerCpu> {
    hal::smp::cpu(index)
}

/// Runs `work` on every online CPU in `targets` (this one included, if it
/// is a target) and returns when all have finished it; see [`hal::ipi`].
pub fn call_on(targets: &CpuSet, work: &(dyn Fn() + Sync)) -> Result<CallSteps, Unanswered> {
    ipi::call_on(targets, work)
}

/// [`call_on`] with a chosen answer timeout.
pub fn call_on_within(
    targets: &CpuSet,
    work: &(dyn Fn() + Sync),
    timeout: Duration,
) -> Result<CallSteps, Unanswered> {
    ipi::call_on_within(targets, work, timeout)
}
