//! A recording fake of [`TlbHardware`] for single-threaded unit tests.

use crate::{
    BroadcastBackend, BroadcastOp, CpuId, CpuSet, CpuTlbState, FlushRequest, PageTableRoot, Pcid,
    TlbConfig, TlbHardware, TlbSystem, TraceEvent, asid::Asid, instructions::LocalTlb,
};
use std::cell::{Cell, RefCell};
use std::vec::Vec;
use tlb_types::Instruction;

pub const KERNEL_ROOT: PageTableRoot = PageTableRoot::new(0x1000);

/// The PCID of ASID number `asid`, for tests that name ASIDs by number.
pub fn pcid_of(asid: u16) -> Pcid {
    Asid::new(asid).pcid()
}

/// The root at `address` (the tests' page tables are only numbers).
pub fn root(address: u64) -> PageTableRoot {
    PageTableRoot::new(address)
}

/// One hardware operation, as executed by one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A local TLB instruction, as `mm` chose it for the fake's CPU: INVPCID, and PCIDE
    /// and PGE as the machine says.
    Local(Instruction),
    Ipi(CpuSet),
    Broadcast(BroadcastOp),
    Sync,
}

pub struct Machine<'s> {
    pub sys: &'s TlbSystem<'s>,
    pub pcid: bool,
    /// CR4.PGE as the fake's CPUs report it (on unless a test turns it off: then a kernel
    /// page's flush is an INVPCID of every non-global entry, told apart from a user page's).
    pub pge: Cell<bool>,
    pub broadcast: bool,
    pub online: CpuSet,
    pub now: Cell<u64>,
    pub log: RefCell<Vec<(CpuId, Op)>>,
    pub traces: RefCell<Vec<TraceEvent>>,
}

pub struct Hw<'m, 's> {
    m: &'m Machine<'s>,
    cpu: CpuId,
    backend: Option<FakeBroadcast<'m, 's>>,
}

pub struct FakeBroadcast<'m, 's> {
    m: &'m Machine<'s>,
    cpu: CpuId,
}

pub fn cpus(n: usize) -> Vec<CpuTlbState> {
    (0..n).map(|_| CpuTlbState::new()).collect()
}

pub fn system(cpus: &[CpuTlbState], config: TlbConfig) -> TlbSystem<'_> {
    TlbSystem::new(cpus, KERNEL_ROOT, config)
}

impl<'s> Machine<'s> {
    /// A machine whose CPUs `0..sys.cpu_count()` are online and initialised.
    pub fn new(sys: &'s TlbSystem<'s>, pcid: bool, broadcast: bool) -> Self {
        let m = Self {
            sys,
            pcid,
            pge: Cell::new(true),
            broadcast,
            online: CpuSet::first_n(sys.cpu_count()),
            now: Cell::new(0),
            log: RefCell::new(Vec::new()),
            traces: RefCell::new(Vec::new()),
        };
        for cpu in 0..sys.cpu_count() {
            sys.init_cpu(&m.cpu(cpu));
        }
        m.take_log();
        m
    }

    pub fn cpu(&self, cpu: CpuId) -> Hw<'_, 's> {
        Hw {
            m: self,
            cpu,
            backend: self.broadcast.then_some(FakeBroadcast { m: self, cpu }),
        }
    }

    pub fn take_log(&self) -> Vec<(CpuId, Op)> {
        self.log.take()
    }

    fn record(&self, cpu: CpuId, op: Op) {
        self.log.borrow_mut().push((cpu, op));
    }
}

/// The operations of `log` executed by `cpu`.
pub fn ops_of(log: &[(CpuId, Op)], cpu: CpuId) -> Vec<Op> {
    log.iter()
        .filter(|(c, _)| *c == cpu)
        .map(|(_, op)| op.clone())
        .collect()
}

/// Every IPI target set in `log`.
pub fn ipis(log: &[(CpuId, Op)]) -> Vec<CpuSet> {
    log.iter()
        .filter_map(|(_, op)| match op {
            Op::Ipi(t) => Some(*t),
            _ => None,
        })
        .collect()
}

impl BroadcastBackend for FakeBroadcast<'_, '_> {
    fn flush_pcid_range(&self, pcid: Pcid, start: u64, end: u64, stride_shift: u8) {
        self.m.record(
            self.cpu,
            Op::Broadcast(BroadcastOp::PcidRange {
                pcid,
                start,
                end,
                stride_shift,
            }),
        );
    }
    fn flush_pcid(&self, pcid: Pcid) {
        self.m
            .record(self.cpu, Op::Broadcast(BroadcastOp::Pcid(pcid)));
    }
    fn flush_all_nonglobal(&self) {
        self.m
            .record(self.cpu, Op::Broadcast(BroadcastOp::AllNonGlobal));
    }
    fn flush_kernel_range(&self, start: u64, end: u64) {
        self.m.record(
            self.cpu,
            Op::Broadcast(BroadcastOp::KernelRange { start, end }),
        );
    }
    fn flush_all_including_global(&self) {
        self.m
            .record(self.cpu, Op::Broadcast(BroadcastOp::AllIncludingGlobal));
    }
    fn sync(&self) {
        self.m.record(self.cpu, Op::Sync);
    }
}

impl<'m, 's> TlbHardware for Hw<'m, 's> {
    type Broadcast = FakeBroadcast<'m, 's>;

    fn current_cpu(&self) -> CpuId {
        self.cpu
    }
    fn online_cpus(&self) -> CpuSet {
        self.m.online
    }
    fn local_tlb(&self) -> LocalTlb {
        LocalTlb {
            pcide: self.m.pcid,
            pge: self.m.pge.get(),
            invpcid: true,
        }
    }
    fn current_pcid(&self) -> Pcid {
        self.m.sys.cpu(self.cpu).loaded_asid().pcid()
    }
    fn now(&self) -> u64 {
        self.m.now.get()
    }
    fn execute(&self, instruction: Instruction) {
        self.m.record(self.cpu, Op::Local(instruction));
    }
    fn send_flush_ipis(&self, targets: &CpuSet, request: &FlushRequest<'_>) {
        assert!(!targets.contains(self.cpu), "IPI to self");
        self.m.record(self.cpu, Op::Ipi(*targets));
        for t in targets.iter() {
            self.m.sys.handle_flush_ipi(&self.m.cpu(t), request);
        }
    }
    fn broadcast(&self) -> Option<&Self::Broadcast> {
        self.backend.as_ref()
    }
    fn without_interrupts(&self, f: &mut dyn FnMut()) {
        f()
    }
    fn trace(&self, event: &TraceEvent) {
        self.m.traces.borrow_mut().push(*event);
    }
}
