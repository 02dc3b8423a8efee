//! The kernel heap: `alloc` (Box, Vec, String) on a linked-list allocator.
//!
//! The heap is one physically contiguous run of frames, used through the
//! bootloader's physical-memory mapping, so it needs no page-table changes of
//! its own. Its size scales with RAM (an eighth of it, between 4 and 64 MiB).
//!
//! The allocator itself (and why its lock disables interrupts) is in
//! [`crate::arch::global_alloc`].

use super::frames::{self, FRAME_SIZE};

const MIN_HEAP_BYTES: usize = 4 << 20;
const MAX_HEAP_BYTES: usize = 64 << 20;

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
    crate::arch::global_alloc::init(crate::arch::phys::permanent_bytes(frames));
    Ok(wanted_bytes)
}

pub mod tests {
    //! In-kernel tests of the heap.

    use alloc::{boxed::Box, collections::BTreeMap, vec::Vec};

    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq};

    pub const TESTS: &[Test] = &[
        Test::new("heap::box_and_vec", box_and_vec),
        Test::new("heap::large_allocation", large_allocation),
        Test::new("heap::memory_is_reused", memory_is_reused),
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
        let before = crate::arch::global_alloc::used_bytes();
        for round in 0..10_000u64 {
            let value = Box::new([round; 16]);
            check_eq!(value[15], round);
        }
        check_eq!(
            crate::arch::global_alloc::used_bytes(),
            before,
            "heap usage after freeing everything"
        );
        Ok(())
    }
}
