//! The host TLB model: simulated CPUs on host threads run the real `mm` code through seeded
//! random interleavings, and an oracle reports any use of a translation after the flush that
//! removed it returned, any walk through a freed page table, and any PCID that still holds
//! another address space's entries. Mutation checks prove the oracle has teeth.
//!
//! Budget: `MM_MODEL_SCALE` multiplies the number of seeds (default 1: about 10^6 simulated
//! operations over all configurations); `MM_MODEL_SEED` replays one seed of each test.

// The model drives mm's own atomics through scheduling hooks, which a loom build lacks.
#![cfg(not(loom))]

mod hw;
mod sched;
mod workload;
mod world;

use hw::{Backend, KernelFaults};
use mm::Fault;
use workload::{Config, Mix, run};

fn scale() -> u64 {
    std::env::var("MM_MODEL_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn seeds(base: u64, count: u64) -> Vec<u64> {
    match std::env::var("MM_MODEL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(seed) => vec![seed],
        None => (0..count * scale()).map(|i| base * 1_000_003 + i).collect(),
    }
}

fn install_hook() {
    mm::set_schedule_hook(sched::hook);
}

/// Runs `cfg` over `count` seeds; every run must be clean.
fn clean(name: &str, cfg: Config, base: u64, count: u64) {
    install_hook();
    let (mut ops, mut points, mut ipis, mut invlpgbs, mut checks) = (0, 0, 0, 0, 0);
    let mut promotions = 0;
    let mut rollovers = 0;
    let seeds = seeds(base, count);
    for &seed in &seeds {
        let out = run(&cfg, seed);
        assert!(
            !out.panicked,
            "{name}: seed {seed} panicked (replay: MM_MODEL_SEED={seed})"
        );
        assert!(
            out.violations.is_empty(),
            "{name}: seed {seed} (replay: MM_MODEL_SEED={seed}): {:#?}",
            out.violations
        );
        ops += out.ops;
        points += out.points;
        ipis += out.ipis;
        invlpgbs += out.invlpgbs;
        checks += out.checks;
        promotions += out.counters.promotions;
        rollovers += out.counters.rollovers;
    }
    println!(
        "model {name}: {} seeds, {ops} ops, {points} scheduling points, {checks} TLB-hit checks, \
         {ipis} IPIs, {invlpgbs} INVLPGBs, {promotions} promotions, {rollovers} rollovers: clean",
        seeds.len()
    );
}

/// Runs `cfg` over up to `count` seeds until the oracle reports; it must.
fn caught(name: &str, cfg: Config, base: u64, count: u64) {
    install_hook();
    let mut ops = 0;
    for seed in seeds(base, count) {
        let out = run(&cfg, seed);
        ops += out.ops;
        if let Some(v) = out.violations.first() {
            println!("mutation {name}: caught at seed {seed} after {ops} ops: {v}");
            return;
        }
    }
    panic!("mutation {name} was NOT caught in {ops} operations");
}

// ---- the correct code, every backend, with and without PCID ----

#[test]
fn ipi_only_with_pcid() {
    clean("ipi+pcid", Config::new(Backend::Ipi, true), 1, 20);
}

#[test]
fn ipi_only_without_pcid() {
    clean("ipi-nopcid", Config::new(Backend::Ipi, false), 2, 14);
}

#[test]
fn software_broadcast_with_pcid() {
    clean("software+pcid", Config::new(Backend::Software, true), 3, 20);
}

#[test]
fn software_broadcast_without_pcid() {
    clean(
        "software-nopcid",
        Config::new(Backend::Software, false),
        4,
        14,
    );
}

#[test]
fn invlpgb_model() {
    clean("invlpgb", Config::new(Backend::Invlpgb, true), 5, 20);
}

// ---- mutations: each must be caught ----

/// One CPU state of the instruction-choice matrix: PCIDE, INVPCID and CR4.PGE as the
/// kernel sets them up, with the broadcast backend such a CPU would use.
fn cpu_state(backend: Backend, pcid: bool, invpcid: bool, pge: bool) -> Config {
    Config {
        pge,
        invpcid,
        ..Config::new(backend, pcid)
    }
}

/// Every CPU state `mm::instructions::select` must serve, each with PGE on and off: no
/// PCID; PCID without INVPCID; PCID and INVPCID; PCID, INVPCID and INVLPGB. The workload
/// flushes kernel ranges while kernel threads run lazily on other CPUs, so a kernel page
/// cached under one PCID and flushed while another is loaded is exercised on every state.
#[test]
fn instruction_choice_matrix() {
    let states = [
        ("no-pcid", Backend::Ipi, false, false),
        ("pcid", Backend::Ipi, true, false),
        ("pcid+invpcid", Backend::Software, true, true),
        ("pcid+invpcid+invlpgb", Backend::Invlpgb, true, true),
    ];
    for (index, (name, backend, pcid, invpcid)) in states.into_iter().enumerate() {
        for pge in [true, false] {
            let label = format!("{name}, PGE {}", if pge { "on" } else { "off" });
            let base = 40 + 2 * index as u64 + u64::from(pge);
            clean(&label, cpu_state(backend, pcid, invpcid, pge), base, 16);
        }
    }
}

fn mutated(backend: Backend, fault: Fault) -> Config {
    Config {
        faults: vec![fault],
        ..Config::new(backend, true)
    }
}

/// The switch-versus-flush race needs a CPU to stop inside `switch_mm` while another
/// flushes: few pages, frequent switches, frequent hand-overs.
fn switch_race(fault: Fault) -> Config {
    Config {
        cpus: 3,
        spaces: 2,
        hot_pages: 4,
        regions: 1,
        switch_per_1024: 300,
        churn: false,
        mix: Mix::SwitchRace,
        ..mutated(Backend::Ipi, fault)
    }
}

#[test]
fn switch_race_workload_is_clean() {
    clean("switch-race", switch_race_config(), 6, 20);
}

fn switch_race_config() -> Config {
    Config {
        faults: Vec::new(),
        ..switch_race(Fault::SkipSwitchingCpus)
    }
}

#[test]
fn mutation_skip_switching_cpu() {
    caught(
        "skip SWITCHING CPU",
        switch_race(Fault::SkipSwitchingCpus),
        11,
        200,
    );
}

#[test]
fn mutation_skip_lazy_when_freeing_tables() {
    caught(
        "skip lazy CPUs when tables are freed",
        mutated(Backend::Ipi, Fault::SkipLazyWhenFreeingTables),
        12,
        200,
    );
}

#[test]
fn mutation_no_ipi_during_transition() {
    caught(
        "no IPIs during ASID transition",
        mutated(Backend::Invlpgb, Fault::NoIpiDuringTransition),
        13,
        200,
    );
}

#[test]
fn mutation_reuse_global_asid_before_rollover() {
    caught(
        "freed global ASID reused before rollover",
        mutated(Backend::Invlpgb, Fault::ReuseGlobalAsidBeforeRollover),
        14,
        200,
    );
}

#[test]
fn mutation_tlbsync_on_other_cpu() {
    let cfg = Config {
        kernel_faults: KernelFaults {
            tlbsync_on_other_cpu: true,
            ..KernelFaults::default()
        },
        ..Config::new(Backend::Invlpgb, true)
    };
    caught("TLBSYNC on another CPU", cfg, 15, 200);
}

#[test]
fn mutation_generation_read_before_cpu_set() {
    caught(
        "generation read before CPU-set update",
        switch_race(Fault::GenerationReadBeforeCpuSet),
        16,
        200,
    );
}

#[test]
fn mutation_partial_flush_without_generation_check() {
    caught(
        "partial flush when new != local + 1",
        mutated(Backend::Ipi, Fault::PartialFlushWithoutGenerationCheck),
        17,
        200,
    );
}

#[test]
fn mutation_pge_left_off() {
    let cfg = Config {
        kernel_faults: KernelFaults {
            pge_left_off: true,
            ..KernelFaults::default()
        },
        ..cpu_state(Backend::Ipi, true, false, true)
    };
    caught("CR4.PGE left off", cfg, 18, 200);
}

#[test]
fn mutation_everything_by_cr3_reload() {
    caught(
        "flush everything by a CR3 reload",
        mutated(Backend::Ipi, Fault::EverythingByCr3Reload),
        19,
        200,
    );
}

#[test]
fn mutation_invlpg_for_another_pcid() {
    caught(
        "INVLPG for a PCID that is not loaded",
        mutated(Backend::Software, Fault::InvlpgForOtherPcid),
        20,
        200,
    );
}

#[test]
fn mutation_kernel_page_by_pcid_invpcid() {
    caught(
        "kernel range flushed with a PCID-scoped INVPCID",
        mutated(Backend::Software, Fault::KernelPageByPcidInvpcid),
        21,
        200,
    );
}

/// A seed names one schedule: running it twice gives the same run.
#[test]
fn same_seed_same_run() {
    install_hook();
    let cfg = Config::new(Backend::Invlpgb, true);
    let a = run(&cfg, 77);
    let b = run(&cfg, 77);
    assert_eq!(
        (a.ops, a.points, a.ipis, a.invlpgbs, a.checks),
        (b.ops, b.points, b.ipis, b.invlpgbs, b.checks)
    );
    assert_eq!(a.counters, b.counters);
    let c = run(&cfg, 78);
    assert_ne!(a.points, c.points, "different seeds, different schedules");
}
