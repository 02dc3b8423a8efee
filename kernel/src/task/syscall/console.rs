//! The console, the only file: `write`, `writev`, `fstat`, the terminal
//! `ioctl`s, and the calls that name paths (`openat`, `newfstatat`,
//! `readlink`), which find no file.

use alloc::vec::Vec;
use core::fmt::Write as _;

use abi::{Errno, console};

use super::SyscallResult;
use crate::task::vm::AddressSpace;

/// The longest single `write` (or `writev`, all its buffers together).
const MAX_WRITE: u64 = 64 * 1024;

/// Shows bytes as UTF-8, each invalid sequence as U+FFFD, without the
/// allocation `String::from_utf8_lossy` makes for invalid input (up to three
/// times the input: a cost a program could choose).
struct Lossy<'a>(&'a [u8]);

impl core::fmt::Display for Lossy<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_char(char::REPLACEMENT_CHARACTER)?;
            }
        }
        Ok(())
    }
}

/// `write(fd, buffer, len)` to the console (standard output and standard
/// error). Like Linux, a long write is a short write.
pub(super) fn write(space: &AddressSpace, fd: u64, buffer: u64, len: u64) -> SyscallResult {
    check_console(fd)?;
    let len = len.min(MAX_WRITE);
    let bytes = space.copy_in(buffer, len as usize)?;
    hal::print!("{}", Lossy(&bytes));
    Ok(len)
}

/// `writev(fd, iov, count)`: the `count` buffers the `struct iovec`s at
/// `iov` name, in order, as one write (so no other output comes between
/// them). A bad pointer anywhere fails the whole call before anything is
/// printed.
pub(super) fn writev(space: &AddressSpace, fd: u64, iov: u64, count: u64) -> SyscallResult {
    check_console(fd)?;
    if count > console::MAX_IOVECS {
        return Err(Errno::Inval);
    }
    let vectors = space.copy_in(iov, count as usize * console::IOVEC_SIZE)?;
    let mut bytes = Vec::new();
    for vector in vectors.as_chunks::<{ console::IOVEC_SIZE }>().0 {
        let (base, len) = vector.split_at(8);
        let base = u64::from_le_bytes(base.try_into().map_err(|_| Errno::Fault)?);
        let len = u64::from_le_bytes(len.try_into().map_err(|_| Errno::Fault)?);
        if len > i64::MAX as u64 {
            return Err(Errno::Inval);
        }
        let room = MAX_WRITE - bytes.len() as u64;
        bytes.extend(space.copy_in(base, len.min(room) as usize)?);
    }
    hal::print!("{}", Lossy(&bytes));
    Ok(bytes.len() as u64)
}

/// `ioctl(fd, request, arg)`: the console is a terminal of 24 rows and 80
/// columns, in the settings a serial console starts with; it answers the
/// two questions a C library asks to choose its buffering.
pub(super) fn ioctl(space: &AddressSpace, fd: u64, request: u64, arg: u64) -> SyscallResult {
    /// `struct termios`: input `ICRNL | IXON`, output `OPOST | ONLCR`,
    /// control `B115200 | CS8 | CREAD | CLOCAL`, local `ISIG | ICANON |
    /// ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE | IEXTEN`; no control chars.
    const TERMIOS_FLAGS: [u32; 4] = [0x0500, 0x0005, 0x18b2, 0x8a3b];
    /// `struct winsize`: 24 rows, 80 columns, no pixel sizes.
    const WINDOW: [u16; 4] = [24, 80, 0, 0];
    check_console(fd)?;
    match request {
        console::TCGETS => {
            let mut termios = [0u8; console::TERMIOS_SIZE];
            for (field, flags) in termios.as_chunks_mut::<4>().0.iter_mut().zip(TERMIOS_FLAGS) {
                field.copy_from_slice(&flags.to_le_bytes());
            }
            space.copy_out(arg, &termios)?;
        }
        console::TIOCGWINSZ => {
            let window: Vec<u8> = WINDOW
                .iter()
                .flat_map(|value| value.to_le_bytes())
                .collect();
            space.copy_out(arg, &window)?;
        }
        _ => return Err(Errno::NoTty),
    }
    Ok(0)
}

/// `openat(dirfd, path, flags, mode)`, `readlink(path, ...)`: there is no
/// file system, so no path names a file; a path the caller cannot read is
/// still `EFAULT`.
pub(super) fn no_such_path(space: &AddressSpace, path: u64) -> SyscallResult {
    space.copy_in(path, 1)?;
    Err(Errno::NoEnt)
}

/// `fstat(fd, buffer)`: the console is a character device.
pub(super) fn fstat(space: &AddressSpace, fd: u64, buffer: u64) -> SyscallResult {
    use console::stat;
    check_console(fd)?;
    let mut bytes = [0u8; stat::SIZE];
    let mut put = |offset: usize, value: &[u8]| {
        bytes[offset..offset + value.len()].copy_from_slice(value);
    };
    put(stat::NLINK_OFFSET, &1u64.to_le_bytes());
    put(stat::MODE_OFFSET, &stat::MODE.to_le_bytes());
    put(stat::RDEV_OFFSET, &stat::RDEV.to_le_bytes());
    put(stat::BLKSIZE_OFFSET, &stat::BLKSIZE.to_le_bytes());
    space.copy_out(buffer, &bytes)?;
    Ok(0)
}

/// `newfstatat(dirfd, path, buffer, flags)`: `fstat` of `dirfd` for an
/// empty path with `AT_EMPTY_PATH` (how a C library calls `fstat` now);
/// any other path names no file.
pub(super) fn newfstatat(
    space: &AddressSpace,
    dirfd: u64,
    path: u64,
    buffer: u64,
    flags: u64,
) -> SyscallResult {
    let first = space.copy_in(path, 1)?;
    if first[0] == 0 && flags & console::AT_EMPTY_PATH != 0 {
        fstat(space, dirfd, buffer)
    } else {
        Err(Errno::NoEnt)
    }
}

fn check_console(fd: u64) -> Result<(), Errno> {
    if console::CONSOLE_FDS.contains(&fd) {
        Ok(())
    } else {
        Err(Errno::BadF)
    }
}
