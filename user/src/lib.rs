//! The tiny user library: what a ring-3 program of this kernel links with.
//!
//! Programs are `#![no_std]` and `#![no_main]` binaries in `src/bin/`. They
//! reach the kernel only through the `syscall` instruction ([`raw`]); the
//! typed wrappers in [`sys`] turn its return value into
//! `Result<_, abi::Errno>`. On top of those: [`print!`]/[`println!`] on the
//! console, [`thread::spawn`] for more threads, and the glue ([`entry!`])
//! that starts a program and ends it with its exit code. For the TLB
//! workloads: [`tlb_stats`] (the kernel's counters), [`helpers`] (threads
//! that keep the address space on other CPUs) and [`ratio`] (per-iteration
//! numbers without floating point).
//!
//! # How the kernel starts a program
//!
//! The kernel loads the program's ELF segments at their fixed addresses (the
//! image starts at [`abi::USER_IMAGE_BASE`]) and starts its first thread at
//! the ELF entry point, `_start`, which [`entry!`] defines, with:
//!
//! - `rdi`: address of the argument bytes (UTF-8, words separated by
//!   spaces), which the kernel copied into the process's memory;
//! - `rsi`: their length in bytes (may be 0, then `rdi` means nothing);
//! - `rsp`: the top of a kernel-provided stack, 16-byte aligned minus 8, as
//!   right after a `call`: `_start` is an ordinary `extern "C"` function
//!   whose return address slot is simply never used.
//!
//! `_start` must never return: it ends the process with `exit`. A thread
//! started by `thread_spawn(entry, stack_top, arg)` starts at `entry` with
//! `rdi = arg` and `rsp = stack_top - 8` (so `stack_top` is 16-byte aligned
//! and the entry sees a call-aligned stack); it must never return either, it
//! ends with `thread_exit` ([`thread`] arranges both).
//!
//! # System-call convention
//!
//! See the `abi` crate: number in `rax`, arguments in `rdi`, `rsi`, `rdx`,
//! `r10`, `r8`, `r9`, result in `rax` (`>= 0` success, negative: `-errno`),
//! `rcx` and `r11` clobbered.
//!
//! # Build
//!
//! Programs are static, non-PIE executables linked at
//! [`abi::USER_IMAGE_BASE`] (see `build.rs` and `link.ld`), built for the
//! soft-float `x86_64-unknown-none` target: no SSE state, no thread-local
//! storage, no heap.

#![no_std]
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

pub mod console;
pub mod helpers;
pub mod random;
pub mod ratio;
pub mod raw;
pub mod rt;
pub mod sys;
pub mod thread;
pub mod tlb_stats;

pub use abi::{self, Errno};

/// Defines the program's entry point, `_start`, which calls `$main` with the
/// program's arguments and exits with the code it returns:
///
/// ```ignore
/// #![no_std]
/// #![no_main]
///
/// user::entry!(main);
///
/// fn main(args: &str) -> i32 {
///     user::println!("hello, {args}");
///     0
/// }
/// ```
#[macro_export]
macro_rules! entry {
    ($main:path) => {
        /// The first instruction of the program (see the `user` crate's
        /// documentation for the registers the kernel sets up).
        #[unsafe(no_mangle)]
        extern "C" fn _start(args: *const u8, len: usize) -> ! {
            // The kernel starts every program this way (see `user::rt`).
            // SAFETY: `args` and `len` are the kernel's argument block.
            unsafe { $crate::rt::start(args, len, $main) }
        }
    };
}
