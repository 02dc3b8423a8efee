//! Thread stacks mapped in their own kernel window, each above an unmapped
//! guard page, and the kernel's own TLB shootdown when they go away.
//!
//! A stack that overflows runs into its guard page and faults instead of
//! silently overwriting the heap. The price is a kernel mapping per stack
//! that must be *removed* when the thread is gone: another CPU may have run
//! the thread (or just touched its stack) and still cache the translation,
//! so the frames may only be reused after a kernel-range flush has reached
//! every CPU, lazy ones included.
//!
//! Flushing at every thread exit would interrupt every CPU each time. Like
//! Linux's lazy purge of unmapped kernel areas, freed stacks are unmapped at
//! once but their slots and frames wait in a *dirty* list; whoever allocates
//! stacks purges the list with one flush for the whole batch
//! ([`purge`], called by `task::thread`). Nothing in the dirty list is
//! reachable through a page table any more; only TLBs may still remember it.

use alloc::vec::Vec;
use core::{
    mem::take,
    sync::atomic::{AtomicU64, Ordering},
};

use spin::Mutex;

use crate::frames::{self, StackFrame};
use crate::paging::{self, STACK_WINDOW_SIZE, STACK_WINDOW_START};

/// Usable bytes of a stack.
pub const STACK_SIZE: u64 = 32 * 1024;
const PAGE_SIZE: u64 = 4096;
pub const STACK_PAGES: usize = (STACK_SIZE / PAGE_SIZE) as usize;
/// Window bytes per stack: the stack and, below it, at least one guard page.
const SLOT_SIZE: u64 = 2 * STACK_SIZE;
/// More stacks than threads can exist (64 per process): the window's limit.
const MAX_SLOTS: usize = 16 * 1024;
const _: () = assert!(MAX_SLOTS as u64 * SLOT_SIZE <= STACK_WINDOW_SIZE);

/// Slot bookkeeping. Taken with interrupts off: stacks are freed wherever
/// the last reference to a thread goes.
struct Slots {
    /// Slots never handed out start here.
    next_unused: usize,
    /// Slots that were flushed after their last use.
    free: Vec<usize>,
    /// Unmapped but not yet flushed: each slot with the frames it had.
    dirty: Vec<(usize, Vec<StackFrame>)>,
}

static SLOTS: Mutex<Slots> = Mutex::new(Slots {
    next_unused: 0,
    free: Vec::new(),
    dirty: Vec::new(),
});

fn with_slots<R>(f: impl FnOnce(&mut Slots) -> R) -> R {
    crate::cpu::without_interrupts(|| f(&mut SLOTS.lock()))
}

fn slot_base(slot: usize) -> u64 {
    STACK_WINDOW_START + slot as u64 * SLOT_SIZE + (SLOT_SIZE - STACK_SIZE)
}

/// Why no stack could be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackError {
    /// Every slot of the window is in use or waits for a purge.
    NoSlot,
    /// No free frame (for the stack or a page table).
    OutOfMemory,
}

impl core::fmt::Display for StackError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::NoSlot => "every kernel stack slot is in use",
            Self::OutOfMemory => "no free frame for a kernel stack",
        })
    }
}

/// A thread's kernel stack: [`STACK_SIZE`] bytes mapped at [`Self::base`]
/// with an unmapped guard page below. Owning one means owning those bytes.
pub struct KernelStack {
    slot: usize,
    /// The frames mapped so far, page by page from the base.
    frames: Vec<StackFrame>,
}

impl KernelStack {
    /// Maps a new stack in a free slot. Does not purge: see [`purge`].
    pub fn allocate() -> Result<Self, StackError> {
        let slot = with_slots(|slots| {
            slots.free.pop().or_else(|| {
                (slots.next_unused < MAX_SLOTS).then(|| {
                    slots.next_unused += 1;
                    slots.next_unused - 1
                })
            })
        })
        .ok_or(StackError::NoSlot)?;
        // From here on, dropping `stack` unmaps whatever got mapped.
        let mut stack = Self {
            slot,
            frames: Vec::with_capacity(STACK_PAGES),
        };
        for page in 0..STACK_PAGES {
            let frame = frames::allocate_stack_frame().ok_or(StackError::OutOfMemory)?;
            if paging::map_stack_page(stack.base() + page as u64 * PAGE_SIZE, &frame).is_err() {
                frames::free_stack_frame(frame);
                return Err(StackError::OutOfMemory);
            }
            stack.frames.push(frame);
        }
        Ok(stack)
    }

