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
pub const MAX_HEAP_BYTES: usize = 64 << 20;

/// Heap bytes that allocations caused by programs may never use.
static RESERVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The bytes of heap that programs' allocations leave to the kernel.
pub fn reserve_bytes() -> usize {
    RESERVE_BYTES.load(Ordering::Relaxed)
}

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
