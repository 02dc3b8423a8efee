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
//! As Linux starts one: the kernel loads the program's ELF segments at
//! their fixed addresses (the image starts at [`abi::USER_IMAGE_BASE`]) and
//! starts its first thread at the ELF entry point, `_start`, which
//! [`entry!`] defines, with the stack pointer at `argc`, the `argv` and
//! `envp` pointers and the auxiliary vector (see [`abi::auxv`]). `_start`
//! hands that stack pointer to [`rt::start`], which makes the arguments one
//! string and calls `main`; `_start` never returns, it ends the process with
//! `exit_group`. More threads start with `clone` ([`thread`]).
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
//! storage, no heap. (The kernel does keep each thread's SSE registers and
//! FS base, for C programs built for Linux.)

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
        /// The first instruction of the program: the stack pointer is at
        /// `argc` (16-byte aligned); the call hands it to `start_main` and
        /// leaves the stack as a function entry expects it.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        extern "C" fn _start() -> ! {
            core::arch::naked_asm!(
                "mov rdi, rsp",
                "call {start_main}",
                "ud2",
                start_main = sym start_main,
            )
        }

        /// Runs `main` (see `user::rt`).
        extern "C" fn start_main(stack: *const u64) -> ! {
            // SAFETY: `_start` passes the stack pointer the program
            // started with.
            unsafe { $crate::rt::start(stack, $main) }
        }
    };
}
