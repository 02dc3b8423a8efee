//! `print!` and `println!` on the kernel console.
//!
//! Each `print!` formats into a buffer on the stack and hands it to the
//! kernel in as few `write` calls as possible (one, for anything up to
//! `LINE_BUFFER` bytes), so the lines of threads printing at the same time
//! come out whole instead of interleaved word by word.

use core::fmt::{self, Write};

use abi::Syscall;

use crate::raw::syscall3;

/// Bytes collected before a `write`; longer output goes out in pieces.
const LINE_BUFFER: usize = 256;

/// Collects formatted output and writes it out when full or dropped.
struct Buffered {
    bytes: [u8; LINE_BUFFER],
    len: usize,
}

impl Buffered {
    fn flush(&mut self) {
        let pending = &self.bytes[..self.len];
        // Console output cannot be reported anywhere if it fails, and the
        // panic handler prints through here too: errors are ignored on
        // purpose (no `Result` conversion that could itself panic).
        // SAFETY: the kernel only reads the buffer, which we own.
        unsafe {
            syscall3(
                Syscall::Write as u64,
                crate::sys::STDOUT,
                pending.as_ptr() as u64,
                pending.len() as u64,
            )
        };
        self.len = 0;
    }
}

impl Write for Buffered {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        for &byte in text.as_bytes() {
            if self.len == LINE_BUFFER {
                self.flush();
            }
            self.bytes[self.len] = byte;
            self.len += 1;
        }
        Ok(())
    }
}

/// Prints formatted text; what [`print!`](crate::print) expands to.
pub fn print(args: fmt::Arguments<'_>) {
    let mut out = Buffered {
        bytes: [0; LINE_BUFFER],
        len: 0,
    };
    // `Buffered::write_str` never fails; a formatting trait that does is
    // a bug in that trait and shows as truncated output.
    let _ = out.write_fmt(args);
    out.flush();
}

/// Prints to the console, like `std::print!`.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::print(format_args!($($arg)*)) };
}

/// Prints to the console with a newline, like `std::println!`.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::console::print(format_args!("{}\n", format_args!($($arg)*))) };
}
