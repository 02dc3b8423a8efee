//! The random workload each simulated CPU runs: user accesses, map / unmap / mprotect /
//! free page tables, deferred reclaim batches, kernel mappings, context switches, lazy
//! kernel threads with speculative page walks, and process exit and creation (which recycles
//! global ASIDs), all through the real `mm` entry points.

use crate::hw::{Backend, Hw, KernelFaults, Machine};
use crate::sched::{Sched, splitmix, yield_now};
use crate::world::PageTable;
use mm::{
    AddressSpaceTlb, CounterSnapshot, CpuTlbState, FIRST_GLOBAL_ASID, Fault, FlushBatch,
    FlushRange, PageTableRoot, TlbConfig, TlbHardware, TlbSystem, instructions::LocalTlb,
};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const KERNEL_ROOT: PageTableRoot = PageTableRoot::new(0x1000);
const KERNEL_VPN: u64 = 0xffff_8000_0000_0000 >> 12;
const KERNEL_PAGES: u64 = 8;

#[derive(Clone, Debug)]
pub struct Config {
    pub cpus: usize,
    pub spaces: usize,
    pub ops_per_cpu: u64,
    /// CR4.PCIDE.
    pub pcid: bool,
    /// CR4.PGE (kernel pages cached global) as the kernel tells `mm`.
    pub pge: bool,
    /// Whether the CPUs have INVPCID.
    pub invpcid: bool,
    pub backend: Backend,
    pub faults: Vec<Fault>,
    pub kernel_faults: KernelFaults,
    /// Hand-over probability per scheduling point, per 1024.
    pub switch_per_1024: u64,
    pub global_asid_limit: u16,
    /// Whether processes exit and are replaced (recycles global ASIDs).
    pub churn: bool,
    /// Pages per 2 MiB region the workload touches (fewer: more TLB hits).
    pub hot_pages: u64,
    /// 2 MiB regions (page-table pages) per address space.
    pub regions: u64,
    pub mix: Mix,
}

/// Which operations the CPUs choose from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    /// Everything (see the module docs).
    Full,
    /// Only accesses, single-page map/unmap and context switches: the operations of the
    /// switch-versus-flush race, without the full flushes that would hide it.
    SwitchRace,
}

impl Config {
    pub fn new(backend: Backend, pcid: bool) -> Self {
        Self {
            cpus: 4,
            spaces: 3,
            ops_per_cpu: 2500,
            pcid,
            pge: true,
            invpcid: pcid,
            backend,
            faults: Vec::new(),
            kernel_faults: KernelFaults::default(),
            switch_per_1024: 48,
            global_asid_limit: FIRST_GLOBAL_ASID.get() + 2,
            churn: true,
            hot_pages: 12,
            regions: 4,
            mix: Mix::Full,
        }
    }
}

pub struct Outcome {
    pub violations: Vec<String>,
    pub panicked: bool,
    pub ops: u64,
    pub points: u64,
    pub ipis: u64,
    pub invlpgbs: u64,
    pub checks: u64,
    pub counters: CounterSnapshot,
}

struct Space {
    tlb: AddressSpaceTlb,
    pt: Arc<PageTable>,
    dying: AtomicBool,
    /// CPUs whose current or last user thread belongs to this space (the kernel's
    /// reference count: a lazy CPU keeps its address space alive).
    users: AtomicUsize,
}

struct Shared {
    m: Machine,
    spaces: Vec<Mutex<Arc<Space>>>,
    next_root: AtomicU64,
    killing: AtomicBool,
    ops: AtomicU64,
}

impl Shared {
    fn new_space(&self) -> Arc<Space> {
        let root = self.next_root.fetch_add(0x1000, Ordering::Relaxed);
        let tlb = self.m.sys.new_address_space(PageTableRoot::new(root));
        let pt = Arc::new(PageTable {
            ctx: tlb.ctx_id(),
            inner: Mutex::new(Default::default()),
        });
        self.m.world.roots.lock().unwrap().insert(root, pt.clone());
        Arc::new(Space {
            tlb,
            pt,
            dying: AtomicBool::new(false),
            users: AtomicUsize::new(0),
        })
    }

    fn space(&self, i: usize) -> Arc<Space> {
        self.spaces[i].lock().unwrap().clone()
    }
}

