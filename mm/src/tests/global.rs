//! Promotion to global ASIDs, the transition protocol, rollover and exhaustion.

use super::fake::{Machine, Op, cpus, ipis, ops_of, root, system};
use crate::{
    AddressSpaceTlb, BroadcastOp, CTX_KERNEL, CpuSet, FIRST_GLOBAL_ASID, Fault, FlushRange, Pcid,
    TlbConfig, TlbSystem,
};
use tlb_types::Instruction::*;

fn page(n: u64) -> FlushRange {
    FlushRange::Range {
        start: n << 12,
        end: (n + 1) << 12,
        stride_shift: 12,
    }
}

fn config() -> TlbConfig {
    TlbConfig {
        promotion_interval: 10,
        trim_interval: 1 << 40,
        ..TlbConfig::default()
    }
}

fn run_on(sys: &TlbSystem<'_>, m: &Machine<'_>, mm: &AddressSpaceTlb, cpus: &[usize]) {
    for &cpu in cpus {
        sys.switch_mm(&m.cpu(cpu), mm);
    }
}

/// Checklist item 14.
#[test]
fn promotion_needs_threshold_cpus_and_respects_rate_limit() {
    let c = cpus(5);
    let sys = system(&c, config());
    let m = Machine::new(&sys, true, true);
    let a = sys.new_address_space(root(0xa000));
    run_on(&sys, &m, &a, &[0, 1, 2]);
    m.now.set(1);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    assert_eq!(a.global_asid(), None, "3 CPUs are not enough");
    // A fourth CPU joins, but the check ran at t=1: the next one is due at t=11.
    run_on(&sys, &m, &a, &[3]);
    m.now.set(10);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    assert_eq!(a.global_asid(), None, "rate limited");
    // A lazy CPU does not count.
    sys.enter_lazy(&m.cpu(3));
    m.now.set(11);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    assert_eq!(a.global_asid(), None, "lazy CPUs are not running it");
    run_on(&sys, &m, &a, &[3]);
    m.now.set(21);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    assert_eq!(a.global_asid(), Some(FIRST_GLOBAL_ASID));
    assert_eq!(sys.cpu(0).counters().snapshot().promotions, 1);
}

#[test]
fn threshold_is_configurable_but_never_below_two() {
    let c = cpus(3);
    let sys = system(&c, config());
    sys.set_promotion_threshold(1);
    assert_eq!(sys.promotion_threshold(), 2);
    let m = Machine::new(&sys, true, true);
    let single = sys.new_address_space(root(0xa000));
    run_on(&sys, &m, &single, &[0]);
    sys.flush_tlb_mm_range(&m.cpu(0), &single, page(0), false);
    assert_eq!(single.global_asid(), None, "single-threaded: never");
    let pair = sys.new_address_space(root(0xb000));
    run_on(&sys, &m, &pair, &[1, 2]);
    sys.flush_tlb_mm_range(&m.cpu(1), &pair, page(0), false);
    assert!(pair.global_asid().is_some());
}

#[test]
fn no_promotion_without_a_broadcast_backend() {
    let c = cpus(4);
    let sys = system(&c, config());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    run_on(&sys, &m, &a, &[0, 1, 2, 3]);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    assert_eq!(a.global_asid(), None);
}

fn promoted(sys: &TlbSystem<'_>, m: &Machine<'_>, address: u64, on: &[usize]) -> AddressSpaceTlb {
    let a = sys.new_address_space(root(address));
    run_on(sys, m, &a, on);
    let hw = m.cpu(on[0]);
    let asid = sys.use_global_asid(&hw, &a).expect("an ASID");
    assert!(asid.is_global());
    m.take_log();
    a
}

/// Checklist item 15 (sequential part; the race itself is for loom).
#[test]
fn promotion_publishes_flag_with_asid() {
    let c = cpus(2);
    let sys = system(&c, config());
    let m = Machine::new(&sys, true, true);
    let a = promoted(&sys, &m, 0xa000, &[0, 1]);
    assert!(a.in_asid_transition());
    // Idempotent: a second call returns the same ASID.
    let hw = m.cpu(1);
    assert_eq!(sys.use_global_asid(&hw, &a), a.global_asid());
    assert_eq!(sys.total_counters().promotions, 1);
}

/// Checklist items 16 and 17: stragglers move over without a flush, by IPI, and the
/// transition ends only once nobody runs a dynamic ASID.
#[test]
fn stragglers_move_over_without_flush() {
    let c = cpus(3);
    let sys = system(&c, config());
    let m = Machine::new(&sys, true, true);
    let a = promoted(&sys, &m, 0xa000, &[0, 1, 2]);
    let g = a.global_asid().unwrap();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(4), false);
    let log = m.take_log();
    let gpcid = g.pcid();
    assert_eq!(
        ops_of(&log, 0)[0],
        Op::Broadcast(BroadcastOp::PcidRange {
            pcid: gpcid,
            start: 4 << 12,
            end: 5 << 12,
            stride_shift: 12
        })
    );
    // Every CPU in the set got the IPI and moved to the global PCID without a flush.
    assert_eq!(ipis(&log).len(), 1);
    for cpu in 0..3 {
        assert!(
            ops_of(&log, cpu).contains(&Op::Local(LoadCr3 {
                root: root(0xa000),
                pcid: gpcid,
                keep: true
            })),
            "cpu {cpu}"
        );
        assert_eq!(sys.cpu(cpu).loaded_asid(), g);
    }
    assert_eq!(*ops_of(&log, 0).last().unwrap(), Op::Sync);
    assert!(
        a.in_asid_transition(),
        "this flush found stragglers, so it kept the flag"
    );
}

