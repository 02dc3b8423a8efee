//! [`TlbSystem`]: the object the kernel creates once at boot, and [`TlbConfig`], its policy
//! knobs.
//!
//! It ties together the per-CPU states (a slice the kernel allocates, one entry per possible
//! CPU), the kernel's own address space, the source of unique context ids, and the global
//! ASID allocator. Its methods are spread over one file per concept: `switch.rs`
//! (context switch and lazy TLB), `flush.rs` (flush requests), `flush_handler.rs` (the handler),
//! `global_asid.rs` (promotion, transition, broadcast), `batch.rs` (deferred reclaim).

use crate::asid::{Asid, MAX_ASID_AVAILABLE};
use crate::asid_alloc::GlobalAsidAllocator;
use crate::context::{AddressSpaceTlb, CTX_KERNEL};
use crate::counters::CounterSnapshot;
use crate::faults::{Fault, Faults};
use crate::hardware::TlbHardware;
use crate::instructions::LocalOp;
use crate::percpu::CpuTlbState;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering};
use tlb_types::{CpuId, MAX_CPUS, PageTableRoot};

/// Policy knobs. Times are in ticks of [`TlbHardware::now`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbConfig {
    /// A request for more than this many stride units becomes a full flush (Linux: 33: one
    /// INVLPG costs about 100 ns, so the worst partial flush is about 3 µs).
    pub flush_ceiling: u64,
    /// An address space seen running, not lazily, on at least this many CPUs at once is
    /// promoted to a global ASID. Clamped to at least 2: a single-threaded address space is
    /// never promoted.
    pub promotion_threshold: usize,
    /// At most one promotion check per address space per this many ticks (the rate limit).
    pub promotion_interval: u64,
    /// At most one CPU-set trim per address space per this many ticks.
    pub trim_interval: u64,
    /// Exclusive upper bound of the global ASID space (lower it to test exhaustion).
    pub global_asid_limit: u16,
}

impl Default for TlbConfig {
    /// Linux's values, with ticks assumed to be milliseconds.
    fn default() -> Self {
        Self {
            flush_ceiling: 33,
            promotion_threshold: 4,
            promotion_interval: 32,
            trim_interval: 1000,
            global_asid_limit: MAX_ASID_AVAILABLE,
        }
    }
}

/// The TLB shootdown state of the whole machine (see the module docs).
pub struct TlbSystem<'a> {
    pub(crate) cpus: &'a [CpuTlbState],
    pub(crate) kernel: AddressSpaceTlb,
    next_ctx_id: AtomicU64,
    pub(crate) asids: Mutex<GlobalAsidAllocator>,
    flush_ceiling: AtomicU64,
    promotion_threshold: AtomicUsize,
    pub(crate) promotion_interval: AtomicU64,
    pub(crate) trim_interval: AtomicU64,
    pub(crate) faults: Faults,
}

impl<'a> TlbSystem<'a> {
    /// `cpus` has one entry per possible CPU (at most [`MAX_CPUS`]); `kernel_root` is the
    /// page-table root of the kernel's own address space.
    pub fn new(cpus: &'a [CpuTlbState], kernel_root: PageTableRoot, config: TlbConfig) -> Self {
        assert!(
            cpus.len() <= MAX_CPUS,
            "{} CPUs exceed MAX_CPUS",
            cpus.len()
        );
        let sys = Self {
            cpus,
            kernel: AddressSpaceTlb::new(CTX_KERNEL, kernel_root),
            next_ctx_id: AtomicU64::new(CTX_KERNEL + 1),
            asids: Mutex::new(GlobalAsidAllocator::new(config.global_asid_limit)),
            flush_ceiling: AtomicU64::new(0),
            promotion_threshold: AtomicUsize::new(0),
            promotion_interval: AtomicU64::new(config.promotion_interval),
            trim_interval: AtomicU64::new(config.trim_interval),
            faults: Faults::new(),
        };
        sys.set_flush_ceiling(config.flush_ceiling);
        sys.set_promotion_threshold(config.promotion_threshold);
        sys
    }

    /// The state of CPU `cpu`.
    pub fn cpu(&self, cpu: CpuId) -> &CpuTlbState {
        &self.cpus[cpu]
    }

    /// Number of CPU slots the kernel provided.
    pub fn cpu_count(&self) -> usize {
        self.cpus.len()
    }

    /// The kernel's own address space (what lazy CPUs fall back to).
    pub fn kernel_address_space(&self) -> &AddressSpaceTlb {
        &self.kernel
    }

