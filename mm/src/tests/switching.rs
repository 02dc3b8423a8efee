//! `switch_mm`, ASID slots and lazy TLB.

use super::fake::{Machine, Op, cpus, ipis, ops_of, pcid_of, root, system};
use crate::{FlushRange, Pcid, TlbConfig};
use std::vec::Vec;
use tlb_types::Instruction::*;

fn page(n: u64) -> FlushRange {
    FlushRange::Range {
        start: n << 12,
        end: (n + 1) << 12,
        stride_shift: 12,
    }
}

/// Checklist item 3: seven address spaces through six slots, round robin.
#[test]
fn seven_address_spaces_round_robin() {
    let c = cpus(1);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let hw = m.cpu(0);
    let mms: Vec<_> = (0..7)
        .map(|i| sys.new_address_space(root(0x10_0000 * (i + 1))))
        .collect();
    let load = |i: usize, asid: u16, flush: bool| {
        Op::Local(LoadCr3 {
            root: mms[i].root(),
            pcid: pcid_of(asid),
            keep: !flush,
        })
    };

    // The kernel holds slot 0 after bring-up; the cursor starts at 1.
    for mm in &mms {
        sys.switch_mm(&hw, mm);
    }
    let expect = [
        load(0, 1, true),
        load(1, 2, true),
        load(2, 3, true),
        load(3, 4, true),
        load(4, 5, true),
        load(5, 0, true),
        load(6, 1, true),
    ];
    assert_eq!(ops_of(&m.take_log(), 0), expect);

    // mm2 still cached in slot 2 and unchanged: no flush.
    sys.switch_mm(&hw, &mms[2]);
    assert_eq!(ops_of(&m.take_log(), 0), [load(2, 3, false)]);
    // mm0 was evicted by mm6: the cursor (at 2) evicts mm1's slot, with a flush.
    sys.switch_mm(&hw, &mms[0]);
    assert_eq!(ops_of(&m.take_log(), 0), [load(0, 2, true)]);
    assert_eq!(sys.cpu(0).slot(2).0, mms[0].ctx_id());
}

#[test]
fn cached_slot_flushes_only_when_generation_moved() {
    let c = cpus(1);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let hw = m.cpu(0);
    let a = sys.new_address_space(root(0xa000));
    let b = sys.new_address_space(root(0xb000));
    sys.switch_mm(&hw, &a);
    sys.switch_mm(&hw, &b);
    m.take_log();
    // `a` is not loaded anywhere: its flush is only a generation bump.
    sys.flush_tlb_mm_range(&hw, &a, page(5), false);
    assert_eq!(m.take_log(), []);
    sys.switch_mm(&hw, &a);
    assert_eq!(
        ops_of(&m.take_log(), 0),
        [Op::Local(LoadCr3 {
            root: root(0xa000),
            pcid: pcid_of(1),
            keep: false
        })]
    );
    sys.switch_mm(&hw, &b);
    assert_eq!(
        ops_of(&m.take_log(), 0),
        [Op::Local(LoadCr3 {
            root: root(0xb000),
            pcid: pcid_of(2),
            keep: true
        })]
    );
}

#[test]
fn without_pcid_every_load_flushes_in_asid_0() {
    let c = cpus(1);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, false, false);
    let hw = m.cpu(0);
    let a = sys.new_address_space(root(0xa000));
    let b = sys.new_address_space(root(0xb000));
    for mm in [&a, &b, &a] {
        sys.switch_mm(&hw, mm);
        assert_eq!(sys.cpu(0).loaded_asid().get(), 0, "ctx {}", mm.ctx_id);
    }
    // CR3 has no PCID field without PCIDE: every load is a flushing one, and `mm` counts
    // each as one.
    assert_eq!(sys.cpu(0).counters().snapshot().switch_flushes, 3);
    let log = ops_of(&m.take_log(), 0);
    assert_eq!(log.len(), 3);
    assert!(
        log.iter().all(|op| matches!(
            op,
            Op::Local(LoadCr3 {
                pcid: Pcid::ZERO,
                keep: false,
                ..
            })
        )),
        "{log:?}"
    );
}

#[test]
fn thread_switch_within_one_address_space_does_nothing() {
    let c = cpus(1);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let hw = m.cpu(0);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&hw, &a);
    m.take_log();
    sys.switch_mm(&hw, &a);
    assert_eq!(m.take_log(), []);
}

/// Checklist item 7: lazy CPUs are skipped and catch up by generation.
#[test]
fn lazy_cpu_catches_up_on_return() {
    let c = cpus(2);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    sys.switch_mm(&m.cpu(0), &a);
    sys.switch_mm(&m.cpu(1), &a);
    sys.enter_lazy(&m.cpu(1));
    assert!(sys.cpu(1).is_lazy());
    m.take_log();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, page(3), false);
    let log = m.take_log();
    assert!(ipis(&log).is_empty(), "lazy CPU 1 was interrupted: {log:?}");
    assert_eq!(ops_of(&log, 1), []);
    assert_eq!(ops_of(&log, 0), [Op::Local(Invlpg { va: 3 << 12 })]);

    // Back to `a`: the slot is one generation behind, so the load flushes.
    sys.switch_mm(&m.cpu(1), &a);
    assert!(!sys.cpu(1).is_lazy());
    assert_eq!(
        ops_of(&m.take_log(), 1),
        [Op::Local(LoadCr3 {
            root: root(0xa000),
            pcid: pcid_of(1),
            keep: false
        })]
    );

    // Lazy and back with nothing changed: no load at all.
    sys.enter_lazy(&m.cpu(1));
    sys.switch_mm(&m.cpu(1), &a);
    assert_eq!(m.take_log(), []);
}

#[test]
fn lazy_mode_on_the_kernel_address_space_is_meaningless() {
    let c = cpus(1);
    let sys = system(&c, TlbConfig::default());
    let m = Machine::new(&sys, true, false);
    sys.enter_lazy(&m.cpu(0));
    assert!(
        !sys.cpu(0).is_lazy(),
        "nothing to be lazy about on the kernel address space"
    );
}