pub fn run(cfg: &Config, seed: u64) -> Outcome {
    let states: &'static [CpuTlbState] = Box::leak(
        (0..cfg.cpus)
            .map(|_| CpuTlbState::new())
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    let config = TlbConfig {
        promotion_threshold: 2,
        promotion_interval: 0,
        trim_interval: 40,
        global_asid_limit: cfg.global_asid_limit,
        ..TlbConfig::default()
    };
    let sys = TlbSystem::new(states, KERNEL_ROOT, config);
    for &f in &cfg.faults {
        sys.faults().set(f, true);
    }
    let state = LocalTlb {
        pcide: cfg.pcid,
        pge: cfg.pge,
        invpcid: cfg.invpcid,
    };
    let m = Machine::new(sys, state, cfg.backend, cfg.kernel_faults);
    m.world.roots.lock().unwrap().insert(
        KERNEL_ROOT.address(),
        Arc::new(PageTable {
            ctx: mm::CTX_KERNEL,
            inner: Mutex::new(Default::default()),
        }),
    );
    {
        let mut k = m.world.kernel.lock().unwrap();
        for i in 0..KERNEL_PAGES {
            k.insert(KERNEL_VPN + i, m.world.oracle.new_mapping());
        }
    }
    let shared = Shared {
        m,
        spaces: Vec::new(),
        next_root: AtomicU64::new(0x10_0000),
        killing: AtomicBool::new(false),
        ops: AtomicU64::new(0),
    };
    let spaces = (0..cfg.spaces)
        .map(|_| Mutex::new(shared.new_space()))
        .collect();
    let shared = Shared { spaces, ..shared };

    let sched = Sched::new(cfg.cpus, seed, cfg.switch_per_1024);
    let panicked = AtomicBool::new(false);
    std::thread::scope(|s| {
        for cpu in 0..cfg.cpus {
            let (shared, sched, panicked) = (&shared, &sched, &panicked);
            s.spawn(move || {
                sched.run(cpu, panicked, || Cpu::new(shared, cpu, seed, cfg).run());
            });
        }
    });
    let m = &shared.m;
    Outcome {
        violations: m.world.oracle.violations(),
        panicked: panicked.load(Ordering::SeqCst),
        ops: shared.ops.load(Ordering::Relaxed),
        points: sched.points(),
        ipis: m.ipis.load(Ordering::Relaxed),
        invlpgbs: m.invlpgbs.load(Ordering::Relaxed),
        checks: m.world.oracle.checks.load(Ordering::Relaxed),
        counters: m.sys.total_counters(),
    }
}

struct Cpu<'a> {
    s: &'a Shared,
    hw: Hw<'a>,
    me: usize,
    rng: u64,
    cfg: &'a Config,
    /// The address space of the user thread this CPU runs or last ran.
    user: Option<Arc<Space>>,
    lazy: bool,
}

impl<'a> Cpu<'a> {
    fn new(s: &'a Shared, me: usize, seed: u64, cfg: &'a Config) -> Self {
        let mut rng =
            seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ (me as u64 + 1).wrapping_mul(0x9e37_79b9);
        splitmix(&mut rng);
        Self {
            s,
            hw: s.m.hw(me),
            me,
            rng,
            cfg,
            user: None,
            lazy: false,
        }
    }

    fn rand(&mut self, n: u64) -> u64 {
        splitmix(&mut self.rng) % n
    }

    fn sys(&self) -> &'a TlbSystem<'static> {
        &self.s.m.sys
    }

    fn irq_off(&self, f: impl FnOnce()) {
        let mut f = Some(f);
        self.hw.without_interrupts(&mut || (f.take().unwrap())());
    }

    fn run(mut self) {
        self.irq_off(|| self.sys().init_cpu(&self.hw));
        let oracle = &self.s.m.world.oracle;
        for _ in 0..self.cfg.ops_per_cpu {
            if oracle.stopped() {
                break;
            }
            self.s.m.clock.fetch_add(1, Ordering::Relaxed);
            self.s.ops.fetch_add(1, Ordering::Relaxed);
            self.step();
        }
        self.go_kernel();
    }

    fn go_kernel(&mut self) {
        let sys = self.sys();
        self.irq_off(|| sys.switch_mm(&self.hw, sys.kernel_address_space()));
        self.drop_user();
        self.lazy = false;
    }

