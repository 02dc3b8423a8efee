//! The simulated machine the loom scenarios run `mm` on: three CPUs, two user address spaces,
//! a TLB model that knows how old every cached translation is, INVLPGB, and the kernel's
//! cross-call (IPI) protocol.
//!
//! Everything `mm` shares between CPUs is `mm`'s own loom atomics. The hardware around it is
//! modelled here:
//! * **Page tables and TLBs** live in a plain `std` mutex ([`Machine`]): per address space,
//!   the version of its page tables (the generation its next bump will produce: a test
//!   "changes a PTE" by raising it, then calls the real flush); per CPU and PCID, the oldest
//!   page-table version its TLB may still hold translations from. A CR3 load without flush
//!   keeps what the PCID holds, a flush refills from the current page tables. Page walks are
//!   thus sequentially consistent (true on x86, where the flusher's locked increment drains
//!   its store buffer); only `mm`'s own protocol runs on the weak C11 model. Every access to
//!   this state also touches one loom atomic (`bus`), so loom's partial-order reduction sees
//!   hardware operations of different CPUs as dependent and tries both orders.
//! * **INVLPGB** takes effect on every CPU at once (`sync` has nothing left to wait for).
//! * **IPIs** are the kernel's cross-call protocol, abstractly: the sender writes the request
//!   into the target's mailbox, sets the target's bit in a pending set with Release, and
//!   waits (servicing its own IPIs) until every bit it set is clear, loading with Acquire;
//!   a target, at every point where its interrupts are on, handles a pending request and
//!   clears its bit with Release. `mm` has no code for this (it is the kernel's), so
//!   [`Handshake`] can weaken each half for the handshake scenario's mutations. The
//!   request itself travels through the `std` mailbox, as the kernel passes a pointer.
//! * **The unmapped page** is a loom `UnsafeCell`: a CPU that still holds a translation
//!   older than the unmap "reads" it, and the flusher "frees" it once its flush has
//!   returned. If the flusher's return does not happen after every such read, loom reports
//!   a causality violation (a use after free through a stale TLB entry).
//!
//! [`World::check`] is the oracle run after the threads are joined: no CPU may run an
//! address space on a PCID holding translations older than the last flush that returned,
//! no global PCID may be stale anywhere, and every ASID slot must be at least as fresh as
//! `mm` believes it is (otherwise a later switch would skip a needed flush).

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use mm::{
    AddressSpaceTlb, Asid, BroadcastBackend, CpuId, CpuSet, CpuTlbState, DYN_ASIDS, FlushRange,
    FlushRequest, FlushTarget, Instruction, PageTableRoot, Pcid, TlbConfig, TlbHardware, TlbSystem,
    instructions::LocalTlb,
};
use std::collections::HashMap;
use std::sync::Mutex;

/// Simulated CPUs (one more than most scenarios use, so a promoter can be separate).
pub const CPUS: usize = 3;
const KERNEL_ROOT: PageTableRoot = PageTableRoot::new(0x1000);
const MM_ROOT: PageTableRoot = PageTableRoot::new(0x2000);
const OTHER_ROOT: PageTableRoot = PageTableRoot::new(0x3000);

loom::lazy_static! {
    // Re-created for every loom execution (loom's lazy statics are per execution), which
    // gives the threads `'static` references without leaking.
    static ref CPU_STATES: Vec<CpuTlbState> = (0..CPUS).map(|_| CpuTlbState::new()).collect();
    static ref WORLD: World = World::new();
}

/// The machine of one loom execution.
pub struct World {
    pub sys: TlbSystem<'static>,
    /// The address space whose page is unmapped and flushed.
    pub mm: AddressSpaceTlb,
    /// Somewhere else for a CPU to be.
    pub other: AddressSpaceTlb,
    /// Touched by every hardware-state access (see the module docs).
    bus: AtomicU64,
    /// The cross-call pending set: bit `c` is set while CPU `c` has a request to handle.
    pending: AtomicU64,
    /// Set (Release) by the flushing thread when it is done; the others service IPIs until then.
    finished: AtomicBool,
    /// The frame `mm`'s page mapped before the unmap (see the module docs).
    page: UnsafeCell<u64>,
    hw: Mutex<Machine>,
}

