//! Simulated CPUs: TLBs tagged by PCID with global entries and cached page walks, CR3 and
//! CR4.PGE, the exact semantics of every invalidation instruction (INVLPG, INVPCID types 0-3,
//! CR3 loads with and without bit 63, a CR4.PGE toggle), IPIs, and three broadcast backends
//! (none, software IPIs, and an INVLPGB/TLBSYNC model fed with the operands `mm`'s encoders
//! produce).
//!
//! `mm` chooses the instruction for each local operation (`mm::instructions::select`, from
//! the CPU state this model reports), as it does on the kernel, and the model executes the
//! instruction it is handed exactly: an entry
//! survives whatever the instruction does not drop. Global entries exist only while CR4.PGE
//! is on; with it off a kernel page is cached under the PCID that touched it, like any page.

use crate::sched::{YieldLock, splitmix};
use crate::world::{Life, World};
use mm::instructions::LocalTlb;
use mm::invlpgb::{self, InvlpgbLimits};
use mm::{
    BroadcastBackend, BroadcastOp, CpuId, CpuSet, FlushRequest, Pcid, TlbHardware, TlbSystem,
};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tlb_types::{Instruction, InvlpgbOperands};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Targeted IPIs only, no global ASIDs.
    Ipi,
    /// Broadcasts carried out by IPIs to every online CPU.
    Software,
    /// The INVLPGB/TLBSYNC model.
    Invlpgb,
}

#[derive(Clone, Copy)]
pub struct TlbEntry {
    pub mapping: u64,
    pub ctx: u64,
}

/// The `ctx` of a non-global entry for a kernel page (CR4.PGE off).
const KERNEL_ENTRY: u64 = u64::MAX;

/// One CPU's translation state.
#[derive(Default)]
pub struct CpuTlb {
    pub root: u64,
    pub pcid: Pcid,
    /// (pcid, vpn) -> non-global entry (kernel pages too while CR4.PGE is off)
    pub entries: BTreeMap<(Pcid, u64), TlbEntry>,
    /// vpn -> global (kernel) entry: mapping id; only while CR4.PGE is on
    pub globals: BTreeMap<u64, u64>,
    /// (pcid, region) -> (table id, ctx): the paging-structure cache
    pub walks: BTreeMap<(Pcid, u64), (u64, u64)>,
}

impl CpuTlb {
    fn drop_pcid(&mut self, pcid: Pcid) {
        self.entries.retain(|&(p, _), _| p != pcid);
        self.walks.retain(|&(p, _), _| p != pcid);
    }

    fn drop_nonglobal(&mut self) {
        self.entries.clear();
        self.walks.clear();
    }
}

pub struct SimCpu {
    pub tlb: Mutex<CpuTlb>,
    /// Held while the CPU runs with interrupts disabled; an IPI takes it to run its handler.
    pub irq: YieldLock,
    /// INVLPGBs this CPU issued that have not completed everywhere yet.
    pending: Mutex<Vec<InvlpgbOperands>>,
}

/// Deliberate bugs of the *kernel side* (the hardware backend), as opposed to `mm::Fault`.
#[derive(Clone, Copy, Default, Debug)]
pub struct KernelFaults {
    /// TLBSYNC executed on another CPU than the INVLPGBs it should wait for.
    pub tlbsync_on_other_cpu: bool,
    /// CR4.PGE is never set, while the kernel tells `mm` its CPUs have it (the bug the
    /// kernel had: the bootloader and the AP trampoline set only PAE).
    pub pge_left_off: bool,
}

