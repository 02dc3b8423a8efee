//! The kernel's own shootdown, observed: a freed stack's address,
//! mapped anew, must read the new memory on every CPU.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::{check, check_eq, framework::TestResult, require_ok};
use kernel::{smp, tlb};
use hal::{
    frames, ipi,
    kernel_stack::{KernelStack, STACK_PAGES, purge},
    percpu,
};

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
    smp::call_on(&smp::online(), &probe)?;
    Ok(matching.into_inner())
}

/// Every CPU caches the translation of a stack page; the stack is freed
/// and purged; a new stack in the same slot gets other frames. Had a
/// CPU missed the kernel-range flush, it would still read the old frame
/// (with `tlb.bug=no-flush-ipis`, the remote ones do).
pub fn freed_stack_is_flushed_everywhere_before_reuse() -> TestResult {
    let online = smp::online().count();
    purge(tlb::flush_kernel_range);
    let mut old = require_ok!(KernelStack::allocate());
    old.words_mut()[0] = OLD;
    check_eq!(
        require_ok!(cpus_reading(&old, OLD)),
        online,
        "before the free"
    );
    let (slot, old_frame) = (old.slot(), old.first_frame());
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
    check_eq!(new.slot(), slot, "the purged slot is reused first");
    check!(
        new.first_frame() != old_frame,
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
