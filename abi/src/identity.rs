//! What a program may ask about the system it runs on: `uname`'s
//! strings, `prlimit64`'s limits, `getrandom`'s flags.

/// Each of `struct utsname`'s six fields is this many bytes, NUL-padded.
pub const UTSNAME_FIELD: usize = 65;
/// `sizeof(struct utsname)`.
pub const UTSNAME_SIZE: usize = 6 * UTSNAME_FIELD;

/// `uname`'s answers, in field order: system, node, release, version,
/// machine, domain. The system is named "Linux" because the calls are
/// Linux's; the release is one that a libc's minimum-kernel check accepts
/// (the system calls offered are those of Linux 6.17 a libc needs), and the
/// version says which kernel this really is.
pub const UTSNAME: [&str; 6] = [
    "Linux",
    "shootdown",
    "6.17.0-shootdown",
    "#1 SMP shootdown teaching kernel",
    "x86_64",
    "(none)",
];

/// `prlimit64` resources (`asm-generic/resource.h`) and values.
pub mod rlimit {
    /// The stack's size limit.
    pub const STACK: u64 = 3;
    /// The number of resources Linux defines (0..16).
    pub const COUNT: u64 = 16;
    /// "No limit".
    pub const INFINITY: u64 = u64::MAX;
    /// `sizeof(struct rlimit64)`: current and maximum, each `u64`.
    pub const SIZE: usize = 16;
}

/// `getrandom` flags: `GRND_NONBLOCK`, `GRND_RANDOM`, `GRND_INSECURE`
/// (the generator never blocks, so each is accepted and changes nothing).
pub const GETRANDOM_FLAGS: u64 = 0x7;
