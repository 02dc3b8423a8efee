//! In-kernel tests of the kernel's TLB glue.

use crate::check_eq;
use crate::framework::TestResult;

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