    fn drop_user(&mut self) {
        if let Some(old) = self.user.take() {
            old.users.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Runs a thread of `space` (unless it is exiting). Takes the reference first and checks
    /// `dying` after, so the exit path (which sets `dying`, then waits for no references)
    /// cannot miss us.
    fn switch_to(&mut self, space: Arc<Space>) {
        let same = self.user.as_ref().is_some_and(|u| Arc::ptr_eq(u, &space));
        if !same {
            space.users.fetch_add(1, Ordering::SeqCst);
            if space.dying.load(Ordering::SeqCst) {
                space.users.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        }
        let sys = self.sys();
        self.irq_off(|| sys.switch_mm(&self.hw, &space.tlb));
        if !same {
            self.drop_user();
            self.user = Some(space);
        }
        self.lazy = false;
    }

    fn live_space(&mut self) -> Option<Arc<Space>> {
        let i = self.rand(self.cfg.spaces as u64) as usize;
        let sp = self.s.space(i);
        (!sp.dying.load(Ordering::SeqCst)).then_some(sp)
    }

    fn random_vpn(&mut self) -> u64 {
        self.rand(self.cfg.regions) * 512 + self.rand(self.cfg.hot_pages)
    }

    fn step(&mut self) {
        if self
            .user
            .as_ref()
            .is_some_and(|u| u.dying.load(Ordering::SeqCst))
        {
            self.go_kernel();
        }
        if self.user.is_none() {
            match self.live_space() {
                Some(sp) => self.switch_to(sp),
                None => return,
            }
        }
        let r = self.rand(100);
        if self.lazy {
            match r {
                0..30 => {
                    let vpn = self.random_vpn();
                    self.s.m.speculate(self.me, vpn);
                }
                30..55 => {
                    let u = self.user.clone().unwrap();
                    self.switch_to(u);
                }
                55..68 => {
                    if let Some(sp) = self.live_space() {
                        self.switch_to(sp);
                    }
                }
                68..80 => self.kernel_access(),
                80..86 => self.reclaim(),
                86..88 => self.s.m.background_progress(&mut self.rng),
                _ => {
                    let vpn = self.random_vpn();
                    self.s.m.speculate(self.me, vpn);
                }
            }
            return;
        }
        let u = self.user.clone().unwrap();
        if self.cfg.mix == Mix::SwitchRace {
            let vpn = self.random_vpn();
            match r {
                0..40 => self.s.m.access(self.me, vpn),
                40..55 => self.map(&u, vpn, 1),
                55..70 => self.unmap(&u, vpn, 1),
                _ => {
                    if let Some(sp) = self.live_space() {
                        self.switch_to(sp);
                    }
                }
            }
            return;
        }
        match r {
            0..38 => {
                let vpn = self.random_vpn();
                self.s.m.access(self.me, vpn);
            }
            38..47 => {
                let vpn = self.random_vpn();
                let n = 1 + self.rand(6);
                self.map(&u, vpn, n);
            }
            47..54 => {
                let vpn = self.random_vpn();
                let n = if self.rand(4) == 0 {
                    30 + self.rand(12)
                } else {
                    1 + self.rand(4)
                };
                self.unmap(&u, vpn, n);
            }
            54..58 => {
                let vpn = self.random_vpn();
                self.mprotect(&u, vpn);
            }
            58..60 => {
                let region = self.rand(self.cfg.regions);
                self.free_tables(&u, region);
            }
            60..63 => self.reclaim(),
            63..71 => {
                if let Some(sp) = self.live_space() {
                    self.switch_to(sp);
                }
            }
            71..77 => {
                let sys = self.sys();
                self.irq_off(|| sys.enter_lazy(&self.hw));
                self.lazy = true;
            }
            77..82 => self.kernel_access(),
            82..83 => self.kernel_remap(),
            83..84 if self.cfg.churn => self.churn(),
            84..86 => self.s.m.background_progress(&mut self.rng),
            _ => {
                let vpn = self.random_vpn();
                self.s.m.access(self.me, vpn);
            }
        }
    }

    fn map(&mut self, sp: &Space, vpn: u64, n: u64) {
        let oracle = &self.s.m.world.oracle;
        let mut t = sp.pt.inner.lock().unwrap();
        for v in vpn..vpn + n {
            t.tables.entry(v >> 9).or_insert_with(|| oracle.new_table());
            t.ptes.entry(v).or_insert_with(|| oracle.new_mapping());
        }
    }

    fn unmap(&mut self, sp: &Space, vpn: u64, n: u64) {
        let removed: Vec<u64> = {
            let mut t = sp.pt.inner.lock().unwrap();
            (vpn..vpn + n).filter_map(|v| t.ptes.remove(&v)).collect()
        };
        if removed.is_empty() {
            return;
        }
        let range = FlushRange::Range {
            start: vpn << 12,
            end: (vpn + n) << 12,
            stride_shift: 12,
        };
        self.sys()
            .flush_tlb_mm_range(&self.hw, &sp.tlb, range, false);
        self.s.m.world.oracle.kill_mappings(&removed);
    }

    fn mprotect(&mut self, sp: &Space, vpn: u64) {
        let oracle = &self.s.m.world.oracle;
        let old = {
            let mut t = sp.pt.inner.lock().unwrap();
            match t.ptes.get_mut(&vpn) {
                Some(id) => std::mem::replace(id, oracle.new_mapping()),
                None => return,
            }
        };
        let range = FlushRange::Range {
            start: vpn << 12,
            end: (vpn + 1) << 12,
            stride_shift: 12,
        };
        self.sys()
            .flush_tlb_mm_range(&self.hw, &sp.tlb, range, false);
        oracle.kill_mappings(&[old]);
    }

    fn free_tables(&mut self, sp: &Space, region: u64) {
        let (mappings, table) = {
            let mut t = sp.pt.inner.lock().unwrap();
            let Some(table) = t.tables.remove(&region) else {
                return;
            };
            let vpns: Vec<u64> = t
                .ptes
                .range(region * 512..(region + 1) * 512)
                .map(|(&v, _)| v)
                .collect();
            (
                vpns.into_iter()
                    .filter_map(|v| t.ptes.remove(&v))
                    .collect::<Vec<_>>(),
                table,
            )
        };
        // A small range, so that partial flushes of freed tables are exercised too.
        let range = FlushRange::Range {
            start: (region * 512) << 12,
            end: (region * 512 + self.cfg.hot_pages) << 12,
            stride_shift: 12,
        };
        self.sys()
            .flush_tlb_mm_range(&self.hw, &sp.tlb, range, true);
        let oracle = &self.s.m.world.oracle;
        oracle.kill_mappings(&mappings);
        oracle.kill_tables(&[table]);
    }

    fn reclaim(&mut self) {
        let mut batch = FlushBatch::new();
        let mut removed = Vec::new();
        for _ in 0..1 + self.rand(2) {
            let i = self.rand(self.cfg.spaces as u64) as usize;
            let sp = self.s.space(i);
            let mut got = Vec::new();
            {
                let mut t = sp.pt.inner.lock().unwrap();
                for _ in 0..1 + self.rand(6) {
                    let v = self.random_vpn();
                    got.extend(t.ptes.remove(&v));
                }
            }
            if !got.is_empty() {
                self.sys().batch_add_pending(&mut batch, &sp.tlb);
                removed.extend(got);
            }
        }
        self.sys().batch_flush(&self.hw, &mut batch);
        self.s.m.world.oracle.kill_mappings(&removed);
    }

    fn kernel_access(&mut self) {
        let vpn = KERNEL_VPN + self.rand(KERNEL_PAGES);
        self.s.m.access_kernel(self.me, vpn);
    }

    fn kernel_remap(&mut self) {
        let vpn = KERNEL_VPN + self.rand(KERNEL_PAGES);
        let oracle = &self.s.m.world.oracle;
        let old = {
            let mut k = self.s.m.world.kernel.lock().unwrap();
            std::mem::replace(k.get_mut(&vpn).unwrap(), oracle.new_mapping())
        };
        // Sometimes a range above the ceiling: the flush-everything path.
        let pages = if self.rand(4) == 0 { 40 } else { 1 };
        self.sys()
            .flush_kernel_range(&self.hw, vpn << 12, (vpn + pages) << 12);
        oracle.kill_mappings(&[old]);
    }

    /// A process exits and another starts in its slot.
    fn churn(&mut self) {
        if self.s.killing.swap(true, Ordering::SeqCst) {
            return;
        }
        let i = self.rand(self.cfg.spaces as u64) as usize;
        let victim = self.s.space(i);
        victim.dying.store(true, Ordering::SeqCst);
        self.go_kernel();
        let sys = self.sys();
        let n = self.cfg.cpus;
        while victim.users.load(Ordering::SeqCst) != 0 {
            if self.s.m.world.oracle.stopped() {
                return;
            }
            yield_now();
        }
        assert!((0..n).all(|c| sys.cpu(c).loaded_ctx() != victim.tlb.ctx_id()));
        sys.release_address_space(&victim.tlb);
        let (mappings, tables): (Vec<u64>, Vec<u64>) = {
            let t = victim.pt.inner.lock().unwrap();
            (
                t.ptes.values().copied().collect(),
                t.tables.values().copied().collect(),
            )
        };
        let oracle = &self.s.m.world.oracle;
        oracle.kill_mappings(&mappings);
        oracle.kill_tables(&tables);
        *self.s.spaces[i].lock().unwrap() = self.s.new_space();
        self.s.killing.store(false, Ordering::SeqCst);
    }
}
