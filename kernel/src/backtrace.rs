//! Symbolized backtraces for crash reports.
//!
//! A report of a kernel exception or panic ends with the chain of calls that
//! led to it, innermost first, each return address with the function it
//! lies in:
//!
//! ```text
//! backtrace (innermost first):
//!   #0  0xffffffff800b4ab3 hal::cpu::read_to_fault+0x13
//!   #1  0xffffffff800b4ae8 kernel_tests::suites::harness::page_fault+0x18
//!   ...
//!   (end: outermost frame)
//! ```
//!
//! The walk ([`hal::stack_walk`]) and the lookup ([`crate::symbols`])
//! never fault and never allocate, so this is safe to call from any fatal
//! path. A return address points just after its call instruction, which
//! is the caller's last byte when the callee never returns (`_start`
//! calling `kernel_main`); return addresses are therefore looked up one
//! byte earlier, inside the call.

use hal::paging::UPPER_HALF_START;
use hal::{
    serial::write_emergency,
    stack_walk::{self, WalkEnd},
};

use crate::symbols;

/// Prints the backtrace of a context stopped at `rip` with frame pointer
/// `rbp` (from a trap frame, or [`stack_walk::here`]).
pub fn print(rip: u64, rbp: u64) {
    write_emergency(format_args!("backtrace (innermost first):\n"));
    print_frame(0, rip);
    // A recursion shows as one return address again and again: print it
    // once with a count.
    let mut index = 1;
    let mut previous = None;
    let mut repeats = 0;
    let end = stack_walk::walk(rbp, |return_address| {
        if previous == Some(return_address) {
            repeats += 1;
        } else {
            print_repeats(repeats);
            repeats = 0;
            print_frame(index, return_address);
            previous = Some(return_address);
        }
        index += 1;
    });
    print_repeats(repeats);
    match end {
        WalkEnd::Outermost => write_emergency(format_args!("  (end: outermost frame)\n")),
        WalkEnd::TooDeep => write_emergency(format_args!(
            "  (end: {} frames walked, more not)\n",
            stack_walk::MAX_FRAMES
        )),
        WalkEnd::BadFramePointer(frame) if frame < UPPER_HALF_START => {
            write_emergency(format_args!(
                "  (end: frame pointer {frame:#x} is a user address: the kernel was entered from ring 3 here)\n"
            ))
        }
        WalkEnd::BadFramePointer(frame) => write_emergency(format_args!(
            "  (end: frame pointer {frame:#x} is not on a kernel stack)\n"
        )),
    }
}

fn print_repeats(repeats: usize) {
    if repeats > 0 {
        write_emergency(format_args!(
            "  ... the same return address {repeats} more times\n"
        ));
    }
}

fn print_frame(index: usize, address: u64) {
    let symbol = if index == 0 {
        symbols::lookup(address)
    } else {
        symbols::lookup(address.wrapping_sub(1)).map(|symbol| symbols::Symbol {
            offset: symbol.offset + 1,
            ..symbol
        })
    };
    match symbol {
        Some(symbol) => write_emergency(format_args!("  #{index:<2} {address:#018x} {symbol}\n")),
        None => write_emergency(format_args!("  #{index:<2} {address:#018x} ?\n")),
    }
}