/// Page tables, TLB contents and mailboxes (see the module docs).
#[derive(Default)]
struct Machine {
    /// Page-table version per context id.
    pages: HashMap<u64, u64>,
    /// Highest version whose flush has returned, per context id.
    done: HashMap<u64, u64>,
    /// Per CPU: what is in CR3 (context id, PCID).
    current: [Option<(u64, Pcid)>; CPUS],
    /// Per CPU and PCID: (context id, oldest page-table version that may be cached).
    held: [HashMap<Pcid, (u64, u64)>; CPUS],
    mailbox: [Option<Msg>; CPUS],
    /// Version from which on `mm`'s page is no longer mapped.
    unmapped_at: Option<u64>,
    /// Whether a discard has taken `mm`'s page-table entry out (scenario 8).
    entry_taken: bool,
    violations: Vec<String>,
}

/// A flush request as it travels to another CPU.
#[derive(Clone, Copy)]
struct Msg {
    target: MsgTarget,
    range: FlushRange,
    freed_tables: bool,
    trim: bool,
    initiator: CpuId,
}

#[derive(Clone, Copy)]
enum MsgTarget {
    AddressSpace { ctx: u64, new_gen: u64 },
    LoadedUser,
    Kernel,
}

/// How the simulated kernel's cross-call waits for its targets (mutations of the handshake).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handshake {
    /// Targets clear their bit with Release after their work; the sender loads with Acquire.
    ReleaseAcquire,
    /// Mutation: targets clear their bit with a relaxed RMW.
    RelaxedAck,
    /// Mutation: the sender waits with relaxed loads.
    RelaxedWait,
    /// Mutation: the sender does not wait at all.
    NoWait,
    /// Mutation of the halting wait (scenario 7): the caller halts without the fence
    /// between storing its "halted" flag and loading the answers owed.
    HaltWithoutCallerFence,
    /// Mutation of the halting wait: the last target wakes without the fence between
    /// counting its answer and loading the caller's flag.
    HaltWithoutTargetFence,
}

/// Per-scenario hardware configuration.
#[derive(Clone, Copy, Debug)]
pub struct Cfg {
    pub invlpgb: bool,
    pub handshake: Handshake,
}

impl Cfg {
    pub const IPI: Cfg = Cfg {
        invlpgb: false,
        handshake: Handshake::ReleaseAcquire,
    };
    pub const INVLPGB: Cfg = Cfg {
        invlpgb: true,
        handshake: Handshake::ReleaseAcquire,
    };
}

impl World {
    fn new() -> Self {
        let config = TlbConfig {
            // Promotion happens only where a scenario asks for it.
            promotion_threshold: 64,
            ..TlbConfig::default()
        };
        let sys = TlbSystem::new(&CPU_STATES, KERNEL_ROOT, config);
        let mm = sys.new_address_space(MM_ROOT);
        let other = sys.new_address_space(OTHER_ROOT);
        let mut machine = Machine::default();
        machine.pages.insert(mm.ctx_id(), mm.tlb_gen());
        machine.pages.insert(other.ctx_id(), other.tlb_gen());
        let kernel = sys.kernel_address_space();
        machine.pages.insert(kernel.ctx_id(), kernel.tlb_gen());
        World {
            sys,
            mm,
            other,
            bus: AtomicU64::new(0),
            pending: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            page: UnsafeCell::new(0),
            hw: Mutex::new(machine),
        }
    }

