//! Tests of the test harness itself.
//!
//! Each of these misbehaves on purpose, so each runs only when named exactly
//! on the command line. The host integration tests boot them one by one and
//! check that the failure is reported: a failed check, a panic, a CPU
//! exception (a page fault, a stack overflow, a read that SMAP refuses), and
//! a hang (caught by the host's timeout).

use abi::{PAGE_SIZE, prot};

use super::{Test, TestResult};
use crate::{check_eq, require_ok, task::vm::AddressSpace, tlb};

pub const TESTS: &[Test] = &[
    Test::explicit("harness::fails", fails),
    Test::explicit("harness::panics", panics),
    Test::explicit("harness::page_fault", page_fault),
    Test::explicit("harness::stack_overflow", stack_overflow),
    Test::explicit("harness::smap_violation", smap_violation),
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

/// Reads a present user page directly, as a kernel that trusted a user
/// pointer would: the bug SMAP exists to catch, and the report must say so.
fn smap_violation() -> TestResult {
    const USER_PAGE: u64 = 0x5000_0000;
    let kernel_root = x86_64::PhysAddr::new(tlb::system().kernel_address_space().root());
    let space = require_ok!(AddressSpace::new(kernel_root).map_err(|_| "out of frames"));
    require_ok!(
        space
            .load_region(USER_PAGE, PAGE_SIZE, prot::READ, &[42])
            .map_err(|errno| alloc::format!("{errno:?}"))
    );
    crate::arch::cpu::disable_interrupts();
    tlb::switch_to(&space.tlb);
    let value = crate::arch::cpu::read_to_fault(USER_PAGE);
    panic!("the kernel read {value:#x} from user page {USER_PAGE:#x}: SMAP did not stop it");
}

fn hangs() -> TestResult {
    loop {
        core::hint::spin_loop();
    }
}
