//! Which emulator tiers this build's tests can run.
//!
//! Three test tiers need an emulator that Debian's QEMU 7.2 is not: QEMU 10
//! for x2APIC (`tests/x2apic.rs`), the project's patched QEMU for INVLPGB
//! (`tests/invlpgb.rs`, one test of `tests/timeline.rs`) and Bochs for PCID
//! (`tests/bochs.rs`). Each is named by an environment variable, which
//! `.ci/run` sets. Where one is not set, its tests are compiled with
//! `#[ignore]` and a reason, so that `cargo test` counts them as *ignored*
//! and says why, instead of counting a test that ran nothing as passed.
//! `cargo test -- --ignored` runs them anyway, and each then fails saying
//! which variable to set.

/// Each tier's environment variable and the `cfg` it turns on.
const TIERS: [(&str, &str); 3] = [
    ("SHOOTDOWN_QEMU10", "tier_qemu10"),
    ("SHOOTDOWN_QEMU_INVLPGB", "tier_qemu_invlpgb"),
    ("SHOOTDOWN_BOCHS", "tier_bochs"),
];

fn main() {
    for (variable, cfg) in TIERS {
        println!("cargo::rerun-if-env-changed={variable}");
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        let set = std::env::var_os(variable).is_some_and(|value| !value.is_empty() && value != "0");
        if set {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
}
