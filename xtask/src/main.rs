//! `cargo docs` (an alias in `.cargo/config.toml`): the API documentation of
//! every crate of the workspace, each built as it runs.
//!
//! One `cargo doc` cannot do it. The host crates (`abi`, `tlb-types`, `mm`,
//! `boot`, the runner) are documented for the host; `hal` and the kernel
//! only exist whole for `x86_64-unknown-none` (on the host the kernel is its
//! library of pure modules, which links to modules it does not have there).
//! So this runs `cargo doc` twice, with whatever `RUSTDOCFLAGS` it was given
//! (CI passes `-D warnings`), and says where each set of pages is.
//!
//! `cargo docs --private` adds `--document-private-items`: each module's
//! explanation, for readers of the code rather than users of the API.

use std::{
    env,
    process::{Command, ExitCode},
};

/// The crates documented for the host.
const HOST_CRATES: &[&str] = &["abi", "tlb-types", "mm", "boot", "shootdown"];
/// The crates documented for the kernel's target, and what they need.
const TARGET_CRATES: &[&str] = &["hal", "kernel"];
const TARGET: &str = "x86_64-unknown-none";
const TARGET_FEATURES: &str = "kernel/image";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let private = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["docs"] => false,
        ["docs", "--private"] => true,
        _ => {
            eprintln!("usage: cargo docs [--private]");
            return ExitCode::from(2);
        }
    };
    let host = cargo_doc(HOST_CRATES, &[], private);
    let target = cargo_doc(
        TARGET_CRATES,
        &["--target", TARGET, "--features", TARGET_FEATURES],
        private,
    );
    if !(host && target) {
        eprintln!("docs: cargo doc failed (see above)");
        return ExitCode::FAILURE;
    }
    println!(
        "docs: the host crates: target/doc/mm/index.html (and abi, tlb_types, boot, shootdown)"
    );
    println!("docs: the kernel and hal: target/{TARGET}/doc/kernel/index.html (and hal)");
    ExitCode::SUCCESS
}

/// Runs `cargo doc --no-deps` for `crates` with `extra` arguments; whether
/// it succeeded.
fn cargo_doc(crates: &[&str], extra: &[&str], private: bool) -> bool {
    // The cargo that runs this program (so the same toolchain).
    let cargo = env::var("CARGO").unwrap_or_else(|_| String::from("cargo"));
    let mut command = Command::new(cargo);
    command.args(["doc", "--no-deps"]);
    for name in crates {
        command.args(["-p", name]);
    }
    command.args(extra);
    if private {
        command.arg("--document-private-items");
    }
    match command.status() {
        Ok(status) => status.success(),
        Err(error) => {
            eprintln!("docs: cannot run cargo: {error}");
            false
        }
    }
}
