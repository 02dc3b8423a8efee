//! Host side of the shootdown kernel: the disk images, the runner and the
//! parser for the kernel's test output.
//!
//! `build.rs` wraps the kernel ELF into BIOS and UEFI images with the
//! `bootloader` crate. [`machine`] boots one of them in QEMU, or under
//! Bochs for the PCID and INVPCID paths QEMU's TCG cannot run, with a
//! chosen CPU model, CPU count and kernel command line, enforces a timeout
//! and says how the run ended. [`report`] turns the kernel's `ktest:` lines
//! into per-test results; [`coherence`] reads the coherence stress's
//! summary; [`timeline`] turns the kernel's `timeline:` lines into a
//! Chrome trace and a picture (`cargo run -- --timeline DIR`). [`cli`] is
//! the `cargo run` front end; [`bench`](mod@bench) and [`fuzz`] are its
//! subcommands; [`drawing`] is what their pictures share; [`linux`] fetches
//! the Linux kernel `bench --against linux` boots beside this one.

pub mod bench;
pub mod cli;
pub mod coherence;
pub mod drawing;
pub mod fuzz;
pub mod linux;
pub mod machine;
pub mod report;
pub mod timeline;

/// Whether a kernel command line asks for the in-kernel tests (`run=tests`,
/// `run=list` or `test=...`), which only the `kernel-tests` image has: every
/// runner boots that image for such a command line.
pub fn cmdline_wants_tests(cmdline: &str) -> bool {
    cmdline
        .split_whitespace()
        .any(|word| word == "run=tests" || word == "run=list" || word.starts_with("test="))
}

/// The BIOS disk image of the kernel built with this crate.
pub const BIOS_IMAGE: &str = env!("KERNEL_BIOS_IMAGE");

/// The UEFI disk image of the kernel built with this crate.
pub const UEFI_IMAGE: &str = env!("KERNEL_UEFI_IMAGE");

/// The BIOS disk image of the kernel with its in-kernel tests.
pub const TESTS_BIOS_IMAGE: &str = env!("KERNEL_TESTS_BIOS_IMAGE");

/// The UEFI disk image of the kernel with its in-kernel tests.
pub const TESTS_UEFI_IMAGE: &str = env!("KERNEL_TESTS_UEFI_IMAGE");

/// The ELF of the `kernel` image with DWARF, for a debugger (the disk
/// images hold a copy without the DWARF).
pub const KERNEL_ELF: &str = env!("KERNEL_ELF");

/// The ELF of the `kernel-tests` image with DWARF.
pub const KERNEL_TESTS_ELF: &str = env!("KERNEL_TESTS_ELF");
