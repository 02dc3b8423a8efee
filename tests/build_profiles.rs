//! Every crate that runs in the guest is optimised as its profile says.
//!
//! The kernel images and the user programs are artifact build-dependencies
//! of `boot`, and cargo compiles build-dependencies with the build-override
//! profile (opt-level 0) unless a `[profile.*.package.NAME]` section names
//! the package; `package."*"` covers dependencies only, never the
//! workspace's own crates. A workspace crate without its two sections is
//! linked into the kernel unoptimised, and nothing but the benchmarks shows
//! it: `tlb-types` once cost the two-thread flush loop about 15%.

use std::{fs, path::Path};

/// Workspace members that never run in the guest: the host tools.
const HOST_ONLY: &[&str] = &[".", "boot", "xtask"];

/// The quoted names in the `members = [...]` line of the workspace.
fn members(manifest: &str) -> Vec<String> {
    let line = manifest
        .lines()
        .find(|line| line.trim_start().starts_with("members"))
        .expect("the workspace lists its members on one line");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn every_guest_crate_has_a_dev_and_a_release_profile_section() {
    let manifest = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .expect("the workspace manifest");
    let guest: Vec<String> = members(&manifest)
        .into_iter()
        .filter(|member| !HOST_ONLY.contains(&member.as_str()))
        .collect();
    assert!(
        guest.iter().any(|member| member == "tlb-types"),
        "the member list was not read: {guest:?}"
    );
    let mut missing = Vec::new();
    for member in &guest {
        for profile in ["dev", "release"] {
            let section = format!("[profile.{profile}.package.{member}]");
            if !manifest.lines().any(|line| line.trim() == section) {
                missing.push(section);
            }
        }
    }
    assert!(
        missing.is_empty(),
        "these crates run in the guest but would be built with opt-level 0: add {missing:?} to Cargo.toml"
    );
}
