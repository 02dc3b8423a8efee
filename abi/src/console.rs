//! The console as a file: the descriptors that name it, and the terminal
//! `ioctl`s it answers.
//!
//! A C library asks whether standard output is a terminal (`TCGETS` for
//! glibc's `isatty`, `TIOCGWINSZ` for musl's) to choose line buffering.
//! The console is the serial terminal, so it answers as one.

/// The file descriptors `write` accepts: standard output and error, both
/// the console.
pub const CONSOLE_FDS: [u64; 2] = [1, 2];

/// `ioctl(TCGETS)`: the terminal's settings, a `struct termios` of
/// [`TERMIOS_SIZE`] bytes.
pub const TCGETS: u64 = 0x5401;
/// `ioctl(TIOCGWINSZ)`: the window size, a `struct winsize` of
/// [`WINSIZE_SIZE`] bytes (rows, columns, two pixel sizes, each `u16`).
pub const TIOCGWINSZ: u64 = 0x5413;
/// `sizeof(struct termios)` as the kernel's `ioctl` stores it.
pub const TERMIOS_SIZE: usize = 36;
/// `sizeof(struct winsize)`.
pub const WINSIZE_SIZE: usize = 8;
/// `sizeof(struct iovec)`: a pointer and a length.
pub const IOVEC_SIZE: usize = 16;
/// The most `struct iovec`s one `writev` takes (Linux's `UIO_MAXIOV`).
pub const MAX_IOVECS: u64 = 1024;
