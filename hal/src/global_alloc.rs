//! The `#[global_allocator]`: a linked-list heap behind a lock that disables
//! interrupts.
//!
//! Interrupt handlers free memory (a cross-CPU call's last reference can be
//! dropped inside the IPI handler). If the interrupted code on the same CPU
//! held the heap lock, a plain spinlock would deadlock; disabling interrupts
//! while the lock is held rules that out. Other CPUs only ever wait for a
//! holder that is running allocator code, never for one that is waiting.

use core::{
    alloc::{GlobalAlloc, Layout},
    mem::MaybeUninit,
    ptr::NonNull,
};

use linked_list_allocator::Heap;
use spin::Mutex;

use crate::cpu::without_interrupts;

pub struct InterruptSafeHeap(Mutex<Heap>);

#[global_allocator]
static HEAP: InterruptSafeHeap = InterruptSafeHeap(Mutex::new(Heap::empty()));

/// Hands `memory` to the heap. Called once, by the boot CPU.
pub fn init(memory: &'static mut [MaybeUninit<u8>]) {
    without_interrupts(|| HEAP.0.lock().init_from_slice(memory));
}

/// Bytes currently allocated.
pub fn used_bytes() -> usize {
    without_interrupts(|| HEAP.0.lock().used())
}

/// Bytes not allocated (some may be too fragmented for a large request).
pub fn free_bytes() -> usize {
    without_interrupts(|| HEAP.0.lock().free())
}

// SAFETY: every method forwards to `linked_list_allocator::Heap`, which
// implements the `GlobalAlloc` contract for the memory it was given, under a
// lock that makes the calls exclusive.
unsafe impl GlobalAlloc for InterruptSafeHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        without_interrupts(|| {
            self.0
                .lock()
                .allocate_first_fit(layout)
                .map_or(core::ptr::null_mut(), NonNull::as_ptr)
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if let Some(ptr) = NonNull::new(ptr) {
            // The caller guarantees `ptr` came from `alloc` with this
            // `layout` and is not used again.
            // SAFETY: forwarded from the caller's `dealloc` contract.
            without_interrupts(|| unsafe { self.0.lock().deallocate(ptr, layout) });
        }
    }
}