    /// A new address space with a fresh, never-reused id. `root` is its page-table root.
    pub fn new_address_space(&self, root: PageTableRoot) -> AddressSpaceTlb {
        let id = self.next_ctx_id.fetch_add(1, Ordering::Relaxed);
        AddressSpaceTlb::new(id, root)
    }

    /// Gives back an address space's global ASID (if any) before the kernel drops it.
    ///
    /// The kernel must call this only when **no CPU has the address space loaded, lazily or
    /// not** (Linux keeps a reference per lazy CPU for the same reason). The ASID is then
    /// parked until the next rollover flush (see `asid_alloc.rs`).
    pub fn release_address_space(&self, mm: &AddressSpaceTlb) {
        debug_assert!(
            self.cpus
                .iter()
                .all(|c| c.loaded.load(Ordering::Relaxed) != mm.ctx_id),
            "address space {} released while still loaded",
            mm.ctx_id
        );
        let mut asids = self.asids.lock();
        let asid = mm.global_asid.swap(0, Ordering::AcqRel);
        if asid != 0 {
            let asid = Asid::new(asid);
            if self.faults.has(Fault::ReuseGlobalAsidBeforeRollover) {
                asids.free_without_rollover(asid);
            } else {
                asids.free(asid);
            }
        }
    }

    /// Brings the calling CPU's TLB state up: loads the kernel address space in ASID 0 with a
    /// flush and forgets every slot. Call once per CPU at bring-up, interrupts off, after
    /// the kernel's page tables are in use and before the CPU is marked online.
    pub fn init_cpu(&self, hw: &impl TlbHardware) {
        let st = &self.cpus[hw.current_cpu()];
        for i in 0..st.slots.len() {
            st.set_slot(i, 0, 0);
        }
        st.set_slot(0, CTX_KERNEL, self.kernel.tlb_gen());
        st.next_asid.store(1, Ordering::Relaxed);
        st.is_lazy.store(false, Ordering::Relaxed);
        self.local(
            hw,
            LocalOp::Load {
                root: self.kernel.root,
                pcid: Asid::of_slot(0).pcid(),
                flush: true,
            },
        );
        self.local(hw, LocalOp::Everything);
        st.loaded_asid.store(Asid::of_slot(0), Ordering::Release);
        st.loaded.store(CTX_KERNEL, Ordering::Release);
    }

    /// Current full-flush ceiling (stride units).
    pub fn flush_ceiling(&self) -> u64 {
        self.flush_ceiling.load(Ordering::Relaxed)
    }

    /// Changes the full-flush ceiling at run time (0: every range flush is a full flush).
    pub fn set_flush_ceiling(&self, units: u64) {
        self.flush_ceiling.store(units, Ordering::Relaxed);
    }

    /// Current promotion threshold (CPUs).
    pub fn promotion_threshold(&self) -> usize {
        self.promotion_threshold.load(Ordering::Relaxed)
    }

    /// Changes the promotion threshold; values below 2 are raised to 2.
    pub fn set_promotion_threshold(&self, cpus: usize) {
        self.promotion_threshold
            .store(cpus.max(2), Ordering::Relaxed);
    }

    /// Changes the promotion rate limit and the CPU-set trim interval (ticks).
    pub fn set_intervals(&self, promotion: u64, trim: u64) {
        self.promotion_interval.store(promotion, Ordering::Relaxed);
        self.trim_interval.store(trim, Ordering::Relaxed);
    }

    /// Global ASIDs that can still be handed out.
    pub fn global_asids_available(&self) -> usize {
        self.asids.lock().available()
    }

    /// Global ASIDs that address spaces hold now. While it is 0 no CPU runs a global ASID,
    /// so the kernel may switch its broadcast backend on or off (see
    /// [`crate::TlbHardware::broadcast`]).
    pub fn global_asids_in_use(&self) -> usize {
        let asids = self.asids.lock();
        usize::from(asids.limit() - crate::asid::FIRST_GLOBAL_ASID.get()) - asids.available()
    }

    /// The deliberate-bug switches (tests and demonstrations only).
    #[doc(hidden)]
    pub fn faults(&self) -> &Faults {
        &self.faults
    }

    /// Counters summed over every CPU.
    pub fn total_counters(&self) -> CounterSnapshot {
        self.cpus.iter().fold(CounterSnapshot::default(), |acc, c| {
            acc.add(&c.counters().snapshot())
        })
    }
}
