//! Tests of the test harness itself.
//!
//! Each of these misbehaves on purpose, so each runs only when named exactly
//! on the command line. The host integration tests boot them one by one and
//! check that the failure is reported: a failed check, a panic, a CPU
//! exception (a page fault, a stack overflow, a read that SMAP refuses), a
//! CPU that stops answering TLB shootdowns, and a hang (caught by the host's
//! timeout).

use core::{
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use abi::{PAGE_SIZE, Prot};
use spin::Once;

use crate::framework::TestResult;
use crate::{check, check_eq, require_ok};
use kernel::{smp, task::{sched, thread::Thread, vm::{AddressSpace, Placement, Sharing}}, tlb};
use hal::context::ThreadStart;
use hal::time::Deadline;

pub fn fails() -> TestResult {
    let two = core::hint::black_box(2);
    check_eq!(two + 2, 5, "arithmetic is broken on purpose");
    Ok(())
}

pub fn panics() -> TestResult {
    let divisor = core::hint::black_box(0);
    panic!("deliberate panic in a test (divisor {divisor})");
}

/// A canonical lower-half address that nothing maps: the kernel asks the
/// bootloader to put everything it maps in the upper half (see `main.rs`).
const UNMAPPED_ADDRESS: u64 = 0x0000_0dea_d000_0000;

pub fn page_fault() -> TestResult {
    let value = hal::cpu::read_to_fault(UNMAPPED_ADDRESS);
    panic!(
        "reading unmapped address {UNMAPPED_ADDRESS:#x} returned {value:#x} instead of faulting"
    );
}

/// Recurses until the kernel stack runs into its unmapped guard page. The
/// page fault cannot push its frame on the overflowed stack, so the CPU
/// raises a double fault, which runs on its own stack and reports.
pub fn stack_overflow() -> TestResult {
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
pub fn smap_violation() -> TestResult {
    const USER_PAGE: u64 = 0x5000_0000;
    let kernel_root = tlb::system().kernel_address_space().root();
    let space = require_ok!(AddressSpace::new(kernel_root).map_err(|_| "out of frames"));
    require_ok!(
        space
            .load_region(USER_PAGE, PAGE_SIZE, Prot::READ, &[42])
            .map_err(|errno| alloc::format!("{errno:?}"))
    );
    hal::cpu::disable_interrupts();
    tlb::switch_to(&space.tlb);
    let value = hal::cpu::read_to_fault(USER_PAGE);
    panic!("the kernel read {value:#x} from user page {USER_PAGE:#x}: SMAP did not stop it");
}

/// The address space CPU 1 sits in for [`stuck_cpu`].
static STUCK_SPACE: Once<AddressSpace> = Once::new();

static STUCK_SPACE_LOADED: AtomicBool = AtomicBool::new(false);

/// CPU 1 loads an address space and spins with interrupts off; this CPU
/// unmaps a page of it. The shootdown IPI is never answered: the kernel must
/// name CPU 1 (which an NMI makes say where it spins) and stop, not hang.
pub fn stuck_cpu() -> TestResult {
    const PAGE: u64 = 0x6000_0000;
    check!(smp::online().count() >= 2, "needs a second CPU");
    let kernel_root = tlb::system().kernel_address_space().root();
    let space = STUCK_SPACE
        .call_once(|| AddressSpace::new(kernel_root).expect("a page-table root for the test"));
    require_ok!(
        space
            .map_anonymous(PAGE, PAGE_SIZE, Prot::READ | Prot::WRITE, Placement::Fixed, Sharing::Private)
            .and_then(|_| space.copy_out(PAGE, &[1]))
            .map_err(|errno| alloc::format!("{errno:?}"))
    );
    let spinner = Thread::new_kernel(ThreadStart::Kernel {
        entry: spin_with_interrupts_off,
        argument: 0,
    });
    spinner.set_affinity(1);
    sched::spawn(spinner);
    let deadline = Deadline::after(Duration::from_secs(10));
    while !STUCK_SPACE_LOADED.load(Ordering::Acquire) {
        check!(
            !deadline.has_passed(),
            "CPU 1 never loaded the address space"
        );
        core::hint::spin_loop();
    }
    require_ok!(
        space
            .unmap(PAGE, PAGE_SIZE)
            .map_err(|errno| alloc::format!("{errno:?}"))
    );
    panic!("a TLB shootdown to a CPU with interrupts off returned");
}

/// Runs on CPU 1 for [`stuck_cpu`]: loads the test's address space, then
/// never answers an interrupt again.
extern "C" fn spin_with_interrupts_off(_: u64) -> ! {
    hal::cpu::disable_interrupts();
    tlb::switch_to(
        &STUCK_SPACE
            .get()
            .expect("set before this thread starts")
            .tlb,
    );
    STUCK_SPACE_LOADED.store(true, Ordering::Release);
    loop {
        core::hint::spin_loop();
    }
}

pub fn hangs() -> TestResult {
    loop {
        core::hint::spin_loop();
    }
}
