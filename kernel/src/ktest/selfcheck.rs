//! Tests of the test harness itself.
//!
//! Each of these misbehaves on purpose, so each runs only when named exactly
//! on the command line. The host integration tests boot them one by one and
//! check that the failure is reported: a failed check, a panic, a CPU
//! exception, and a hang (caught by the host's timeout).

use super::{Test, TestResult};
use crate::check_eq;

pub const TESTS: &[Test] = &[
    Test::explicit("harness::fails", fails),
    Test::explicit("harness::panics", panics),
    Test::explicit("harness::page_fault", page_fault),
    Test::explicit("harness::stack_overflow", stack_overflow),
    Test::explicit("harness::hangs", hangs),
];

fn fails() -> TestResult {
    let two = core::hint::black_box(2);
    check_eq!(two + 2, 5, "arithmetic is broken on purpose");
    Ok(())
}

fn panics() -> TestResult {
    let divisor = core::hint::black_box(0);
    panic!("deliberate panic in a test (divisor {divisor})");
}

/// A canonical lower-half address that nothing maps: the kernel asks the
/// bootloader to put everything it maps in the upper half (see `main.rs`).
const UNMAPPED_ADDRESS: u64 = 0x0000_0dea_d000_0000;

fn page_fault() -> TestResult {
    let value = crate::arch::cpu::read_to_fault(UNMAPPED_ADDRESS);
    panic!(
        "reading unmapped address {UNMAPPED_ADDRESS:#x} returned {value:#x} instead of faulting"
    );
}

/// Recurses until the kernel stack runs into its unmapped guard page. The
/// page fault cannot push its frame on the overflowed stack, so the CPU
/// raises a double fault, which runs on its own stack and reports.
fn stack_overflow() -> TestResult {
    #[expect(unconditional_recursion, reason = "overflowing the stack is the point")]
    fn recurse(depth: u64) -> u64 {
        let frame = core::hint::black_box([depth; 64]);
        recurse(depth + 1) + frame[0]
    }
    let depth = recurse(0);
    panic!("recursion to depth {depth} returned instead of overflowing the stack");
}

fn hangs() -> TestResult {
    loop {
        core::hint::spin_loop();
    }
}