pub struct Machine {
    pub sys: TlbSystem<'static>,
    pub cpus: Vec<SimCpu>,
    /// What the kernel tells `mm::instructions::select` about every CPU.
    pub state: LocalTlb,
    /// Whether CR4.PGE really is on (differs from `state.pge` under `pge_left_off`).
    pub cr4_pge: bool,
    /// Whether the CPUs have INVPCID at all (its use without it is an #UD).
    pub has_invpcid: bool,
    pub backend: Backend,
    pub limits: InvlpgbLimits,
    pub world: World,
    pub clock: AtomicU64,
    pub faults: KernelFaults,
    pub ipis: AtomicU64,
    pub invlpgbs: AtomicU64,
}

pub struct Hw<'m> {
    pub m: &'m Machine,
    pub cpu: CpuId,
    bc: Bcast<'m>,
}

pub struct Bcast<'m> {
    m: &'m Machine,
    cpu: CpuId,
}

impl Machine {
    pub fn new(
        sys: TlbSystem<'static>,
        state: LocalTlb,
        backend: Backend,
        faults: KernelFaults,
    ) -> Self {
        let n = sys.cpu_count();
        Self {
            sys,
            cpus: (0..n)
                .map(|_| SimCpu {
                    tlb: Mutex::new(CpuTlb::default()),
                    irq: YieldLock::new(),
                    pending: Mutex::new(Vec::new()),
                })
                .collect(),
            state,
            cr4_pge: state.pge && !faults.pge_left_off,
            has_invpcid: state.invpcid,
            backend,
            limits: InvlpgbLimits::from_cpuid_edx(7),
            world: World::new(),
            clock: AtomicU64::new(0),
            faults,
            ipis: AtomicU64::new(0),
            invlpgbs: AtomicU64::new(0),
        }
    }

