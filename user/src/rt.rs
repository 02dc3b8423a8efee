//! The run-time glue: from the stack the kernel builds to the program's
//! `main`, and from a panic to `exit(101)`.

use core::panic::PanicInfo;

use crate::{println, sys};

/// The exit code of a program that panicked (as Rust's `std` uses).
pub const PANIC_EXIT_CODE: i32 = 101;

/// Runs `main` with the program's arguments and exits with its result.
/// [`entry!`](crate::entry) calls this from `_start` with the stack pointer
/// the program started with.
///
/// The kernel starts a program as Linux does: `argc`, then the `argv`
/// pointers, at the stack pointer (see `abi::auxv`). The programs here take
/// their arguments as one string of words separated by spaces, so the
/// strings `argv[1]` to `argv[argc - 1]`, which lie one after another, each
/// with its NUL, become that string in place: each NUL between two of them
/// turns into a space.
///
/// # Safety
///
/// `stack` must be the stack pointer the program started with, as the
/// kernel (or Linux) builds it, and nothing else may use the argument
/// strings.
pub unsafe fn start(stack: *const u64, main: fn(&str) -> i32) -> ! {
    // SAFETY: the caller passes the start-up stack: `argc`, then `argc`
    // pointers to NUL-terminated strings.
    let args = unsafe { joined_arguments(stack) };
    let args = match core::str::from_utf8(args) {
        Ok(args) => args,
        Err(error) => panic!("the program arguments are not UTF-8: {error}"),
    };
    sys::exit(main(args))
}

/// `argv[1..]` as one byte string, words separated by spaces.
///
/// # Safety
///
/// As for [`start`].
unsafe fn joined_arguments(stack: *const u64) -> &'static [u8] {
    // SAFETY: `argc` is the first word of the start-up stack.
    let argc = unsafe { stack.read() } as usize;
    if argc < 2 {
        return &[];
    }
    // SAFETY: the `argv` pointers follow `argc`.
    let argv = |index: usize| unsafe { stack.add(1 + index).read() } as *mut u8;
    let first = argv(1);
    let mut end = first;
    for index in 1..argc {
        let word = argv(index);
        assert!(
            word == end || index == 1,
            "the argument strings do not follow one another"
        );
        // SAFETY: each argument is NUL-terminated, inside the stack the
        // kernel mapped.
        let len = unsafe { core::ffi::CStr::from_ptr(word.cast()) }.count_bytes();
        // SAFETY: `word + len` is the argument's NUL, one byte past it the
        // next argument (checked on the next round) or the end.
        end = unsafe { word.add(len + 1) };
        if index + 1 < argc {
            // SAFETY: this NUL lies between two arguments, in writable stack
            // memory that only this function uses.
            unsafe { word.add(len).write(b' ') };
        }
    }
    let len = end as usize - first as usize - 1;
    // SAFETY: `first..first + len` are the argument bytes just joined,
    // which live as long as the process and nothing else changes.
    unsafe { core::slice::from_raw_parts(first, len) }
}

/// A panic prints its message and location and ends the whole process.
#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    println!("panic: {info}");
    sys::exit(PANIC_EXIT_CODE)
}
