//! In-kernel tests of the kernel's TLB glue.

use core::sync::atomic::{AtomicUsize, Ordering};

use kernel::smp;

use crate::framework::TestResult;
use crate::{check_eq, require_ok};

/// CR4.PGE is set on every CPU whose CPUID reports it. The kernel's thread
/// stacks are mapped global, and the instruction choice relies on it: with
/// PCIDs on, INVLPG drops a kernel page cached under another PCID only if
/// the page is global (the kernel once left PGE off on every CPU).
pub fn global_pages_on_every_cpu() -> TestResult {
    let cpu = kernel::boot::detect_cpu_features();
    let with_pge = AtomicUsize::new(0);
    require_ok!(smp::call_on(&smp::online(), &|| {
        if hal::tlb::global_pages_enabled() {
            with_pge.fetch_add(1, Ordering::Relaxed);
        }
    }));
    let online = smp::online().count();
    check_eq!(
        with_pge.load(Ordering::Relaxed),
        if cpu.global_pages { online } else { 0 },
        "CPUs with CR4.PGE set (CPUID says PGE: {})",
        cpu.global_pages
    );
    Ok(())
}

/// `tlb_stats` copies `mm`'s counters in declaration order; user programs
/// find them by the names in `abi`. The two lists must agree.
pub fn counter_names_match_the_abi() -> TestResult {
    let names: alloc::vec::Vec<&str> = kernel::tlb::system()
        .total_counters()
        .fields()
        .map(|(name, _)| name)
        .collect();
    check_eq!(names.as_slice(), &abi::TLB_COUNTER_NAMES[..]);
    Ok(())
}
