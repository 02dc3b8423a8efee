//! Per-CPU data: one [`PerCpu`] block per online CPU.
//!
//! A CPU finds its own block through its GS base in O(1)
//! ([`crate::arch::percpu::current`]); any CPU finds another's through
//! [`super::cpu`]. Fields written by other CPUs are atomics or locked.

use alloc::{boxed::Box, collections::VecDeque};
use core::sync::atomic::{AtomicU64, Ordering};

use mm::CpuId;
use spin::Mutex;

use crate::arch::ipi::QueuedCall;

/// One CPU's data. `repr(C)` with `self_address` first: the GS-relative read
/// in [`crate::arch::percpu`] depends on that layout.
#[repr(C)]
pub struct PerCpu {
    self_address: u64,
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
}

impl PerCpu {
    /// Allocates the block for CPU `index` with APIC id `apic_id`, for good.
    pub fn new_static(index: CpuId, apic_id: u32) -> &'static PerCpu {
        let mut block = Box::new(PerCpu {
            self_address: 0,
            index,
            apic_id,
            ticks: AtomicU64::new(0),
            ipis_sent: AtomicU64::new(0),
            ipis_received: AtomicU64::new(0),
            inbox: Mutex::new(VecDeque::new()),
        });
        block.self_address = &*block as *const PerCpu as u64;
        Box::leak(block)
    }

    /// The block's own address (its first field).
    pub fn self_address(&self) -> u64 {
        self.self_address
    }

    pub fn count_ipi_sent(&self) {
        self.ipis_sent.fetch_add(1, Ordering::Relaxed);
    }
}
