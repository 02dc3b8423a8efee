//! Lazy CPUs: which flushes skip them, which reach them, and what the trace says.

use super::fake::{Machine, Op, cpus, ipis, ops_of, pcid_of, root, system};
use super::flushing::{no_trim, pages};
use crate::{AddressSpaceTlb, CTX_KERNEL, CpuSet, Fault, FlushRange, TlbSystem};
use tlb_types::Instruction::*;

/// CPUs 0 and 1 run `a`, then CPU 1 goes lazy; the clock is past 0 and the
/// log is empty.
fn run_with_cpu_1_lazy(sys: &TlbSystem<'_>, m: &Machine<'_>, a: &AddressSpaceTlb) {
    sys.switch_mm(&m.cpu(0), a);
    sys.switch_mm(&m.cpu(1), a);
    sys.enter_lazy(&m.cpu(1));
    m.now.set(1);
    m.take_log();
}

/// Checklist item 7 / 22: freeing page tables reaches lazy CPUs, which go to the kernel.
#[test]
fn freed_tables_reach_lazy_cpus() {
    let c = cpus(2);
    let sys = system(&c, no_trim());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    run_with_cpu_1_lazy(&sys, &m, &a);
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), true);
    let log = m.take_log();
    assert_eq!(ipis(&log), [CpuSet::single(1)]);
    assert_eq!(
        ops_of(&log, 1),
        [Op::Local(LoadCr3 {
            root: root(0x1000),
            pcid: pcid_of(0),
            keep: true
        })]
    );
    assert_eq!(sys.cpu(1).loaded_ctx(), CTX_KERNEL);
    assert!(!sys.cpu(1).is_lazy());

    // The mutation: a lazy CPU is skipped although tables are freed.
    sys.switch_mm(&m.cpu(1), &a);
    sys.enter_lazy(&m.cpu(1));
    sys.faults().set(Fault::SkipLazyWhenFreeingTables, true);
    m.take_log();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), true);
    assert_eq!(ipis(&m.take_log()), []);
}

#[test]
fn whole_address_space_flush_reaches_lazy_cpus() {
    let c = cpus(2);
    let sys = system(&c, no_trim());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    run_with_cpu_1_lazy(&sys, &m, &a);
    sys.flush_tlb_mm(&m.cpu(0), &a);
    let log = m.take_log();
    assert_eq!(ipis(&log), [CpuSet::single(1)]);
    assert_eq!(
        ops_of(&log, 0)[1],
        Op::Local(InvpcidSingle { pcid: pcid_of(1) })
    );
    assert_eq!(FlushRange::pages(0x1234, 0x3001), pages(1, 3));
    assert_eq!(FlushRange::pages(0x1000, 0x2000).units(), Some(1));
}

/// The decision names the CPUs it left out: a lazy CPU is skipped by a flush that frees no
/// tables (and reported so), and reached by one that does (skipped nobody).
#[test]
fn the_trace_names_the_lazy_cpu_a_flush_skipped() {
    let c = cpus(3);
    let sys = system(&c, no_trim());
    let m = Machine::new(&sys, true, false);
    let a = sys.new_address_space(root(0xa000));
    run_with_cpu_1_lazy(&sys, &m, &a);
    m.traces.take();
    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), false);
    assert_eq!(ipis(&m.take_log()), []);
    let skipping = m.traces.take();
    assert_eq!(skipping.len(), 1);
    assert_eq!(skipping[0].targets, CpuSet::single(0));
    assert_eq!(skipping[0].skipped, CpuSet::single(1));

    sys.flush_tlb_mm_range(&m.cpu(0), &a, pages(0, 1), true);
    assert_eq!(ipis(&m.take_log()), [CpuSet::single(1)]);
    let reaching = m.traces.take();
    assert_eq!(reaching.len(), 1);
    assert_eq!(reaching[0].skipped, CpuSet::new());
}