    /// The stack's slot in the window (which a test of reuse compares).
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// The frame behind the stack's lowest page.
    pub fn first_frame(&self) -> x86_64::PhysAddr {
        self.frames[0].address()
    }

    /// The lowest address of the stack (the guard page ends here).
    pub fn base(&self) -> u64 {
        slot_base(self.slot)
    }

    /// The stack's memory, as words.
    pub fn words_mut(&mut self) -> &mut [u64] {
        let words = (STACK_SIZE / 8) as usize;
        // `allocate` mapped all STACK_SIZE bytes at `base` writable (a
        // stack that failed half-way is never returned), and only `drop`
        // unmaps them; the slot is this object's alone, and the `&mut self`
        // borrow makes the slice the only way in while it lives.
        // SAFETY: mapped, aligned, exclusively owned memory of `words` words.
        unsafe { core::slice::from_raw_parts_mut(self.base() as *mut u64, words) }
    }
}

impl KernelStack {
    /// Reads word `index` of the stack through *this CPU's* translation of
    /// its address, which is what a test of kernel-range flushes wants to
    /// see: a CPU with a stale TLB entry reads the old frame.
    pub fn read_word(&self, index: usize) -> u64 {
        assert!(
            index < (STACK_SIZE / 8) as usize,
            "word {index} beyond the stack"
        );
        let word = (self.base() + index as u64 * 8) as *mut u64;
        // The stack is mapped while `self` lives; the address is 8-byte
        // aligned. Other CPUs may write the word concurrently only through
        // `words_mut` on the owner, so an atomic load keeps the read defined.
        // SAFETY: mapped, aligned, valid for atomic access while `self` lives.
        unsafe { AtomicU64::from_ptr(word) }.load(Ordering::Relaxed)
    }
}

impl Drop for KernelStack {
    /// Unmaps the stack and parks slot and frames in the dirty list: other
    /// CPUs may still translate these addresses until the next [`purge`].
    fn drop(&mut self) {
        let base = self.base();
        for (page, frame) in self.frames.iter().enumerate() {
            let unmapped = paging::unmap_stack_page(base + page as u64 * PAGE_SIZE);
            debug_assert_eq!(unmapped, Some(frame.address()));
        }
        let frames = take(&mut self.frames);
        with_slots(|slots| slots.dirty.push((self.slot, frames)));
    }
}

/// How many freed stacks wait for a flush.
pub fn dirty_count() -> usize {
    with_slots(|slots| slots.dirty.len())
}

/// Makes every CPU forget the freed stacks with one call of
/// `flush_kernel_range(start, end)` over the span they cover, then frees
/// their frames and slots. Returns how many stacks were purged. Call with
/// no lock held: the flush waits for every CPU.
pub fn purge(flush_kernel_range: impl FnOnce(u64, u64)) -> usize {
    let dirty = with_slots(|slots| take(&mut slots.dirty));
    let (Some(start), Some(last)) = (
        dirty.iter().map(|(slot, _)| slot_base(*slot)).min(),
        dirty.iter().map(|(slot, _)| slot_base(*slot)).max(),
    ) else {
        return 0;
    };
    flush_kernel_range(start, last + STACK_SIZE);
    let mut slots = Vec::with_capacity(dirty.len());
    for (slot, stack_frames) in dirty {
        stack_frames.into_iter().for_each(frames::free_stack_frame);
        slots.push(slot);
    }
    let purged = slots.len();
    with_slots(|all| all.free.extend(slots));
    purged
}