    pub fn hw(&self, cpu: CpuId) -> Hw<'_> {
        Hw {
            m: self,
            cpu,
            bc: Bcast { m: self, cpu },
        }
    }

    fn tlb(&self, cpu: CpuId) -> std::sync::MutexGuard<'_, CpuTlb> {
        self.cpus[cpu].tlb.lock().unwrap()
    }

    /// A user access by `cpu` to `vpn` of whatever CR3 points at (TLB hit or page walk).
    pub fn access(&self, cpu: CpuId, vpn: u64) {
        let mut tlb = self.tlb(cpu);
        let pt = self.world.table_for_root(tlb.root);
        let key = (tlb.pcid, vpn);
        if let Some(e) = tlb.entries.get(&key) {
            let oracle = &self.world.oracle;
            if e.ctx != pt.ctx {
                oracle.violation(format!(
                    "cpu {cpu}: PCID {} holds address space {}'s entry for vpn {vpn:#x} while {} runs",
                    tlb.pcid, e.ctx, pt.ctx
                ));
            } else if oracle.mapping(e.mapping) == Life::Dead {
                oracle.violation(format!(
                    "cpu {cpu}: stale translation of vpn {vpn:#x} (mapping {}) used after its flush returned (ctx {}, PCID {})",
                    e.mapping, pt.ctx, tlb.pcid
                ));
            }
            return;
        }
        self.walk(cpu, &mut tlb, &pt, vpn);
    }

    /// A page walk (also what speculation does on a lazy CPU): uses a cached walk entry if
    /// there is one, and fills the TLB.
    pub fn walk(&self, cpu: CpuId, tlb: &mut CpuTlb, pt: &crate::world::PageTable, vpn: u64) {
        let region = vpn >> 9;
        let oracle = &self.world.oracle;
        if let Some(&(table, ctx)) = tlb.walks.get(&(tlb.pcid, region)) {
            if ctx != pt.ctx {
                oracle.violation(format!(
                    "cpu {cpu}: cached walk of address space {ctx} used by {}",
                    pt.ctx
                ));
                return;
            }
            if oracle.table(table) == Life::Dead {
                oracle.violation(format!(
                    "cpu {cpu}: page walk through freed page table {table} (ctx {ctx}, region {region})"
                ));
                return;
            }
        }
        let inner = pt.inner.lock().unwrap();
        let Some(&table) = inner.tables.get(&region) else {
            return;
        };
        let pcid = tlb.pcid;
        tlb.walks.insert((pcid, region), (table, pt.ctx));
        if let Some(&mapping) = inner.ptes.get(&vpn) {
            tlb.entries.insert(
                (pcid, vpn),
                TlbEntry {
                    mapping,
                    ctx: pt.ctx,
                },
            );
        }
    }

    /// A speculative walk on `cpu` (any state, including lazy).
    pub fn speculate(&self, cpu: CpuId, vpn: u64) {
        let mut tlb = self.tlb(cpu);
        let pt = self.world.table_for_root(tlb.root);
        self.walk(cpu, &mut tlb, &pt, vpn);
    }

    /// A kernel access: a global entry (CR4.PGE on), an entry tagged with the current PCID
    /// (PGE off), or a walk of the kernel mappings that fills one of them.
    pub fn access_kernel(&self, cpu: CpuId, vpn: u64) {
        let mut tlb = self.tlb(cpu);
        let pcid = tlb.pcid;
        let cached = if self.cr4_pge {
            tlb.globals.get(&vpn).copied()
        } else {
            tlb.entries.get(&(pcid, vpn)).map(|entry| entry.mapping)
        };
        if let Some(mapping) = cached {
            if self.world.oracle.mapping(mapping) == Life::Dead {
                let kind = if self.cr4_pge {
                    "global"
                } else {
                    "PCID-tagged"
                };
                self.world.oracle.violation(format!(
                    "cpu {cpu}: stale {kind} kernel translation of vpn {vpn:#x} (PCID {pcid}) after its flush returned"
                ));
            }
            return;
        }
        if let Some(&mapping) = self.world.kernel.lock().unwrap().get(&vpn) {
            if self.cr4_pge {
                tlb.globals.insert(vpn, mapping);
            } else {
                tlb.entries.insert(
                    (pcid, vpn),
                    TlbEntry {
                        mapping,
                        ctx: KERNEL_ENTRY,
                    },
                );
            }
        }
    }

    /// Executes one local TLB instruction on `cpu`, exactly.
    pub fn execute(&self, cpu: CpuId, instruction: Instruction) {
        let pcide = self.state.pcide;
        let mut tlb = self.tlb(cpu);
        let needs_invpcid = |pcid: Pcid| {
            assert!(self.has_invpcid, "INVPCID on a CPU without it (#UD)");
            assert!(
                pcide || pcid == Pcid::ZERO,
                "INVPCID type 0/1 with PCID {pcid} while CR4.PCIDE is clear (#GP)"
            );
        };
        match instruction {
            Instruction::Invlpg { va } => {
                let (pcid, vpn) = (tlb.pcid, va >> 12);
                tlb.entries.remove(&(pcid, vpn));
                tlb.globals.remove(&vpn);
                tlb.walks.retain(|&(p, _), _| p != pcid);
            }
            Instruction::InvpcidAddress { pcid, va } => {
                needs_invpcid(pcid);
                tlb.entries.remove(&(pcid, va >> 12));
                tlb.walks.retain(|&(p, _), _| p != pcid);
            }
            Instruction::InvpcidSingle { pcid } => {
                needs_invpcid(pcid);
                tlb.drop_pcid(pcid);
            }
            Instruction::InvpcidAll => {
                needs_invpcid(Pcid::ZERO);
                tlb.drop_nonglobal();
                tlb.globals.clear();
            }
            Instruction::InvpcidAllNonGlobal => {
                needs_invpcid(Pcid::ZERO);
                tlb.drop_nonglobal();
            }
            Instruction::LoadCr3 { root, pcid, keep } => {
                if pcide {
                    if !keep {
                        tlb.drop_pcid(pcid);
                    }
                } else {
                    assert!(
                        pcid == Pcid::ZERO && !keep,
                        "CR3 load with PCID {pcid} or bit 63 while CR4.PCIDE is clear"
                    );
                    tlb.drop_nonglobal();
                }
                tlb.root = root.address();
                tlb.pcid = pcid;
            }
            Instruction::ReloadCr3 => {
                let pcid = tlb.pcid;
                if pcide {
                    tlb.drop_pcid(pcid);
                } else {
                    tlb.drop_nonglobal();
                }
            }
            Instruction::TogglePge => {
                tlb.drop_nonglobal();
                tlb.globals.clear();
            }
        }
    }

    fn apply_invlpgb(&self, op: InvlpgbOperands) {
        let flags = op.rax & 0xfff;
        assert_ne!(
            flags & tlb_types::invlpgb::FLAG_ASID,
            0,
            "ASID-valid must always be set"
        );
        assert_eq!(op.edx & 0xffff, 0, "host ASID 0 only");
        assert_eq!(
            flags & tlb_types::invlpgb::FLAG_FINAL_ONLY,
            0,
            "FINAL_ONLY would keep freed tables cached"
        );
        let extra = op.ecx & 0xffff;
        assert!(
            extra < self.limits.max_pages(),
            "INVLPGB count {extra} beyond the CPU limit"
        );
        let va = flags & tlb_types::invlpgb::FLAG_VA != 0;
        let by_pcid = flags & tlb_types::invlpgb::FLAG_PCID != 0;
        let global = flags & tlb_types::invlpgb::FLAG_INCLUDE_GLOBAL != 0;
        let pcid_field = op.edx >> 16;
        assert!(
            pcid_field < 1 << tlb_types::PCID_BITS,
            "INVLPGB EDX {:#x}: bits above the 12-bit PCID are reserved",
            op.edx
        );
        let pcid = Pcid::new(pcid_field as u16);
        if by_pcid {
            assert!(
                self.state.pcide,
                "INVLPGB with a PCID while PCIDs are off would #GP"
            );
        }
        let shift = if op.ecx >> 31 != 0 { 21 } else { 12 };
        let first = (op.rax & !0xfff) >> 12;
        let last = first + ((u64::from(extra) + 1) << (shift - 12));
        let hit_va = |vpn: u64| !va || (first..last).contains(&vpn);
        for cpu in &self.cpus {
            let mut tlb = cpu.tlb.lock().unwrap();
            tlb.entries
                .retain(|&(p, vpn), _| !(hit_va(vpn) && (!by_pcid || p == pcid)));
            tlb.walks.retain(|&(p, _), _| by_pcid && p != pcid);
            if global {
                tlb.globals.retain(|&vpn, _| !hit_va(vpn));
            }
        }
    }

    fn issue(&self, cpu: CpuId, ops: impl IntoIterator<Item = InvlpgbOperands>) {
        let mut pending = self.cpus[cpu].pending.lock().unwrap();
        for op in ops {
            self.invlpgbs.fetch_add(1, Ordering::Relaxed);
            pending.push(op);
        }
    }

    fn tlbsync(&self, cpu: CpuId) {
        let target = if self.faults.tlbsync_on_other_cpu {
            (cpu + 1) % self.cpus.len()
        } else {
            cpu
        };
        let ops = std::mem::take(&mut *self.cpus[target].pending.lock().unwrap());
        for op in ops {
            self.apply_invlpgb(op);
        }
    }

    /// Hardware makes progress on its own: completes some CPU's oldest INVLPGB.
    pub fn background_progress(&self, rng: &mut u64) {
        let cpu = (splitmix(rng) % self.cpus.len() as u64) as usize;
        let op = {
            let mut p = self.cpus[cpu].pending.lock().unwrap();
            if p.is_empty() {
                None
            } else {
                Some(p.remove(0))
            }
        };
        if let Some(op) = op {
            self.apply_invlpgb(op);
        }
    }

    fn software_broadcast(&self, op: BroadcastOp) {
        for t in 0..self.cpus.len() {
            let _irq = self.cpus[t].irq.lock();
            self.ipis.fetch_add(1, Ordering::Relaxed);
            self.sys.handle_broadcast_ipi(&self.hw(t), &op);
        }
    }
}

