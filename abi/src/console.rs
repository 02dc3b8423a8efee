//! The console as a file: the descriptors that name it, what `fstat` says
//! of it, and the terminal `ioctl`s it answers.
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

/// `fstat` of the console: a character device (the first serial port's
/// numbers, 4:64), written where the fields of x86-64's `struct stat` are.
pub mod stat {
    /// `sizeof(struct stat)` on x86-64.
    pub const SIZE: usize = 144;
    /// `st_mode`: a character device, read-write for its owner, writable
    /// for its group (`S_IFCHR | 0620`), at byte 24.
    pub const MODE: u32 = 0o020_620;
    pub const MODE_OFFSET: usize = 24;
    /// `st_nlink`, at byte 16.
    pub const NLINK_OFFSET: usize = 16;
    /// `st_rdev`: major 4, minor 64 in Linux's encoding, at byte 40.
    pub const RDEV: u64 = (4 << 8) | 64;
    pub const RDEV_OFFSET: usize = 40;
    /// `st_blksize`: the preferred write size, at byte 56.
    pub const BLKSIZE: u64 = 1024;
    pub const BLKSIZE_OFFSET: usize = 56;
}

/// `newfstatat`'s flag: the path is empty, and `dirfd` is the file.
pub const AT_EMPTY_PATH: u64 = 0x1000;
