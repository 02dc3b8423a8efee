//! Host tests of the CPUID decoding.

use super::{CpuFeatures, decode_signature};

#[test]
fn decodes_signatures() {
    // EPYC 7763 (Milan, Zen 3): family 19h, model 01h, stepping 1.
    assert_eq!(decode_signature(0x00A0_0F11), (0x19, 0x01, 1));
    // EPYC 7002 (Rome, Zen 2): family 17h, model 31h, stepping 0.
    assert_eq!(decode_signature(0x0083_0F10), (0x17, 0x31, 0));
    // Intel Skylake client: family 6, model 5Eh, stepping 3.
    assert_eq!(decode_signature(0x0005_06E3), (6, 0x5E, 3));
}

#[test]
fn invlpgb_needs_zen3() {
    let mut cpu = CpuFeatures::from_cpuid(|_, _| [0; 4]);
    cpu.vendor = *b"AuthenticAMD";
    cpu.invlpgb = Some(7);
    cpu.family = 0x17;
    assert!(
        !cpu.invlpgb_usable(),
        "INVLPGB must be ignored on Zen 2 (family 17h)"
    );
    cpu.family = 0x19;
    assert!(cpu.invlpgb_usable());
    cpu.invlpgb = None;
    assert!(!cpu.invlpgb_usable());
}
