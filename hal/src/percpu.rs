//! Per-CPU data: one [`PerCpu`] block per online CPU, found through the GS
//! segment base.
//!
//! Each CPU points its GS base (MSR IA32_GS_BASE) at its own block. The
//! block's first field holds its own address, so one `mov rax, gs:[0]`
//! yields a pointer to the block from any context, interrupt handlers
//! included, in O(1). Any CPU finds another's block through
//! [`crate::smp::cpu`].
//!
//! The block holds only what this layer needs: the stacks the entry stubs
//! load, the CPU's names (index and APIC id), its interrupt counters and its
//! cross-call inbox. State that belongs to the kernel above (the scheduler's
//! run queue, the system-call log) lives in per-CPU arrays of the modules
//! that own it, indexed by [`PerCpu::index`]. Fields written by other CPUs
//! are atomics or locked.

use alloc::{boxed::Box, collections::VecDeque, sync::Arc};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use spin::Mutex;
use tlb_types::CpuId;
use x86_64::{VirtAddr, registers::model_specific::GsBase};

use crate::{context::Runnable, gdt::Tss, ipi::QueuedCall};

/// One CPU's data. `repr(C)` with `self_address` first: [`current`]'s
/// GS-relative read depends on that layout, and the syscall entry stub
/// reaches two fields at fixed offsets.
#[repr(C)]
pub struct PerCpu {
    self_address: u64,
    /// The running thread's kernel stack top; the syscall entry stub loads
    /// RSP from here.
    pub(crate) kernel_stack_top: AtomicU64,
    /// Where the syscall entry stub parks the user RSP.
    pub(crate) user_rsp_scratch: AtomicU64,
    /// The kernel's number for this CPU: 0 for the boot CPU, then in order of
    /// start-up. Used in CPU sets, counters and messages.
    pub index: CpuId,
    /// The local APIC id, the hardware's name for this CPU (IPI destination).
    pub apic_id: u32,
    /// Local APIC timer interrupts taken.
    pub ticks: AtomicU64,
    /// IPIs this CPU sent (cross-calls and reschedules).
    pub ipis_sent: AtomicU64,
    /// IPIs this CPU received.
    pub ipis_received: AtomicU64,
    /// Cross-CPU calls queued for this CPU, served by its IPI handler.
    pub(crate) inbox: Mutex<VecDeque<QueuedCall>>,
    /// Set while this CPU halts waiting for the answers to its cross-call:
    /// the target that answers last then wakes it (see [`crate::ipi`]).
    pub(crate) halted_for_answers: AtomicBool,
    /// The context running here (see [`crate::context`]).
    pub(crate) running: Mutex<Option<Arc<dyn Runnable>>>,
    /// The context this CPU is switching away from, until the switch ends.
    pub(crate) previous: Mutex<Option<Arc<dyn Runnable>>>,
    /// This CPU's TSS (RSP0 changes with the running thread).
    tss: &'static Tss,
}

impl PerCpu {
    /// Allocates the block for CPU `index` with APIC id `apic_id` and TSS
    /// `tss`, for good.
    pub(crate) fn new_static(index: CpuId, apic_id: u32, tss: &'static Tss) -> &'static PerCpu {
        let mut block = Box::new(PerCpu {
            self_address: 0,
            kernel_stack_top: AtomicU64::new(0),
            user_rsp_scratch: AtomicU64::new(0),
            index,
            apic_id,
            ticks: AtomicU64::new(0),
            ipis_sent: AtomicU64::new(0),
            ipis_received: AtomicU64::new(0),
            inbox: Mutex::new(VecDeque::new()),
            halted_for_answers: AtomicBool::new(false),
            running: Mutex::new(None),
            previous: Mutex::new(None),
            tss,
        });
        block.self_address = &*block as *const PerCpu as u64;
        Box::leak(block)
    }

    /// Points interrupts from ring 3 and system calls at the kernel stack
    /// ending at `top` (the thread about to run).
    pub fn set_kernel_stack(&self, top: u64) {
        self.tss.set_kernel_stack(VirtAddr::new(top));
        self.kernel_stack_top.store(top, Ordering::Relaxed);
    }

    pub fn count_ipi_sent(&self) {
        self.ipis_sent.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_ipi_received(&self) {
        self.ipis_received.fetch_add(1, Ordering::Relaxed);
    }
}

/// Points this CPU's GS base at `cpu`.
pub(crate) fn install(cpu: &'static PerCpu) {
    assert_eq!(
        cpu.self_address, cpu as *const PerCpu as u64,
        "PerCpu self pointer"
    );
    GsBase::write(VirtAddr::from_ptr(cpu));
}

/// This CPU's block. Before `install` ran on this CPU the GS base is 0 and
/// the read faults on the never-mapped page at address 0, which the fault
/// path reports; it never yields a bogus reference.
pub fn current() -> &'static PerCpu {
    let address: u64;
    // Reads 8 bytes at GS:0. After `install` that is the first field
    // of a 'static, repr(C) `PerCpu`: its own address. Before, GS:0 is linear
    // address 0, which is never mapped, so the instruction faults instead.
    // SAFETY: the read yields a valid PerCpu address or faults.
    unsafe {
        core::arch::asm!("mov {}, gs:[0]", out(reg) address, options(nostack, readonly, preserves_flags))
    };
    // `address` is the address of a 'static `PerCpu` (see above), and
    // the kernel only ever creates shared references to it.
    // SAFETY: a 'static PerCpu, only ever shared.
    unsafe { &*(address as *const PerCpu) }
}

/// This CPU's block, or `None` before `install`; slower (reads an MSR), for
/// code that may run early, such as crash reports.
pub fn current_if_installed() -> Option<&'static PerCpu> {
    (!GsBase::read().is_null()).then(current)
}
