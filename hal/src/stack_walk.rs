//! Walking the chain of saved frame pointers, for backtraces.
//!
//! The kernel is built with frame pointers (`-C force-frame-pointers=yes`,
//! see `.cargo/config.toml`; the precompiled `core` and `alloc` keep them
//! too). Every function starts with `push rbp; mov rbp, rsp`, so RBP points
//! at a two-word record: the caller's RBP, then the return address into the
//! caller. Following the records from the current RBP lists the calls that
//! led here.
//!
//! The walk runs while the kernel reports a crash, when the stack may be
//! the very thing that is broken, so it must never fault: it stops at a
//! frame pointer that is zero or saves a zero (a thread's first frame:
//! threads start with RBP = 0), misaligned, outside the kernel half, not
//! mapped (checked through the page tables before each read), or not above
//! the previous one (stacks grow down, so callers' frames are always
//! higher), and after [`MAX_FRAMES`].

use core::arch::asm;

use x86_64::VirtAddr;

use crate::paging::translate;

/// The deepest walk; a runaway recursion is shown by its first frames.
pub const MAX_FRAMES: usize = 24;

/// Frames further apart than this are not on one stack.
const MAX_FRAME_DISTANCE: u64 = 1 << 20;

/// Why a walk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkEnd {
    /// RBP was 0: the outermost frame of a thread.
    Outermost,
    /// [`MAX_FRAMES`] frames were shown.
    TooDeep,
    /// The next frame pointer was not a plausible kernel stack address.
    BadFramePointer(u64),
}

/// This function's caller's instruction pointer and frame pointer: where
/// a backtrace of the current call chain starts.
#[inline(never)]
pub fn here() -> (u64, u64) {
    let frame: u64;
    // Reads RBP, which (frame pointers being forced) points at this
    // function's own record; nothing is written.
    // SAFETY: a register read with no side effects.
    unsafe { asm!("mov {}, rbp", out(reg) frame, options(nomem, nostack, preserves_flags)) };
    match read_record(frame) {
        Some((caller_frame, return_address)) => (return_address, caller_frame),
        None => (0, 0),
    }
}

/// Calls `visit` with the return address of every frame on the chain that
/// starts at frame pointer `frame`, innermost first; says why it stopped.
pub fn walk(mut frame: u64, mut visit: impl FnMut(u64)) -> WalkEnd {
    for _ in 0..MAX_FRAMES {
        if frame == 0 {
            return WalkEnd::Outermost;
        }
        let Some((caller_frame, return_address)) = read_record(frame) else {
            return WalkEnd::BadFramePointer(frame);
        };
        // A saved RBP of 0 marks a thread's first function, which was
        // entered by a jump, not called: its "return address" is whatever
        // lay on the new stack.
        if caller_frame == 0 || return_address == 0 {
            return WalkEnd::Outermost;
        }
        visit(return_address);
        if caller_frame <= frame || caller_frame - frame > MAX_FRAME_DISTANCE {
            return WalkEnd::BadFramePointer(caller_frame);
        }
        frame = caller_frame;
    }
    WalkEnd::TooDeep
}

/// The two words at `frame` (saved RBP, return address), if `frame` is a
/// 16-byte record in mapped kernel memory.
fn read_record(frame: u64) -> Option<(u64, u64)> {
    Some((read_word(frame)?, read_word(frame.checked_add(8)?)?))
}

/// The word at `address`, if it is an 8-byte aligned, mapped kernel-half
/// address; never faults.
pub fn read_word(address: u64) -> Option<u64> {
    if address < crate::paging::UPPER_HALF_START || !address.is_multiple_of(8) {
        return None;
    }
    // An aligned word never straddles a page.
    translate(VirtAddr::try_new(address).ok()?)?;
    // `address` is 8-byte aligned and mapped in the active page tables
    // (checked just above), so the read cannot fault. It is a volatile
    // read of a plain integer from kernel memory (a stack), which its owner
    // may be changing (another CPU's, in an NMI report): any bit pattern is
    // a valid `u64`, and a torn or stale value only ends a walk early.
    // SAFETY: an aligned read of mapped memory, any value acceptable.
    Some(unsafe { core::ptr::read_volatile(address as *const u64) })
}
