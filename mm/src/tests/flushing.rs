//! The flush request path, the target test and the flush handler.

use super::fake::{Machine, Op, cpus, ipis, ops_of, pcid_of, root, system};
use crate::sync::Ordering;
use crate::{
    BroadcastOp, CTX_KERNEL, CTX_SWITCHING, CpuSet, Fault, FlushRange, FlushRequest, FlushTarget,
    TlbConfig,
};
use std::vec::Vec;
use tlb_types::Instruction::*;

pub(super) fn pages(first: u64, n: u64) -> FlushRange {
    FlushRange::Range {
        start: first << 12,
        end: (first + n) << 12,
        stride_shift: 12,
    }
}

pub(super) fn no_trim() -> TlbConfig {
    TlbConfig {
        trim_interval: 1 << 40,
        ..TlbConfig::default()
    }
}

#[test]
fn single_cpu_flush_sends_no_ipi() {
    let c = cpus(4);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&m.cpu(2), &a);
    m.take_log();
    sys.flush_tlb_mm_range(&m.cpu(2), &a, pages(7, 2), false);
    let log = m.take_log();
    assert!(ipis(&log).is_empty());
    assert_eq!(
        ops_of(&log, 2),
        [
            Op::Local(Invlpg { va: 7 << 12 }),
            Op::Local(Invlpg { va: 8 << 12 })
        ]
    );
    assert_eq!(sys.cpu(2).counters().snapshot().ipis_sent, 0);
}

#[test]
fn other_running_cpus_get_exactly_one_ipi_round() {
    let c = cpus(4);
    let sys = system(&c, no_trim());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    let b = sys.new_address_space(root(0xb000));
    for cpu in [0, 1, 3] {
        sys.switch_mm(&m.cpu(cpu), &a);
    }
    sys.switch_mm(&m.cpu(2), &b);
    m.now.set(1); // the first trim is due at 0; move past it
    m.take_log();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), false);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), false);
    let log = m.take_log();
    let want: CpuSet = [1, 3].into_iter().collect();
    // The first flush also carries the due trim; both target exactly the running CPUs.
    assert_eq!(ipis(&log), [want, want]);
    let ipi = Op::Ipi(want);
    assert_eq!(
        ops_of(&log, 0),
        [
            ipi.clone(),
            Op::Local(Invlpg { va: 0 }),
            ipi,
            Op::Local(Invlpg { va: 0 })
        ]
    );
    for cpu in [0, 1, 3] {
        let flushes: Vec<_> = ops_of(&log, cpu)
            .into_iter()
            .filter(|o| !matches!(o, Op::Ipi(_)))
            .collect();
        assert_eq!(
            flushes,
            [Op::Local(Invlpg { va: 0 }), Op::Local(Invlpg { va: 0 })],
            "cpu {cpu}"
        );
        assert_eq!(sys.cpu(cpu).slot(1), (a.ctx_id(), a.tlb_gen()));
    }
    assert_eq!(sys.cpu(0).counters().snapshot().ipis_sent, 4);
    assert_eq!(sys.cpu(1).counters().snapshot().ipis_received, 2);
}

/// Checklist item 6: the target test over every state combination.
#[test]
fn target_test_every_state() {
    let c = cpus(2);
    let sys = system(&c, TlbConfig::default());
    let a = sys.new_address_space(root(0xa000));
    let other = sys.new_address_space(root(0xb000));
    let st = sys.cpu(1);
    for loaded in [other.ctx_id(), a.ctx_id(), CTX_SWITCHING, CTX_KERNEL] {
        for lazy in [false, true] {
            for trim in [false, true] {
                st.loaded.store(loaded, Ordering::Relaxed);
                st.is_lazy.store(lazy, Ordering::Relaxed);
                let req = |target| FlushRequest {
                    target,
                    range: FlushRange::All,
                    freed_tables: false,
                    trim,
                    initiator: 0,
                };
                let mm_req = req(FlushTarget::AddressSpace { mm: &a, new_gen: 2 });
                let expect = !lazy && (loaded == CTX_SWITCHING || loaded == a.ctx_id() || trim);
                assert_eq!(
                    sys.should_flush(1, &mm_req),
                    expect,
                    "loaded {loaded:#x} lazy {lazy} trim {trim}"
                );
                assert_eq!(sys.should_flush(1, &req(FlushTarget::Kernel)), !lazy);
                // A batch reaches every CPU with a user address space loaded or on the
                // way to one, not a CPU on the kernel's.
                let batch = req(FlushTarget::LoadedUser);
                assert_eq!(
                    sys.should_flush(1, &batch),
                    !lazy && loaded != CTX_KERNEL,
                    "batch: loaded {loaded:#x} lazy {lazy}"
                );
                sys.faults().set(Fault::SkipSwitchingCpus, true);
                let broken = !lazy && (loaded == a.ctx_id() || trim);
                assert_eq!(sys.should_flush(1, &mm_req), broken);
                let broken_batch = !lazy && loaded != CTX_KERNEL && loaded != CTX_SWITCHING;
                assert_eq!(sys.should_flush(1, &batch), broken_batch);
                sys.faults().set(Fault::SkipSwitchingCpus, false);
            }
        }
    }
}