impl BroadcastBackend for Bcast<'_> {
    fn flush_pcid_range(&self, pcid: Pcid, start: u64, end: u64, stride_shift: u8) {
        match self.m.backend {
            Backend::Software => self.m.software_broadcast(BroadcastOp::PcidRange {
                pcid,
                start,
                end,
                stride_shift,
            }),
            _ => self.m.issue(
                self.cpu,
                invlpgb::range_chunks(start, end, stride_shift, self.m.limits)
                    .map(|c| invlpgb::user_range(pcid, c.addr, c.pages, c.stride_2m)),
            ),
        }
    }
    fn flush_pcid(&self, pcid: Pcid) {
        match self.m.backend {
            Backend::Software => self.m.software_broadcast(BroadcastOp::Pcid(pcid)),
            _ => self.m.issue(self.cpu, [invlpgb::single_pcid(pcid)]),
        }
    }
    fn flush_all_nonglobal(&self) {
        match self.m.backend {
            Backend::Software => self.m.software_broadcast(BroadcastOp::AllNonGlobal),
            _ => self.m.issue(self.cpu, [invlpgb::all_nonglobals()]),
        }
    }
    fn flush_kernel_range(&self, start: u64, end: u64) {
        match self.m.backend {
            Backend::Software => self
                .m
                .software_broadcast(BroadcastOp::KernelRange { start, end }),
            _ => self.m.issue(
                self.cpu,
                invlpgb::range_chunks(start, end, 12, self.m.limits)
                    .map(|c| invlpgb::kernel_range(c.addr, c.pages)),
            ),
        }
    }
    fn flush_all_including_global(&self) {
        match self.m.backend {
            Backend::Software => self.m.software_broadcast(BroadcastOp::AllIncludingGlobal),
            _ => self.m.issue(self.cpu, [invlpgb::all_including_global()]),
        }
    }
    fn sync(&self) {
        if self.m.backend == Backend::Invlpgb {
            self.m.tlbsync(self.cpu);
        }
    }
}