#[test]
fn transition_finishes_only_when_all_moved() {
    let c = cpus(3);
    let sys = system(&c, config());
    let m = Machine::new(&sys, true, true);
    let a = promoted(&sys, &m, 0xa000, &[0, 1, 2]);
    // CPU 2 moves at its own switch (same address space, needs the global ASID).
    sys.switch_mm(&m.cpu(2), &a);
    assert!(sys.cpu(2).loaded_asid().is_global());
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(4), false);
    assert!(a.in_asid_transition());
    m.take_log();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(4), false);
    let log = m.take_log();
    assert!(!a.in_asid_transition());
    assert_eq!(ipis(&log), [], "all on the global ASID: broadcast only");
    assert_eq!(sys.cpu(0).counters().snapshot().transitions_finished, 1);
    // From now on a new CPU switches in without a flush, and flushes are pure broadcast.
    let b = sys.new_address_space(root(0xb000));
    run_on(&sys, &m, &b, &[1]);
    run_on(&sys, &m, &a, &[1]);
    let g = a.global_asid().unwrap().pcid();
    assert_eq!(
        *ops_of(&m.take_log(), 1).last().unwrap(),
        Op::Local(LoadCr3 {
            root: root(0xa000),
            pcid: g,
            keep: true
        })
    );
    sys.flush_tlb_mm_range(&m.cpu(0), &a, FlushRange::All, true);
    assert_eq!(
        ops_of(&m.take_log(), 0),
        [Op::Broadcast(BroadcastOp::Pcid(g)), Op::Sync]
    );
}

#[test]
fn lazy_stragglers_are_reached_during_transition() {
    let c = cpus(2);
    let sys = system(&c, config());
    let m = Machine::new(&sys, true, true);
    let a = promoted(&sys, &m, 0xa000, &[0, 1]);
    sys.switch_mm(&m.cpu(0), &a);
    sys.enter_lazy(&m.cpu(1));
    m.take_log();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(1), false);
    let log = m.take_log();
    assert_eq!(
        ipis(&log),
        [CpuSet::single(1)],
        "lazy straggler interrupted"
    );
    assert_eq!(
        sys.cpu(1).loaded_ctx(),
        CTX_KERNEL,
        "and off its dynamic ASID"
    );
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(1), false);
    assert!(!a.in_asid_transition(), "nobody left on a dynamic ASID");
}

#[test]
fn no_ipi_during_transition_mutation_misses_running_stragglers() {
    let c = cpus(2);
    let sys = system(&c, config());
    let m = Machine::new(&sys, true, true);
    let a = promoted(&sys, &m, 0xa000, &[0, 1]);
    sys.faults().set(Fault::NoIpiDuringTransition, true);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(1), false);
    let log = m.take_log();
    assert_eq!(
        ipis(&log),
        [],
        "CPU 1 keeps its dynamic ASID and its stale entry"
    );
    assert!(!sys.cpu(1).loaded_asid().is_global());
    assert!(!a.in_asid_transition());
}

/// Checklist item 18, end to end: exhaustion, release, rollover, reuse.
#[test]
fn rollover_flushes_before_reuse() {
    for mutated in [false, true] {
        let c = cpus(2);
        let sys = system(
            &c,
            TlbConfig {
                global_asid_limit: FIRST_GLOBAL_ASID.get() + 1,
                ..config()
            },
        );
        sys.faults()
            .set(Fault::ReuseGlobalAsidBeforeRollover, mutated);
        let m = Machine::new(&sys, true, true);
        let a = promoted(&sys, &m, 0xa000, &[0, 1]);
        let b = sys.new_address_space(root(0xb000));
        run_on(&sys, &m, &b, &[0, 1]);
        let hw = m.cpu(0);
        assert_eq!(sys.use_global_asid(&hw, &b), None, "exhausted");
        assert_eq!(sys.cpu(0).counters().snapshot().exhaustion_fallbacks, 1);
        // b keeps working on IPIs.
        m.take_log();
        sys.flush_tlb_mm_range(&hw, &b, page(0), false);
        assert_eq!(ipis(&m.take_log()).len(), 1);
        // a dies; b gets its ASID, after a flush of all non-global entries (unless mutated).
        sys.release_address_space(&a);
        assert_eq!(sys.global_asids_available(), 1);
        assert_eq!(sys.use_global_asid(&hw, &b), Some(FIRST_GLOBAL_ASID));
        let log = ops_of(&m.take_log(), 0);
        if mutated {
            assert_eq!(log, []);
        } else {
            assert_eq!(log, [Op::Broadcast(BroadcastOp::AllNonGlobal), Op::Sync]);
            assert_eq!(sys.total_counters().rollovers, 1);
        }
    }
}

