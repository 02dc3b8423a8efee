//! Per-CPU data: one [`PerCpu`] block per online CPU.
//!
//! A CPU finds its own block through its GS base in O(1)
//! ([`crate::arch::percpu::current`]); any CPU finds another's through
//! [`super::cpu`]. Fields written by other CPUs are atomics or locked.

use alloc::{boxed::Box, collections::VecDeque};
use core::sync::atomic::{AtomicU64, Ordering};

use mm::CpuId;
use spin::Mutex;

use crate::{
    arch::{gdt::Tss, ipi::QueuedCall},
    task::{sched::CpuScheduler, syscall::LastCall},
};

/// One CPU's data. `repr(C)` with `self_address` first: the GS-relative read
/// in [`crate::arch::percpu`] depends on that layout.
#[repr(C)]
pub struct PerCpu {
    self_address: u64,
    /// The running thread's kernel stack top; the syscall entry stub loads
    /// RSP from here (at a fixed offset, hence repr(C)).
    pub kernel_stack_top: AtomicU64,
    /// Where the syscall entry stub parks the user RSP.
    pub user_rsp_scratch: AtomicU64,
    /// The kernel's number for this CPU: 0 for the boot CPU, then in order of
    /// start-up. Used in CPU sets, counters and messages.
    pub index: CpuId,
    /// The local APIC id, the hardware's name for this CPU (IPI destination).
    pub apic_id: u32,
    /// Local APIC timer interrupts taken.
    pub ticks: AtomicU64,
    /// IPIs this CPU sent (cross-call requests).
    pub ipis_sent: AtomicU64,
    /// IPIs this CPU received.
    pub ipis_received: AtomicU64,
    /// Cross-CPU calls queued for this CPU, served by its IPI handler.
    pub(crate) inbox: Mutex<VecDeque<QueuedCall>>,
    /// Run queue, current thread, idle thread.
    pub sched: CpuScheduler,
    /// The last system call this CPU started, for crash reports.
    pub last_syscall: LastCall,
    /// This CPU's TSS (RSP0 changes with the running thread).
    tss: &'static Tss,
}

impl PerCpu {
    /// Allocates the block for CPU `index` with APIC id `apic_id` and TSS
    /// `tss`, for good.
    pub fn new_static(index: CpuId, apic_id: u32, tss: &'static Tss) -> &'static PerCpu {
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
            sched: CpuScheduler::new(),
            last_syscall: LastCall::default(),
            tss,
        });
        block.self_address = &*block as *const PerCpu as u64;
        Box::leak(block)
    }

    /// The block's own address (its first field).
    pub fn self_address(&self) -> u64 {
        self.self_address
    }

    /// Points interrupts from ring 3 and system calls at the kernel stack
    /// ending at `top` (the thread about to run).
    pub fn set_kernel_stack(&self, top: u64) {
        self.tss.set_kernel_stack(x86_64::VirtAddr::new(top));
        self.kernel_stack_top.store(top, Ordering::Relaxed);
    }

    pub fn count_ipi_sent(&self) {
        self.ipis_sent.fetch_add(1, Ordering::Relaxed);
    }
}
