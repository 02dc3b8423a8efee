//! The kernel heap: `alloc` (Box, Vec, String) on a linked-list allocator.
//!
//! The heap is one physically contiguous run of frames, used through the
//! bootloader's physical-memory mapping, so it needs no page-table changes of
//! its own. Its size scales with RAM (an eighth of it, between 4 and 64 MiB).
//!
//! The allocator itself (and why its lock disables interrupts) is in
//! [`hal::global_alloc`].
//!
//! ## Programs cannot exhaust it
//!
//! A Rust allocation that fails ends in the alloc-error handler: a kernel
//! panic. So nothing a program does may make the kernel's own allocations
//! fail. Two rules see to that:
//!
//! - **Large allocations a program causes are fallible and budgeted**:
//!   thread kernel stacks, the kernel's copies of user buffers, swap slots,
//!   loaded program segments. They come from [`try_zeroed_vec`], which
//!   refuses (`ENOMEM`) once less than a *reserve* of the heap would be left.
//!   The reserve is a quarter of the heap.
//! - **Small records are bounded by counts** (`abi::MAX_PROCESSES`,
//!   `MAX_THREADS`, `MAX_REGIONS`), and region records are also checked
//!   against the budget ([`check_budget`]), so their worst case stays inside
//!   the reserve.
//!
//! Everything else the kernel allocates (run queues, flush bookkeeping,
//! the copies of counters) is proportional to those bounded things and
//! comes out of the reserve.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use abi::Errno;

use super::frames::{self, FRAME_SIZE};
use hal::global_alloc;

const MIN_HEAP_BYTES: usize = 4 << 20;
const MAX_HEAP_BYTES: usize = 64 << 20;

/// Heap bytes that allocations caused by programs may never use.
static RESERVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Why the heap could not be set up.
#[derive(Debug)]
pub struct HeapInitError {
    pub wanted_bytes: usize,
}

/// Sizes the heap for `free_bytes` of free RAM, takes its frames and hands
/// them to the allocator. Returns the heap size in bytes.
pub fn init(free_bytes: usize) -> Result<usize, HeapInitError> {
    let wanted_bytes = (free_bytes / 8).clamp(MIN_HEAP_BYTES, MAX_HEAP_BYTES);
    let frames = frames::allocate_permanent(wanted_bytes / FRAME_SIZE)
        .ok_or(HeapInitError { wanted_bytes })?;
    global_alloc::init(hal::phys::permanent_bytes(frames));
    RESERVE_BYTES.store(wanted_bytes / 4, Ordering::Relaxed);
    Ok(wanted_bytes)
}

/// `Ok` if a program-caused allocation of `bytes` leaves the reserve intact.
pub fn check_budget(bytes: usize) -> Result<(), Errno> {
    let needed = bytes.saturating_add(RESERVE_BYTES.load(Ordering::Relaxed));
    if global_alloc::free_bytes() >= needed {
        Ok(())
    } else {
        Err(Errno::NoMem)
    }
}

/// `len` zeroed elements for an allocation a program causes: `NoMem`
/// instead of a panic when the budget or the heap is exhausted.
pub fn try_zeroed_vec<T: Copy + Default>(len: usize) -> Result<Vec<T>, Errno> {
    check_budget(len.saturating_mul(size_of::<T>()))?;
    let mut vec = Vec::new();
    vec.try_reserve_exact(len).map_err(|_| Errno::NoMem)?;
    vec.resize(len, T::default());
    Ok(vec)
}

pub mod tests {
    //! In-kernel tests of the heap.

    use alloc::{boxed::Box, collections::BTreeMap, vec::Vec};

    use abi::Errno;

    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq};

    pub const TESTS: &[Test] = &[
        Test::new("heap::box_and_vec", box_and_vec),
        Test::new("heap::large_allocation", large_allocation),
        Test::new("heap::memory_is_reused", memory_is_reused),
        Test::new(
            "heap::program_allocations_stop_at_the_reserve",
            program_allocations_stop_at_the_reserve,
        ),
    ];

    fn box_and_vec() -> TestResult {
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

    fn large_allocation() -> TestResult {
        let mut big = Vec::<u8>::with_capacity(1 << 20);
        big.resize(1 << 20, 0xA5);
        check!(big.iter().all(|&byte| byte == 0xA5));
        Ok(())
    }

    fn memory_is_reused() -> TestResult {
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
    fn program_allocations_stop_at_the_reserve() -> TestResult {
        const CHUNK: usize = 64 * 1024;
        let mut taken: Vec<Vec<u8>> = Vec::new();
        let outcome = loop {
            match super::try_zeroed_vec::<u8>(CHUNK) {
                Ok(chunk) => taken.push(chunk),
                Err(errno) => break errno,
            }
            if taken.len() > (super::MAX_HEAP_BYTES / CHUNK) {
                break Errno::Inval;
            }
        };
        check_eq!(outcome, Errno::NoMem, "after {} chunks", taken.len());
        let reserve = super::RESERVE_BYTES.load(core::sync::atomic::Ordering::Relaxed);
        let free = hal::global_alloc::free_bytes();
        check!(
            free >= reserve && free < reserve + CHUNK,
            "{free} bytes free when the budget ran out; the reserve is {reserve}"
        );
        let kernel_allocation = Box::new([7u8; 4096]);
        check_eq!(kernel_allocation[4095], 7);
        drop(taken);
        check!(
            super::try_zeroed_vec::<u8>(CHUNK).is_ok(),
            "budgeted allocations must work again once memory is freed"
        );
        Ok(())
    }
}