    /// This execution's world, with every CPU brought up (call first, in the model thread).
    pub fn boot() -> &'static World {
        let w: &'static World = &WORLD;
        for cpu in 0..CPUS {
            w.sys.init_cpu(&w.setup(cpu, Cfg::IPI));
        }
        w
    }

    /// Hardware handle for `cpu` in a racing thread.
    pub fn cpu(&'static self, cpu: CpuId, cfg: Cfg) -> Hw {
        Hw {
            w: self,
            cpu,
            cfg,
            synchronous: false,
            invlpgb: cfg.invlpgb.then_some(Invlpgb { w: self }),
        }
    }

    /// Hardware handle for `cpu` during single-threaded setup: IPIs are handled at once.
    pub fn setup(&'static self, cpu: CpuId, cfg: Cfg) -> Hw {
        Hw {
            synchronous: true,
            ..self.cpu(cpu, cfg)
        }
    }

    fn machine<R>(&self, f: impl FnOnce(&mut Machine) -> R) -> R {
        self.bus.fetch_add(1, Ordering::Relaxed);
        f(&mut self.hw.lock().unwrap())
    }

    fn ctx_of_root(&self, root: PageTableRoot) -> u64 {
        match root {
            KERNEL_ROOT => self.sys.kernel_address_space().ctx_id(),
            MM_ROOT => self.mm.ctx_id(),
            OTHER_ROOT => self.other.ctx_id(),
            _ => panic!("unknown root {root}"),
        }
    }

    fn space(&'static self, ctx: u64) -> &'static AddressSpaceTlb {
        [&self.mm, &self.other, self.sys.kernel_address_space()]
            .into_iter()
            .find(|s| s.ctx_id() == ctx)
            .expect("known context")
    }

    /// Changes `mm`'s page tables (unmaps its page): call right before the real flush.
    /// Returns the new page-table version, which is the generation the flush will produce.
    pub fn unmap_page(&self) -> u64 {
        let ctx = self.mm.ctx_id();
        self.machine(|m| {
            let v = m.pages.get_mut(&ctx).unwrap();
            *v += 1;
            m.unmapped_at = Some(*v);
            *v
        })
    }

    /// A discard takes `mm`'s page-table entry out by an atomic swap (scenario 8): the first
    /// one gets the frame and unmaps the page, a later one swaps an empty entry for an empty
    /// one. One step on the page tables, which are sequentially consistent in this model, as
    /// the kernel's swap of the entry is. Returns whether this one took the frame, and the
    /// new page-table version: each swap counts as a change, since each is followed by a
    /// flush that bumps the generation, and a version is the generation its flush produces.
    pub fn take_page_entry(&self) -> (bool, u64) {
        let ctx = self.mm.ctx_id();
        self.machine(|m| {
            let v = m.pages.get_mut(&ctx).unwrap();
            *v += 1;
            let version = *v;
            let took = !m.entry_taken;
            if took {
                m.entry_taken = true;
                m.unmapped_at = Some(version);
            }
            (took, version)
        })
    }

    /// Setup: CPU `cpu` changes some other page of `mm` and flushes it synchronously.
    pub fn setup_flush(&'static self, cpu: CpuId, cfg: Cfg) {
        let ctx = self.mm.ctx_id();
        let version = self.machine(|m| {
            let v = m.pages.get_mut(&ctx).unwrap();
            *v += 1;
            *v
        });
        self.sys.flush_tlb_mm(&self.setup(cpu, cfg), &self.mm);
        self.flush_returned(version);
    }

    /// Records that the flush of `mm` up to version `version` has returned.
    pub fn flush_returned(&self, version: u64) {
        let ctx = self.mm.ctx_id();
        self.machine(|m| {
            let d = m.done.entry(ctx).or_insert(0);
            *d = (*d).max(version);
        });
    }

    /// The flusher frees the unmapped page (after its flush returned).
    pub fn free_page(&self) {
        self.page.with_mut(|_| ());
    }

    /// The flushing thread is done; other CPUs may stop servicing IPIs.
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Release);
    }

    /// The oracle (module docs); call after joining every thread.
    pub fn check(&self) {
        let mut problems = Vec::new();
        let m = self.hw.lock().unwrap();
        problems.extend(m.violations.iter().cloned());
        let done = |ctx: u64| m.done.get(&ctx).copied().unwrap_or(0);
        for cpu in 0..CPUS {
            if let Some((ctx, pcid)) = m.current[cpu]
                && let Some(&(held_ctx, version)) = m.held[cpu].get(&pcid)
                && held_ctx == ctx
                && version < done(ctx)
            {
                problems.push(format!(
                    "stale translation: CPU {cpu} runs context {ctx} on PCID {pcid} with \
                     translations of version {version}, but the flush to {} returned",
                    done(ctx)
                ));
            }
            let st = self.sys.cpu(cpu);
            for slot in 0..DYN_ASIDS {
                let (ctx, believed) = st.slot(slot);
                let pcid = Asid::of_slot(slot).pcid();
                if let Some(&(held_ctx, version)) = m.held[cpu].get(&pcid)
                    && held_ctx == ctx
                    && version < believed
                {
                    problems.push(format!(
                        "stale translation: CPU {cpu} slot {slot} claims context {ctx} is \
                         current to generation {believed}, but PCID {pcid} holds version {version}"
                    ));
                }
            }
            for space in [&self.mm, &self.other] {
                if let Some(asid) = space.global_asid()
                    && let Some(&(held_ctx, version)) = m.held[cpu].get(&asid.pcid())
                    && held_ctx == space.ctx_id()
                    && version < done(held_ctx)
                {
                    problems.push(format!(
                        "stale translation: CPU {cpu} global PCID {} of context {held_ctx} \
                         holds version {version}, but the flush to {} returned",
                        asid.pcid(),
                        done(held_ctx)
                    ));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

impl Machine {
    fn refill(&mut self, cpu: CpuId, pcid: Pcid) {
        if let Some((ctx, current)) = self.current[cpu]
            && current == pcid
        {
            let version = self.pages.get(&ctx).copied().unwrap_or(0);
            self.held[cpu].insert(pcid, (ctx, version));
        } else {
            self.held[cpu].remove(&pcid);
        }
    }

    fn flush_all(&mut self, cpu: CpuId) {
        let pcids: Vec<Pcid> = self.held[cpu].keys().copied().collect();
        for pcid in pcids {
            self.refill(cpu, pcid);
        }
    }
}

/// One CPU's view of the hardware (`mm`'s [`TlbHardware`]).
#[derive(Clone, Copy)]
pub struct Hw {
    w: &'static World,
    cpu: CpuId,
    cfg: Cfg,
    synchronous: bool,
    invlpgb: Option<Invlpgb>,
}

impl Hw {
    /// An interrupt window: handle a pending flush IPI, if any.
    pub fn interrupts_on(&self) {
        let bit = 1u64 << self.cpu;
        if self.w.pending.load(Ordering::Acquire) & bit == 0 {
            return;
        }
        let msg = self
            .w
            .machine(|m| m.mailbox[self.cpu].take())
            .expect("mailbox");
        let target = match msg.target {
            MsgTarget::AddressSpace { ctx, new_gen } => FlushTarget::AddressSpace {
                mm: self.w.space(ctx),
                new_gen,
            },
            MsgTarget::LoadedUser => FlushTarget::LoadedUser,
            MsgTarget::Kernel => FlushTarget::Kernel,
        };
        let request = FlushRequest {
            target,
            range: msg.range,
            freed_tables: msg.freed_tables,
            trim: msg.trim,
            initiator: msg.initiator,
        };
        self.w.sys.handle_flush_ipi(self, &request);
        let ack = match self.cfg.handshake {
            Handshake::RelaxedAck => Ordering::Relaxed,
            _ => Ordering::Release,
        };
        self.w.pending.fetch_and(!bit, ack);
    }

    /// Marks the start of a racing operation. This is only a hint for loom's partial-order
    /// reduction, which remembers just the *last* access to each atomic: a thread's own load
    /// (say, of the global ASID under the allocator lock) can hide another thread's earlier
    /// racing load, and then loom never tries running this thread before that load. A
    /// relaxed RMW on the shared `bus` (no synchronization) makes every thread's start
    /// dependent on every other thread's hardware accesses, so loom tries those orders.
    pub fn begin(&self) {
        self.w.bus.fetch_add(1, Ordering::Relaxed);
    }

    /// Interrupts on until the flushing thread has finished.
    pub fn serve_until_finished(&self) {
        while !self.w.finished.load(Ordering::Acquire) {
            self.interrupts_on();
            loom::thread::yield_now();
        }
        self.interrupts_on();
    }

    /// Whether this CPU runs `mm` with a translation of its page from before the unmap.
    fn holds_unmapped_page(&self) -> bool {
        self.w.machine(|m| {
            let Some((ctx, pcid)) = m.current[self.cpu] else {
                return false;
            };
            let unmapped = m.unmapped_at.unwrap_or(u64::MAX);
            ctx == self.w.mm.ctx_id()
                && m.held[self.cpu]
                    .get(&pcid)
                    .is_some_and(|&(c, v)| c == ctx && v < unmapped)
        })
    }

    /// User code touches `mm`'s page: possible only through a translation from before the
    /// unmap, which is then a read of the frame the flusher will free.
    pub fn touch_page(&self) {
        if self.holds_unmapped_page() {
            self.w.page.with(|_| ());
        }
    }

    /// A system call that revoked `mm`'s page returns to user code on this CPU, which may
    /// touch the page at once: it must find it gone, so a translation from before the unmap
    /// is recorded as a violation (see [`World::check`]).
    pub fn return_after_revoking(&self, call: &str) {
        if self.holds_unmapped_page() {
            let cpu = self.cpu;
            self.w.machine(|m| {
                m.violations.push(format!(
                    "stale translation: CPU {cpu} returns from {call} still translating the \
                     page it revoked"
                ))
            });
        }
    }
}

impl TlbHardware for Hw {
    type Broadcast = Invlpgb;

    fn current_cpu(&self) -> CpuId {
        self.cpu
    }
    fn online_cpus(&self) -> CpuSet {
        CpuSet::first_n(CPUS)
    }
    /// A CPU with everything: `mm` chooses INVLPG, INVPCID and CR3 loads with a PCID.
    fn local_tlb(&self) -> LocalTlb {
        LocalTlb {
            pcide: true,
            pge: true,
            invpcid: true,
        }
    }
    /// Read straight from the machine (not through `machine()`, which is a scheduling point
    /// loom would explore); with INVPCID it is never asked for anyway.
    fn current_pcid(&self) -> Pcid {
        self.w.hw.lock().unwrap().current[self.cpu].map_or(Pcid::ZERO, |(_, pcid)| pcid)
    }
    fn now(&self) -> u64 {
        0
    }
    /// The instructions at their meaning on this machine (which instruction `mm` chooses is
    /// `mm::instructions::select`'s, checked by the host model): one page per address space,
    /// so an INVLPG refreshes the current PCID; kernel pages are not modelled.
    fn execute(&self, instruction: Instruction) {
        let cpu = self.cpu;
        match instruction {
            Instruction::Invlpg { .. } | Instruction::ReloadCr3 => self.w.machine(|m| {
                if let Some((_, pcid)) = m.current[cpu] {
                    m.refill(cpu, pcid);
                }
            }),
            Instruction::InvpcidAddress { pcid, .. } | Instruction::InvpcidSingle { pcid } => {
                self.w.machine(|m| m.refill(cpu, pcid))
            }
            Instruction::InvpcidAllNonGlobal | Instruction::InvpcidAll | Instruction::TogglePge => {
                self.w.machine(|m| m.flush_all(cpu))
            }
            Instruction::LoadCr3 { root, pcid, keep } => {
                let ctx = self.w.ctx_of_root(root);
                self.w.machine(|m| {
                    m.current[cpu] = Some((ctx, pcid));
                    match m.held[cpu].get(&pcid) {
                        Some(&(held, _)) if keep && held != ctx => m.violations.push(format!(
                            "CPU {cpu} loads context {ctx} on PCID {pcid} without flush, \
                             but the PCID holds context {held}"
                        )),
                        Some(_) if keep => {}
                        _ => m.refill(cpu, pcid),
                    }
                });
            }
        }
    }

    fn send_flush_ipis(&self, targets: &CpuSet, request: &FlushRequest<'_>) {
        if self.synchronous {
            for t in targets.iter() {
                let hw = Hw { cpu: t, ..*self };
                self.w.sys.handle_flush_ipi(&hw, request);
            }
            return;
        }
        let msg = Msg {
            target: match request.target {
                FlushTarget::AddressSpace { mm, new_gen } => MsgTarget::AddressSpace {
                    ctx: mm.ctx_id(),
                    new_gen,
                },
                FlushTarget::LoadedUser => MsgTarget::LoadedUser,
                FlushTarget::Kernel => MsgTarget::Kernel,
            },
            range: request.range,
            freed_tables: request.freed_tables,
            trim: request.trim,
            initiator: request.initiator,
        };
        let mut bits = 0u64;
        self.w.machine(|m| {
            for t in targets.iter() {
                assert!(
                    m.mailbox[t].is_none(),
                    "model limit: one request per target"
                );
                m.mailbox[t] = Some(msg);
                bits |= 1 << t;
            }
        });
        self.w.pending.fetch_or(bits, Ordering::Release);
        let wait = match self.cfg.handshake {
            Handshake::NoWait => return,
            Handshake::RelaxedWait => Ordering::Relaxed,
            _ => Ordering::Acquire,
        };
        while self.w.pending.load(wait) & bits != 0 {
            self.interrupts_on();
            loom::thread::yield_now();
        }
    }

    fn broadcast(&self) -> Option<&Invlpgb> {
        self.invlpgb.as_ref()
    }

    fn without_interrupts(&self, f: &mut dyn FnMut()) {
        // Interrupts are only ever "on" in `interrupts_on`.
        f();
    }
}

/// INVLPGB: every operation takes effect on every CPU at once.
#[derive(Clone, Copy)]
pub struct Invlpgb {
    w: &'static World,
}

impl Invlpgb {
    fn everywhere(&self, f: impl Fn(&mut Machine, CpuId)) {
        self.w.machine(|m| (0..CPUS).for_each(|cpu| f(m, cpu)));
    }
}

impl BroadcastBackend for Invlpgb {
    fn flush_pcid_range(&self, pcid: Pcid, _start: u64, _end: u64, _stride_shift: u8) {
        self.everywhere(|m, cpu| m.refill(cpu, pcid));
    }
    fn flush_pcid(&self, pcid: Pcid) {
        self.everywhere(|m, cpu| m.refill(cpu, pcid));
    }
    fn flush_all_nonglobal(&self) {
        self.everywhere(Machine::flush_all);
    }
    fn flush_kernel_range(&self, _start: u64, _end: u64) {}
    fn flush_all_including_global(&self) {
        self.everywhere(Machine::flush_all);
    }
    fn sync(&self) {}
}
