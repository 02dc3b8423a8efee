//! Host tests of the mode rules, with made-up CPUs: no emulator here has
//! PCID and INVLPGB together.

use super::{ModeRequest, TlbMode, TlbOptions, choose};
use crate::cpu_features::CpuFeatures;

/// An EPYC 7763 as its CPUID reads on real hardware.
fn milan() -> CpuFeatures {
    let mut cpu = CpuFeatures::from_cpuid(|_, _| [0; 4]);
    cpu.vendor = *b"AuthenticAMD";
    cpu.family = 0x19;
    cpu.pcid = true;
    cpu.invpcid = true;
    cpu.global_pages = true;
    cpu.invlpgb = Some(7);
    cpu.tce = true;
    cpu
}

fn auto() -> TlbOptions {
    TlbOptions::default()
}

#[test]
fn zen3_with_pcids_uses_invlpgb() {
    let choice = choose(&auto(), &milan())
        .unwrap_or_else(|error| panic!("choose(&auto(), &milan()) failed: {error}"));
    assert_eq!(choice.mode, TlbMode::Invlpgb);
    assert!(choice.hardware.pcids && choice.hardware.invpcid);
    assert!(choice.hardware.translation_cache_extension);
    let explicit = TlbOptions {
        mode: ModeRequest::Invlpgb,
        ..auto()
    };
    assert_eq!(
        choose(&explicit, &milan())
            .unwrap_or_else(|error| panic!("choose(&explicit, &milan()) failed: {error}"))
            .mode,
        TlbMode::Invlpgb
    );
}

#[test]
fn invlpgb_needs_zen3_and_pcids() {
    let explicit = TlbOptions {
        mode: ModeRequest::Invlpgb,
        ..auto()
    };
    let mut rome = milan();
    rome.family = 0x17;
    let mut no_pcid = milan();
    no_pcid.pcid = false;
    let pcid_off = TlbOptions {
        pcid: false,
        ..auto()
    };
    for (cpu, options) in [(&rome, auto()), (&no_pcid, auto()), (&milan(), pcid_off)] {
        let choice = choose(&options, cpu)
            .unwrap_or_else(|error| panic!("choose(&options, cpu) failed: {error}"));
        assert_eq!(choice.mode, TlbMode::Ipi, "auto falls back to IPIs");
        let refused = choose(
            &TlbOptions {
                mode: ModeRequest::Invlpgb,
                ..options
            },
            cpu,
        );
        assert!(
            refused.is_err(),
            "tlb=invlpgb must be refused, got {refused:?}"
        );
    }
    assert!(choose(&explicit, &no_pcid).is_err_and(|why| why.0.contains("PCIDs")));
}

#[test]
fn pcids_need_pge_and_permission() {
    let mut no_pge = milan();
    no_pge.global_pages = false;
    let choice = choose(&auto(), &no_pge)
        .unwrap_or_else(|error| panic!("choose(&auto(), &no_pge) failed: {error}"));
    assert!(!choice.hardware.pcids && !choice.hardware.invpcid);
    let off = TlbOptions {
        pcid: false,
        ..auto()
    };
    let choice = choose(&off, &milan())
        .unwrap_or_else(|error| panic!("choose(&off, &milan()) failed: {error}"));
    assert!(!choice.hardware.pcids && !choice.hardware.invpcid);
    assert!(choice.pcid_reason.contains("tlb.pcid=off"));
}

#[test]
fn explicit_modes_are_honoured() {
    for cpu in [milan(), CpuFeatures::from_cpuid(|_, _| [0; 4])] {
        for (request, mode) in [
            (ModeRequest::Ipi, TlbMode::Ipi),
            (ModeRequest::BroadcastSoftware, TlbMode::BroadcastSoftware),
        ] {
            let options = TlbOptions {
                mode: request,
                ..auto()
            };
            assert_eq!(
                choose(&options, &cpu)
                    .unwrap_or_else(|error| panic!("choose(&options, &cpu) failed: {error}"))
                    .mode,
                mode
            );
        }
    }
}
