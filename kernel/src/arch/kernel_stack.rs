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

use super::paging::{self, STACK_WINDOW_SIZE, STACK_WINDOW_START};
use crate::memory::frames::{self, StackFrame};

/// Usable bytes of a stack.
pub const STACK_SIZE: u64 = 32 * 1024;
const PAGE_SIZE: u64 = 4096;
const STACK_PAGES: usize = (STACK_SIZE / PAGE_SIZE) as usize;
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
    super::cpu::without_interrupts(|| f(&mut SLOTS.lock()))
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

pub mod tests {
    //! The kernel's own shootdown, observed: a freed stack's address,
    //! mapped anew, must read the new memory on every CPU.

    use alloc::vec::Vec;
    use core::sync::atomic::{AtomicUsize, Ordering};

    use super::{KernelStack, STACK_PAGES, purge};
    use crate::{
        arch::{ipi, percpu},
        check, check_eq,
        ktest::{Test, TestResult},
        memory::frames,
        require_ok, smp, tlb,
    };

    pub const TESTS: &[Test] = &[Test::new(
        "kernel_stack::freed_stack_is_flushed_everywhere_before_reuse",
        freed_stack_is_flushed_everywhere_before_reuse,
    )];

    const OLD: u64 = 0x01d0_01d0_01d0_01d0;
    const NEW: u64 = 0x0e11_0e11_0e11_0e11;

    /// How many CPUs read `expected` at word 0 of `stack`, through their
    /// own TLBs.
    fn cpus_reading(stack: &KernelStack, expected: u64) -> Result<usize, ipi::Unanswered> {
        let matching = AtomicUsize::new(0);
        let probe = || {
            if stack.read_word(0) == expected {
                matching.fetch_add(1, Ordering::Relaxed);
            }
        };
        ipi::call_on(&smp::online(), &probe)?;
        Ok(matching.into_inner())
    }

    /// Every CPU caches the translation of a stack page; the stack is freed
    /// and purged; a new stack in the same slot gets other frames. Had a
    /// CPU missed the kernel-range flush, it would still read the old frame
    /// (with `tlb.bug=no-flush-ipis`, the remote ones do).
    fn freed_stack_is_flushed_everywhere_before_reuse() -> TestResult {
        let online = smp::online().count();
        purge(tlb::flush_kernel_range);
        let mut old = require_ok!(KernelStack::allocate());
        old.words_mut()[0] = OLD;
        check_eq!(
            require_ok!(cpus_reading(&old, OLD)),
            online,
            "before the free"
        );
        let (slot, old_frame) = (old.slot, old.frames[0].address());
        drop(old);
        check_eq!(
            purge(tlb::flush_kernel_range),
            1,
            "one freed stack to purge"
        );

        // The allocator would hand the freed frames straight back; keep
        // them busy so that the new stack gets different ones.
        let held: Vec<_> = (0..STACK_PAGES)
            .map_while(|_| frames::allocate_stack_frame())
            .collect();
        let new = KernelStack::allocate();
        held.into_iter().for_each(frames::free_stack_frame);
        let mut new = require_ok!(new);
        check_eq!(new.slot, slot, "the purged slot is reused first");
        check!(
            new.frames[0].address() != old_frame,
            "setup: the new stack got the old frame {old_frame:?}, so a stale \
             translation would be invisible"
        );
        new.words_mut()[0] = NEW;
        let fresh = require_ok!(cpus_reading(&new, NEW));
        check_eq!(
            fresh,
            online,
            "{} of {online} CPUs (this is CPU {}) still read through the freed \
             stack's old translation",
            online - fresh,
            percpu::current().index
        );
        Ok(())
    }
}
