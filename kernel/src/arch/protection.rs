//! SMEP and SMAP: the hardware keeps the kernel out of user pages.
//!
//! Every address space maps the kernel and the running program together, so
//! a kernel bug that follows a user-supplied pointer would read, write or
//! even execute whatever the program put there. Two CR4 bits turn such a
//! bug into a page fault:
//!
//! - **SMEP** (supervisor-mode execution prevention): ring 0 may not fetch
//!   instructions from a user page. A program cannot make the kernel run its
//!   code by corrupting a kernel function pointer.
//! - **SMAP** (supervisor-mode access prevention): ring 0 may not read or
//!   write a user page unless RFLAGS.AC is set (`stac` ... `clac`). This
//!   kernel never needs that window: it copies user memory through the
//!   physical-memory window after checking the address against the
//!   process's regions (`task::vm`), never through the user's pointer.
//!
//! Both are enabled on every CPU that has them. RFLAGS.AC can be set by
//! ring 3 (`popf`), and an interrupt or exception does not clear it, so the
//! trap entry executes `clac` when SMAP is on (the `syscall` entry clears AC
//! through SFMASK, see [`super::syscall`]); otherwise a program could
//! switch SMAP off for the kernel code that handles its interrupts.

use core::sync::atomic::{AtomicBool, Ordering};

use x86_64::registers::control::{Cr4, Cr4Flags};

/// Whether the CPUs have SMEP and SMAP (same answer on every CPU: the boot
/// CPU's CPUID decides).
static HAVE_SMEP: AtomicBool = AtomicBool::new(false);
/// Read by the trap entry stub (as a byte) to decide whether to `clac`.
pub static SMAP_ON: AtomicBool = AtomicBool::new(false);

/// Records which of the two the CPU has and enables them on this (the
/// boot) CPU.
pub fn init(smep: bool, smap: bool) {
    HAVE_SMEP.store(smep, Ordering::Relaxed);
    SMAP_ON.store(smap, Ordering::Relaxed);
    enable_this_cpu();
}

/// Enables what [`init`] found on this CPU (every AP calls it).
pub fn enable_this_cpu() {
    let mut flags = Cr4Flags::empty();
    if HAVE_SMEP.load(Ordering::Relaxed) {
        flags |= Cr4Flags::SUPERVISOR_MODE_EXECUTION_PROTECTION;
    }
    if SMAP_ON.load(Ordering::Relaxed) {
        flags |= Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION;
    }
    // The bits are set only when CPUID reports the features (setting an
    // unsupported CR4 bit would fault). They restrict the kernel's own
    // accesses to user pages, which it never makes: user memory is copied
    // through the physical-memory window, and the trap entry clears AC.
    // SAFETY: supported bits that only forbid accesses the kernel never makes.
    unsafe { Cr4::update(|cr4| cr4.insert(flags)) };
}

/// Whether SMEP is on on this CPU (CR4.SMEP).
pub fn smep_enabled() -> bool {
    Cr4::read().contains(Cr4Flags::SUPERVISOR_MODE_EXECUTION_PROTECTION)
}

/// Whether SMAP is on on this CPU (CR4.SMAP).
pub fn smap_enabled() -> bool {
    Cr4::read().contains(Cr4Flags::SUPERVISOR_MODE_ACCESS_PREVENTION)
}

pub mod tests {
    //! Proof that SMEP and SMAP are on and work: on every CPU the CR4 bits
    //! are set, and on a present, readable, executable user page the
    //! kernel's read and its call both fault, with error codes that leave no
    //! other explanation (present page, supervisor access).

    use core::sync::atomic::{AtomicUsize, Ordering};

    use abi::{PAGE_SIZE, prot};

    use super::{smap_enabled, smep_enabled};
    use crate::{
        arch::{
            cpu::without_interrupts,
            ipi,
            probe::{self, ProbeFault},
        },
        check_eq,
        cpu_features::CpuFeatures,
        ktest::{Test, TestResult},
        require_ok, smp,
        task::vm::AddressSpace,
        tlb,
    };

    pub const TESTS: &[Test] = &[
        Test::new(
            "protection::smep_and_smap_on_every_cpu",
            smep_and_smap_on_every_cpu,
        ),
        Test::new(
            "protection::kernel_cannot_read_or_run_user_pages",
            kernel_cannot_read_or_run_user_pages,
        ),
    ];

    const PRESENT: u64 = 1 << 0;
    const INSTRUCTION_FETCH: u64 = 1 << 4;
    const RET: u8 = 0xC3;
    /// Where the test maps its user page.
    const USER_PAGE: u64 = 0x5000_0000;

    fn smep_and_smap_on_every_cpu() -> TestResult {
        let cpu = CpuFeatures::detect();
        let smep_on = AtomicUsize::new(0);
        let smap_on = AtomicUsize::new(0);
        require_ok!(ipi::call_on(&smp::online(), &|| {
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

    fn kernel_cannot_read_or_run_user_pages() -> TestResult {
        if !smep_enabled() || !smap_enabled() {
            crate::println!("protection: this CPU lacks SMEP or SMAP; nothing to check");
            return Ok(());
        }
        let kernel_root = x86_64::PhysAddr::new(tlb::system().kernel_address_space().root());
        let space = require_ok!(AddressSpace::new(kernel_root).map_err(|_| "out of frames"));
        // A present user page holding one `ret`, readable and executable:
        // only SMAP can refuse the read and only SMEP the call.
        require_ok!(
            space
                .load_region(USER_PAGE, PAGE_SIZE, prot::READ | prot::EXEC, &[RET])
                .map_err(|errno| alloc::format!("{errno:?}"))
        );
        let (read, call) = without_interrupts(|| {
            tlb::switch_to(&space.tlb);
            let read = probe::read_byte(USER_PAGE);
            // This CPU alone has the address space loaded (interrupts are
            // off, and it is no process's), so the page holds the `ret`
            // written above: were the fetch allowed, it would return at once.
            // SAFETY: the target is a lone `ret` nobody can change meanwhile.
            let call = unsafe { probe::call(USER_PAGE) };
            tlb::switch_to_kernel();
            (read, call)
        });
        space.tear_down();
        check_eq!(
            read,
            Err(ProbeFault {
                error_code: PRESENT
            }),
            "a kernel read of a present user page (error code: present, supervisor read)"
        );
        check_eq!(
            call,
            Err(ProbeFault {
                error_code: PRESENT | INSTRUCTION_FETCH
            }),
            "a kernel call into a present executable user page (error code: present, supervisor fetch)"
        );
        Ok(())
    }
}
