//! The auxiliary vector: what the kernel tells a new program about itself
//! and the machine, as `(type, value)` pairs after the environment on its
//! first stack (Linux's `AT_*` types, `elf.h`).
//!
//! ```text
//!   rsp ->  argc
//!           argv[0] .. argv[argc-1], NULL
//!           envp[0] .. , NULL
//!           (AT_PHDR, addr) (AT_PHNUM, n) ... (AT_NULL, 0)
//!           ... the strings and AT_RANDOM's 16 bytes, higher up
//! ```
//!
//! A static C library reads `AT_PHDR`/`AT_PHNUM` to find its thread-local
//! storage template, `AT_RANDOM` to seed its stack protector, `AT_PAGESZ`
//! for the page size.

/// The end of the vector.
pub const NULL: u64 = 0;
/// Where the program headers are in memory.
pub const PHDR: u64 = 3;
/// The size of one program header.
pub const PHENT: u64 = 4;
/// How many program headers there are.
pub const PHNUM: u64 = 5;
/// The page size.
pub const PAGESZ: u64 = 6;
/// The interpreter's base (0: there is none, the program is static).
pub const BASE: u64 = 7;
/// Flags (none).
pub const FLAGS: u64 = 8;
/// The program's entry point.
pub const ENTRY: u64 = 9;
/// Real, effective user and group ids (all 0).
pub const UID: u64 = 11;
pub const EUID: u64 = 12;
pub const GID: u64 = 13;
pub const EGID: u64 = 14;
/// The address of a string naming the platform ("x86_64").
pub const PLATFORM: u64 = 15;
/// CPUID leaf 1's EDX, the features a libc may check.
pub const HWCAP: u64 = 16;
/// Clock ticks per second of `times()`.
pub const CLKTCK: u64 = 17;
/// Whether the program runs with raised privileges (never).
pub const SECURE: u64 = 23;
/// The address of 16 random bytes.
pub const RANDOM: u64 = 25;
/// The address of the program's name.
pub const EXECFN: u64 = 31;
