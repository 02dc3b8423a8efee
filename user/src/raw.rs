//! The `syscall` instruction itself, with 0 to 4 arguments, or 6.
//!
//! These return the kernel's raw result: `>= 0` on success, `-errno` on
//! failure. They take the number as a plain `u64` so tests can make calls
//! that do not exist. Everyday code uses the typed wrappers in
//! [`crate::sys`] instead.
//!
//! # Safety
//!
//! Every function here is `unsafe`: a system call can change this process's
//! memory (write into a buffer, unmap or re-protect pages, start a thread at
//! any address), so the caller must make sure the call cannot break what the
//! rest of the program relies on.

use core::arch::asm;

/// A system call without arguments.
///
/// # Safety
///
/// See the [module documentation](self).
pub unsafe fn syscall0(number: u64) -> i64 {
    let result;
    // The instruction itself only clobbers `rcx` and `r11`, declared here.
    // SAFETY: the caller vouches for the effects of the call.
    unsafe {
        asm!("syscall", inlateout("rax") number => result,
             lateout("rcx") _, lateout("r11") _, options(nostack))
    };
    result
}

/// A system call with one argument.
///
/// # Safety
///
/// See the [module documentation](self).
pub unsafe fn syscall1(number: u64, a0: u64) -> i64 {
    let result;
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!("syscall", inlateout("rax") number => result, in("rdi") a0,
             lateout("rcx") _, lateout("r11") _, options(nostack))
    };
    result
}

/// A system call with two arguments.
///
/// # Safety
///
/// See the [module documentation](self).
pub unsafe fn syscall2(number: u64, a0: u64, a1: u64) -> i64 {
    let result;
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!("syscall", inlateout("rax") number => result, in("rdi") a0, in("rsi") a1,
             lateout("rcx") _, lateout("r11") _, options(nostack))
    };
    result
}

/// A system call with three arguments.
///
/// # Safety
///
/// See the [module documentation](self).
pub unsafe fn syscall3(number: u64, a0: u64, a1: u64, a2: u64) -> i64 {
    let result;
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!("syscall", inlateout("rax") number => result,
             in("rdi") a0, in("rsi") a1, in("rdx") a2,
             lateout("rcx") _, lateout("r11") _, options(nostack))
    };
    result
}

/// A system call with four arguments (the fourth goes in `r10`, not `rcx`:
/// the `syscall` instruction overwrites `rcx` with the return address).
///
/// # Safety
///
/// See the [module documentation](self).
pub unsafe fn syscall4(number: u64, a0: u64, a1: u64, a2: u64, a3: u64) -> i64 {
    let result;
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!("syscall", inlateout("rax") number => result,
             in("rdi") a0, in("rsi") a1, in("rdx") a2, in("r10") a3,
             lateout("rcx") _, lateout("r11") _, options(nostack))
    };
    result
}

/// A system call with six arguments (`mmap`'s).
///
/// # Safety
///
/// See the [module documentation](self).
pub unsafe fn syscall6(number: u64, a0: u64, a1: u64, a2: u64, a3: u64, a4: u64, a5: u64) -> i64 {
    let result;
    // SAFETY: as in `syscall0`.
    unsafe {
        asm!("syscall", inlateout("rax") number => result, in("rdi") a0, in("rsi") a1,
             in("rdx") a2, in("r10") a3, in("r8") a4, in("r9") a5,
             lateout("rcx") _, lateout("r11") _, options(nostack))
    };
    result
}