#[test]
fn switching_cpu_is_interrupted() {
    let c = cpus(2);
    let sys = system(&c, no_trim());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&m.cpu(0), &a);
    m.now.set(1);
    // CPU 1 is half-way through switching to `a`: bit set, SWITCHING published.
    a.cpus.insert(1, Ordering::SeqCst);
    sys.cpu(1).loaded.store(CTX_SWITCHING, Ordering::SeqCst);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(1, 1), false);
    assert_eq!(ipis(&m.take_log()), [CpuSet::single(1)]);
    sys.faults().set(Fault::SkipSwitchingCpus, true);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(1, 1), false);
    assert_eq!(ipis(&m.take_log()), [], "the mutation skips it");
}

/// Checklist item 4: two flushes handled in reverse order must not skip the full one.
#[test]
fn reversed_flushes_force_a_full_flush() {
    for mutated in [false, true] {
        let c = cpus(2);
        let sys = system(&c, no_trim());
        sys.faults()
            .set(Fault::PartialFlushWithoutGenerationCheck, mutated);
        let m = Machine::new(&sys, true, false);
        let a = sys.new_address_space(root(0xa000));
        sys.switch_mm(&m.cpu(1), &a);
        let local = sys.cpu(1).slot(1).1;
        // Flush A (full, generation local+1) and flush B (one page, local+2) both bumped;
        // B's IPI arrives first.
        let gen_a = a.tlb_gen.fetch_add(1, Ordering::SeqCst) + 1;
        let gen_b = a.tlb_gen.fetch_add(1, Ordering::SeqCst) + 1;
        assert_eq!((gen_a, gen_b), (local + 1, local + 2));
        let req = |new_gen, range| FlushRequest {
            target: FlushTarget::AddressSpace { mm: &a, new_gen },
            range,
            freed_tables: false,
            trim: false,
            initiator: 0,
        };
        m.take_log();
        sys.handle_flush_ipi(&m.cpu(1), &req(gen_b, pages(9, 1)));
        sys.handle_flush_ipi(&m.cpu(1), &req(gen_a, FlushRange::All));
        let log = ops_of(&m.take_log(), 1);
        if mutated {
            assert_eq!(
                log,
                [Op::Local(Invlpg { va: 9 << 12 })],
                "the mutation loses flush A"
            );
        } else {
            assert_eq!(
                log,
                [Op::Local(InvpcidSingle { pcid: pcid_of(1) })],
                "B does a full flush, A finds it done"
            );
        }
        assert_eq!(sys.cpu(1).slot(1).1, gen_b);
    }
}

#[test]
fn partial_flush_when_exactly_one_behind() {
    let c = cpus(2);
    let sys = system(&c, no_trim());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&m.cpu(1), &a);
    let local = sys.cpu(1).slot(1).1;
    let new_gen = a.tlb_gen.fetch_add(1, Ordering::SeqCst) + 1;
    let range = FlushRange::Range {
        start: 0x20_0000,
        end: 0x60_0000,
        stride_shift: 21,
    };
    let req = FlushRequest {
        target: FlushTarget::AddressSpace { mm: &a, new_gen },
        range,
        freed_tables: false,
        trim: false,
        initiator: 0,
    };
    m.take_log();
    sys.handle_flush_ipi(&m.cpu(1), &req);
    assert_eq!(
        ops_of(&m.take_log(), 1),
        [
            Op::Local(Invlpg { va: 0x20_0000 }),
            Op::Local(Invlpg { va: 0x40_0000 })
        ]
    );
    assert_eq!(sys.cpu(1).slot(1).1, local + 1);
    // The same request again is already done.
    sys.handle_flush_ipi(&m.cpu(1), &req);
    assert_eq!(m.take_log(), []);
}