#[test]
fn software_broadcast_handler_semantics() {
    for (pcid_on, pge) in [(true, true), (true, false), (false, true)] {
        let c = cpus(1);
        let sys = system(&c, config());
        let m = Machine::new(&sys, pcid_on, true);
        m.pge.set(pge);
        let a = sys.new_address_space(root(0xa000));
        run_on(&sys, &m, &a, &[0]);
        let cur = sys.cpu(0).loaded_asid();
        m.take_log();
        let hw = m.cpu(0);
        let mine = cur.pcid();
        sys.handle_broadcast_ipi(
            &hw,
            &BroadcastOp::PcidRange {
                pcid: mine,
                start: 0,
                end: 2 << 12,
                stride_shift: 12,
            },
        );
        sys.handle_broadcast_ipi(
            &hw,
            &BroadcastOp::PcidRange {
                pcid: Pcid::new(99),
                start: 0,
                end: 2 << 12,
                stride_shift: 12,
            },
        );
        sys.handle_broadcast_ipi(&hw, &BroadcastOp::Pcid(mine));
        sys.handle_broadcast_ipi(&hw, &BroadcastOp::Pcid(Pcid::new(99)));
        sys.handle_broadcast_ipi(&hw, &BroadcastOp::AllNonGlobal);
        sys.handle_broadcast_ipi(
            &hw,
            &BroadcastOp::KernelRange {
                start: 0,
                end: 4096,
            },
        );
        sys.handle_broadcast_ipi(&hw, &BroadcastOp::AllIncludingGlobal);
        // Without PCIDE there is one tag: a PCID flush reloads CR3, and only a toggle of
        // CR4.PGE reaches global entries.
        let flush_pcid = |pcid| {
            Op::Local(if pcid_on {
                InvpcidSingle { pcid }
            } else {
                ReloadCr3
            })
        };
        let mut want = std::vec![Op::Local(Invlpg { va: 0 }), Op::Local(Invlpg { va: 4096 })];
        if pcid_on {
            want.push(flush_pcid(Pcid::new(99)));
        }
        want.push(flush_pcid(mine));
        if pcid_on {
            want.push(flush_pcid(Pcid::new(99)));
        }
        want.extend([
            Op::Local(if pcid_on {
                InvpcidAllNonGlobal
            } else {
                ReloadCr3
            }),
            // A kernel page: INVLPG reaches its global entry (PGE) or the one tag (no
            // PCIDE); a non-global copy under any PCID needs INVPCID.
            Op::Local(if pge || !pcid_on {
                Invlpg { va: 0 }
            } else {
                InvpcidAllNonGlobal
            }),
            Op::Local(if pcid_on { InvpcidAll } else { TogglePge }),
        ]);
        assert_eq!(ops_of(&m.take_log(), 0), want, "pcid {pcid_on}, PGE {pge}");
    }
}

#[test]
fn trace_events_name_each_decision() {
    use crate::TraceReason::*;
    let c = cpus(3);
    let sys = system(
        &c,
        TlbConfig {
            global_asid_limit: FIRST_GLOBAL_ASID.get() + 1,
            ..config()
        },
    );
    sys.set_promotion_threshold(2);
    let m = Machine::new(&sys, true, true);
    let a = sys.new_address_space(root(0xa000));
    run_on(&sys, &m, &a, &[0]);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    run_on(&sys, &m, &a, &[1, 2]);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(0), false);
    sys.flush_kernel_range(&m.cpu(1), 0xffff_8000_0000_0000, 0xffff_8000_0000_1000);
    let b = sys.new_address_space(root(0xb000));
    run_on(&sys, &m, &b, &[0]);
    run_on(&sys, &m, &a, &[0]);
    sys.switch_mm(&m.cpu(0), sys.kernel_address_space());
    sys.switch_mm(&m.cpu(1), sys.kernel_address_space());
    sys.switch_mm(&m.cpu(2), sys.kernel_address_space());
    sys.release_address_space(&a);
    sys.use_global_asid(&m.cpu(2), &b);
    let events = m.traces.take();
    let reasons: std::vec::Vec<_> = events.iter().map(|e| e.reason).collect();
    assert_eq!(
        reasons,
        [
            LocalOnly, Ipi, Promotion, Ipi, Broadcast, Kernel, Rollover, Promotion
        ]
    );
    let ipi = &events[1];
    assert_eq!((ipi.initiator, ipi.ctx_id), (0, Some(a.ctx_id())));
    assert_eq!(ipi.targets, [0, 1, 2].into_iter().collect::<CpuSet>());
    assert_eq!(ipi.range, Some((0, 4096)));
}
