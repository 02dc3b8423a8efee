//! Checklist item 20: deferred reclaim batches.

use super::fake::{Machine, Op, cpus, ipis, ops_of, pcid_of, root, system};
use crate::{BroadcastOp, CpuSet, FlushBatch, TlbConfig};
use tlb_types::Instruction::*;

fn setup_two_spaces(
    broadcast: bool,
    run: impl FnOnce(&Machine<'_>, &crate::AddressSpaceTlb, &crate::AddressSpaceTlb),
) {
    let c = cpus(4);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, broadcast);
    let a = sys.new_address_space(root(0xa000));
    let b = sys.new_address_space(root(0xb000));
    sys.switch_mm(&m.cpu(1), &a);
    sys.switch_mm(&m.cpu(2), &b);
    sys.switch_mm(&m.cpu(3), &b);
    sys.enter_lazy(&m.cpu(3));
    m.take_log();
    run(&m, &a, &b);
}

#[test]
fn batch_flushes_collected_cpus_once_with_ipis() {
    setup_two_spaces(false, |m, a, b| {
        let sys = m.sys;
        let mut batch = FlushBatch::new();
        let (ga, gb) = (a.tlb_gen(), b.tlb_gen());
        for _ in 0..10 {
            sys.batch_add_pending(&mut batch, a);
            sys.batch_add_pending(&mut batch, b);
        }
        assert_eq!((a.tlb_gen(), b.tlb_gen()), (ga + 10, gb + 10));
        assert_eq!(batch.cpus(), [1, 2, 3].into_iter().collect::<CpuSet>());
        assert_eq!(m.take_log(), [], "nothing flushed while pending");
        sys.batch_flush(&m.cpu(0), &mut batch);
        let log = m.take_log();
        assert_eq!(
            ipis(&log),
            [[1, 2].into_iter().collect::<CpuSet>()],
            "one round; lazy CPU 3 skipped"
        );
        assert_eq!(
            ops_of(&log, 1),
            [Op::Local(InvpcidSingle { pcid: pcid_of(1) })]
        );
        assert_eq!(
            ops_of(&log, 2),
            [Op::Local(InvpcidSingle { pcid: pcid_of(1) })]
        );
        assert!(
            !batch.is_pending() && batch.cpus().is_empty(),
            "batch cleared"
        );
        sys.batch_flush(&m.cpu(0), &mut batch);
        assert_eq!(m.take_log(), [], "an empty batch costs nothing");
        // The lazy CPU catches up by generation when it returns.
        sys.switch_mm(&m.cpu(3), b);
        assert_eq!(
            ops_of(&m.take_log(), 3),
            [Op::Local(LoadCr3 {
                root: root(0xb000),
                pcid: pcid_of(1),
                keep: false
            })]
        );
        assert_eq!(sys.total_counters().batch_flushes, 1);
    });
}

#[test]
fn batch_uses_one_broadcast_when_available() {
    setup_two_spaces(true, |m, a, b| {
        let sys = m.sys;
        let mut batch = FlushBatch::new();
        sys.batch_add_pending(&mut batch, a);
        sys.batch_add_pending(&mut batch, b);
        sys.batch_flush(&m.cpu(0), &mut batch);
        assert_eq!(
            m.take_log(),
            [(0, Op::Broadcast(BroadcastOp::AllNonGlobal)), (0, Op::Sync)]
        );
        assert!(!batch.is_pending());
    });
}

#[test]
fn batch_of_only_the_caller_flushes_locally() {
    let c = cpus(2);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&m.cpu(1), &a);
    m.take_log();
    let mut batch = FlushBatch::new();
    sys.batch_add_pending(&mut batch, &a);
    sys.batch_flush(&m.cpu(1), &mut batch);
    assert_eq!(
        m.take_log(),
        [(1, Op::Local(InvpcidSingle { pcid: pcid_of(1) }))]
    );
}

/// A CPU on the kernel's address space (here it switched there; in the kernel, a flush
/// that found it lazy moved it there) stays in the CPU set of the address space it left,
/// but a batch does not interrupt it: it has no user address space loaded, and when it
/// loads one it catches up by generation.
#[test]
fn batch_skips_a_cpu_on_the_kernel_address_space() {
    let c = cpus(3);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&m.cpu(0), &a);
    sys.switch_mm(&m.cpu(1), &a);
    sys.switch_mm(&m.cpu(1), sys.kernel_address_space());
    m.take_log();
    let mut batch = FlushBatch::new();
    sys.batch_add_pending(&mut batch, &a);
    assert!(batch.cpus().contains(1), "CPU 1 is still in the set");
    sys.batch_flush(&m.cpu(0), &mut batch);
    assert_eq!(
        m.take_log(),
        [(0, Op::Local(InvpcidSingle { pcid: pcid_of(1) }))],
        "only the caller flushes; CPU 1 gets no IPI"
    );
    sys.switch_mm(&m.cpu(1), &a);
    assert_eq!(
        ops_of(&m.take_log(), 1),
        [Op::Local(LoadCr3 {
            root: root(0xa000),
            pcid: pcid_of(1),
            keep: false
        })],
        "CPU 1 flushes the address space's PCID when it returns"
    );
}