/// Checklist item 9: 33 pages are flushed one by one, 34 become one full flush.
#[test]
fn ceiling_turns_34_pages_into_a_full_flush() {
    let c = cpus(1);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&m.cpu(0), &a);
    m.take_log();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(100, 33), false);
    let log = ops_of(&m.take_log(), 0);
    assert_eq!(log.len(), 33);
    assert!(
        log.iter()
            .all(|op| matches!(op, Op::Local(Invlpg { va: _ })))
    );
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(100, 34), false);
    assert_eq!(
        ops_of(&m.take_log(), 0),
        [Op::Local(InvpcidSingle { pcid: pcid_of(1) })]
    );
    // Configurable: with a ceiling of 0 even one page is a full flush.
    sys.set_flush_ceiling(0);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(100, 1), false);
    assert_eq!(
        ops_of(&m.take_log(), 0),
        [Op::Local(InvpcidSingle { pcid: pcid_of(1) })]
    );
    assert_eq!(sys.cpu(0).counters().snapshot().ceiling_full_flushes, 2);
}

/// Checklist item 8: a CPU that left drops its bit when a trim flush reaches it.
#[test]
fn trim_removes_cpus_that_left() {
    let c = cpus(3);
    let sys = system(
        &c,
        TlbConfig {
            trim_interval: 100,
            ..TlbConfig::default()
        },
    );
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    let b = sys.new_address_space(root(0xb000));
    sys.switch_mm(&m.cpu(0), &a);
    sys.switch_mm(&m.cpu(1), &a);
    sys.switch_mm(&m.cpu(2), &a);
    sys.switch_mm(&m.cpu(2), &b);
    m.take_log();
    m.now.set(5);
    // Trim due (next_trim starts at 0): CPU 2 is interrupted only to trim itself.
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), false);
    let log = m.take_log();
    assert_eq!(ipis(&log), [[1, 2].into_iter().collect::<CpuSet>()]);
    assert_eq!(ops_of(&log, 2), []);
    assert_eq!(a.cpus().iter().collect::<Vec<_>>(), [0, 1]);
    assert_eq!(sys.cpu(2).counters().snapshot().cpu_set_trims, 1);
    // Rate limit: before time 105 no trim flag.
    sys.switch_mm(&m.cpu(2), &a);
    sys.switch_mm(&m.cpu(2), &b);
    m.now.set(104);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), false);
    assert_eq!(ipis(&m.take_log()), [CpuSet::single(1)]);
    m.now.set(105);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), false);
    assert_eq!(
        ipis(&m.take_log()),
        [[1, 2].into_iter().collect::<CpuSet>()]
    );
}

/// Checklist item 13: kernel flushes reach every online CPU, or go by broadcast.
#[test]
fn kernel_range_flushes() {
    let k = 0xffff_8000_0000_0000u64;
    // With PGE off the kernel's pages are not global, and the flush of one is told apart
    // from a user page's: an INVPCID of every non-global entry instead of an INVLPG.
    for (broadcast, pge) in [(false, true), (false, false), (true, true)] {
        let c = cpus(3);
        let sys = system(&c, TlbConfig::default());
        let m = Machine::new(&sys, true, broadcast);
        m.pge.set(pge);
        let a = sys.new_address_space(root(0xa000));
        sys.switch_mm(&m.cpu(1), &a);
        sys.enter_lazy(&m.cpu(1));
        m.take_log();
        sys.flush_kernel_range(&m.cpu(0), k, k + 2 * 4096);
        sys.flush_kernel_range(&m.cpu(0), k, k + 34 * 4096);
        let log = m.take_log();
        if broadcast {
            assert_eq!(
                ops_of(&log, 0),
                [
                    Op::Broadcast(BroadcastOp::KernelRange {
                        start: k,
                        end: k + 2 * 4096
                    }),
                    Op::Sync,
                    Op::Broadcast(BroadcastOp::AllIncludingGlobal),
                    Op::Sync
                ]
            );
            assert!(ipis(&log).is_empty());
        } else {
            let others: CpuSet = [1, 2].into_iter().collect();
            assert_eq!(ipis(&log), [others, others], "lazy CPU 1 included");
            for cpu in 0..3 {
                let ops: Vec<_> = ops_of(&log, cpu)
                    .into_iter()
                    .filter(|o| !matches!(o, Op::Ipi(_)))
                    .collect();
                let kernel_page = |va| {
                    Op::Local(if pge {
                        Invlpg { va }
                    } else {
                        InvpcidAllNonGlobal
                    })
                };
                assert_eq!(
                    ops,
                    [kernel_page(k), kernel_page(k + 4096), Op::Local(InvpcidAll)],
                    "cpu {cpu}, PGE {pge}"
                );
            }
        }
    }
}

#[test]
fn flush_all_reaches_everyone() {
    let c = cpus(2);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    sys.flush_tlb_all(&m.cpu(1));
    let log = m.take_log();
    assert_eq!(ipis(&log), [CpuSet::single(0)]);
    assert_eq!(ops_of(&log, 0), [Op::Local(InvpcidAll)]);
}