impl<'m> TlbHardware for Hw<'m> {
    type Broadcast = Bcast<'m>;

    fn current_cpu(&self) -> CpuId {
        self.cpu
    }
    fn online_cpus(&self) -> CpuSet {
        CpuSet::first_n(self.m.cpus.len())
    }
    fn local_tlb(&self) -> LocalTlb {
        self.m.state
    }
    fn current_pcid(&self) -> Pcid {
        self.m.tlb(self.cpu).pcid
    }
    fn now(&self) -> u64 {
        self.m.clock.load(Ordering::Relaxed)
    }
    fn execute(&self, instruction: Instruction) {
        if let Instruction::LoadCr3 { pcid, .. } = instruction
            && self.m.state.pcide
        {
            assert_ne!(
                pcid,
                Pcid::ZERO,
                "PCID 0 is never used for an address space"
            );
        }
        self.m.execute(self.cpu, instruction);
    }
    fn send_flush_ipis(&self, targets: &CpuSet, request: &FlushRequest<'_>) {
        assert!(!targets.contains(self.cpu));
        for t in targets.iter() {
            let _irq = self.m.cpus[t].irq.lock();
            self.m.ipis.fetch_add(1, Ordering::Relaxed);
            self.m.sys.handle_flush_ipi(&self.m.hw(t), request);
        }
    }
    fn broadcast(&self) -> Option<&Bcast<'m>> {
        match self.m.backend {
            Backend::Ipi => None,
            _ => Some(&self.bc),
        }
    }
    fn without_interrupts(&self, f: &mut dyn FnMut()) {
        let _irq = self.m.cpus[self.cpu].irq.lock();
        f();
    }
}
