//! The run-time glue: from the kernel's entry registers to the program's
//! `main`, and from a panic to `exit(101)`.

use core::panic::PanicInfo;

use crate::{println, sys};

/// The exit code of a program that panicked (as Rust's `std` uses).
pub const PANIC_EXIT_CODE: i32 = 101;

/// Runs `main` with the program's arguments and exits with its result.
/// [`entry!`](crate::entry) calls this from `_start`.
///
/// # Safety
///
/// Unless `len` is 0, `args` must point to `len` readable bytes that stay
/// mapped and unchanged for the life of the process: the argument block the
/// kernel copies into every new process.
pub unsafe fn start(args: *const u8, len: usize, main: fn(&str) -> i32) -> ! {
    let bytes: &[u8] = if len == 0 {
        // With no arguments the pointer may be anything, even null.
        &[]
    } else {
        // SAFETY: the caller guarantees `len` readable, unchanging bytes.
        unsafe { core::slice::from_raw_parts(args, len) }
    };
    let args = match core::str::from_utf8(bytes) {
        Ok(args) => args,
        Err(error) => panic!("the program arguments are not UTF-8: {error}"),
    };
    sys::exit(main(args))
}

/// A panic prints its message and location and ends the whole process.
#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    println!("panic: {info}");
    sys::exit(PANIC_EXIT_CODE)
}
