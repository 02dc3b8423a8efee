//! Proof that SMEP and SMAP are on and work: on every CPU the CR4 bits
//! are set, and on a present, readable, executable user page the
//! kernel's read and its call both fault, with error codes that leave no
//! other explanation (present page, supervisor access).

use core::sync::atomic::{AtomicUsize, Ordering};

use abi::{PAGE_SIZE, Prot};
use x86_64::structures::idt::PageFaultErrorCode;

use crate::{check_eq, framework::TestResult, require_ok};
use kernel::{smp, task::vm::AddressSpace, tlb};
use hal::{
    cpu::without_interrupts,
    probe::{self, CallOutcome, ProbeFault},
    protection::{smap_enabled, smep_enabled},
};



const RET: u8 = 0xC3;

/// Where the test maps its user page.
const USER_PAGE: u64 = 0x5000_0000;

pub fn smep_and_smap_on_every_cpu() -> TestResult {
    let cpu = kernel::boot::detect_cpu_features();
    let smep_on = AtomicUsize::new(0);
    let smap_on = AtomicUsize::new(0);
    require_ok!(smp::call_on(&smp::online(), &|| {
        smep_on.fetch_add(usize::from(smep_enabled()), Ordering::Relaxed);
        smap_on.fetch_add(usize::from(smap_enabled()), Ordering::Relaxed);
    }));
    let cpus = smp::online().count();
    check_eq!(
        smep_on.load(Ordering::Relaxed),
        if cpu.smep { cpus } else { 0 },
        "CPUs with CR4.SMEP set (CPUID says SMEP: {})",
        cpu.smep
    );
    check_eq!(
        smap_on.load(Ordering::Relaxed),
        if cpu.smap { cpus } else { 0 },
        "CPUs with CR4.SMAP set (CPUID says SMAP: {})",
        cpu.smap
    );
    Ok(())
}

pub fn kernel_cannot_read_or_run_user_pages() -> TestResult {
    if !smep_enabled() || !smap_enabled() {
        hal::println!("protection: this CPU lacks SMEP or SMAP; nothing to check");
        return Ok(());
    }
    let kernel_root = tlb::system().kernel_address_space().root();
    let space = require_ok!(AddressSpace::new(kernel_root).map_err(|_| "out of frames"));
    // A present user page holding one `ret`, readable and executable:
    // only SMAP can refuse the read and only SMEP the call.
    require_ok!(
        space
            .load_region(USER_PAGE, PAGE_SIZE, Prot::READ | Prot::EXEC, &[RET])
            .map_err(|errno| alloc::format!("{errno:?}"))
    );
    let (read, call) = without_interrupts(|| {
        tlb::switch_to(&space.tlb);
        let read = probe::read_byte(USER_PAGE);
        // This CPU alone has the address space loaded (interrupts are
        // off, and it is no process's), so the page holds the `ret`
        // written above: were the fetch allowed, it would return at once.
        let call = probe::call_ret(USER_PAGE);
        tlb::switch_to_kernel();
        (read, call)
    });
    space.tear_down();
    check_eq!(
        read,
        Err(ProbeFault {
            error_code: PageFaultErrorCode::PROTECTION_VIOLATION
        }),
        "a kernel read of a present user page (error code: present, supervisor read)"
    );
    check_eq!(
        call,
        CallOutcome::Faulted(ProbeFault {
            error_code: PageFaultErrorCode::PROTECTION_VIOLATION
                | PageFaultErrorCode::INSTRUCTION_FETCH
        }),
        "a kernel call into a present executable user page (error code: present, supervisor fetch)"
    );
    Ok(())
}
