//! In-kernel tests of the heap.

use alloc::{boxed::Box, collections::BTreeMap, vec::Vec};

use abi::Errno;

use crate::framework::TestResult;
use crate::{check, check_eq};

pub fn box_and_vec() -> TestResult {
    let boxed = Box::new(41u64);
    check_eq!(*boxed + 1, 42);
    let squares: Vec<u64> = (0..1000).map(|n| n * n).collect();
    check_eq!(squares.iter().sum::<u64>(), 332_833_500);
    let mut map = BTreeMap::new();
    for n in 0..100u32 {
        map.insert(n % 7, n);
    }
    check_eq!(map.len(), 7);
    Ok(())
}

pub fn large_allocation() -> TestResult {
    let mut big = Vec::<u8>::with_capacity(1 << 20);
    big.resize(1 << 20, 0xA5);
    check!(big.iter().all(|&byte| byte == 0xA5));
    Ok(())
}

pub fn memory_is_reused() -> TestResult {
    let before = hal::global_alloc::used_bytes();
    for round in 0..10_000u64 {
        let value = Box::new([round; 16]);
        check_eq!(value[15], round);
    }
    check_eq!(
        hal::global_alloc::used_bytes(),
        before,
        "heap usage after freeing everything"
    );
    Ok(())
}

/// Budgeted allocations succeed until only the reserve is left, then
/// fail with `NoMem`; the kernel's own allocations still succeed.
pub fn program_allocations_stop_at_the_reserve() -> TestResult {
    const CHUNK: usize = 64 * 1024;
    let mut taken: Vec<Vec<u8>> = Vec::new();
    let outcome = loop {
        match kernel::memory::heap::try_zeroed_vec::<u8>(CHUNK) {
            Ok(chunk) => taken.push(chunk),
            Err(errno) => break errno,
        }
        if taken.len() > (kernel::memory::heap::MAX_HEAP_BYTES / CHUNK) {
            break Errno::Inval;
        }
    };
    check_eq!(outcome, Errno::NoMem, "after {} chunks", taken.len());
    let reserve = kernel::memory::heap::reserve_bytes();
    let free = hal::global_alloc::free_bytes();
    check!(
        free >= reserve && free < reserve + CHUNK,
        "{free} bytes free when the budget ran out; the reserve is {reserve}"
    );
    let kernel_allocation = Box::new([7u8; 4096]);
    check_eq!(kernel_allocation[4095], 7);
    drop(taken);
    check!(
        kernel::memory::heap::try_zeroed_vec::<u8>(CHUNK).is_ok(),
        "budgeted allocations must work again once memory is freed"
    );
    Ok(())
}
