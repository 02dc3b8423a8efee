//! Wraps the two kernel ELFs (built by cargo as artifact dependencies: the
//! `kernel` image and the `kernel-tests` image with the in-kernel tests) into
//! a BIOS and a UEFI disk image each with the `bootloader` crate, and tells
//! the `boot` library where they are (`KERNEL_BIOS_IMAGE`,
//! `KERNEL_TESTS_UEFI_IMAGE`, ...).
//!
//! Every image carries a ramdisk: every program of the `user` crate (also an
//! artifact dependency) and the C programs of `user/c/`, built static with
//! musl and with glibc (`build/c_programs.rs`), packed into a cpio "newc"
//! archive (the format of Linux's initramfs, see `build/ramdisk.rs`),
//! written next to the images as `ramdisk.cpio`. The bootloader loads it
//! into memory and the kernel finds its programs there by name.

#[path = "build/c_programs.rs"]
mod c_programs;
#[path = "build/ramdisk.rs"]
mod ramdisk;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use bootloader::{BootConfig, DiskImageBuilder};

/// Cargo names each artifact binary of the `user` dependency in an
/// environment variable `CARGO_BIN_FILE_USER_<program name>`.
const USER_PROGRAM_PREFIX: &str = "CARGO_BIN_FILE_USER_";

fn main() {
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));
    let ramdisk = out_dir.join("ramdisk.cpio");
    write_ramdisk(&ramdisk);
    // The kernel as `cargo run` boots it, and the same kernel with its
    // in-kernel tests (see kernel/Cargo.toml).
    for (binary, name, variable) in [
        ("kernel", "shootdown", "KERNEL"),
        ("kernel-tests", "shootdown-tests", "KERNEL_TESTS"),
    ] {
        let kernel = PathBuf::from(
            std::env::var_os(format!("CARGO_BIN_FILE_KERNEL_{binary}"))
                .expect("cargo did not build the kernel artifact (is `-Z bindeps` enabled?)"),
        );
        println!("cargo:rerun-if-changed={}", kernel.display());
        // The ELF with DWARF is what a debugger loads.
        println!("cargo:rustc-env={variable}_ELF={}", kernel.display());
        let stripped = out_dir.join(format!("{name}.elf"));
        strip_debug_info(&kernel, &stripped);
        write_images(&stripped, &ramdisk, &out_dir, name, variable);
    }
}

/// Copies `kernel` to `stripped` without its DWARF sections (`.symtab`
/// stays: the kernel reads it for backtraces), with the toolchain's
/// `llvm-objcopy` (the `llvm-tools-preview` component rust-toolchain.toml
/// installs).
fn strip_debug_info(kernel: &Path, stripped: &Path) {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "running {} --print sysroot: {error}",
                Path::new(&rustc).display()
            )
        });
    let sysroot = String::from_utf8(sysroot.stdout).expect("the sysroot path is UTF-8");
    let host = std::env::var("HOST").expect("cargo sets HOST");
    let objcopy = Path::new(sysroot.trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/llvm-objcopy");
    let status = Command::new(&objcopy)
        .arg("--strip-debug")
        .arg(kernel)
        .arg(stripped)
        .status()
        .unwrap_or_else(|error| {
            panic!(
                "running {}: {error} (is the llvm-tools-preview component installed? \
                 `rustup component add llvm-tools-preview`)",
                objcopy.display()
            )
        });
    assert!(status.success(), "{} failed: {status}", objcopy.display());
}

/// Wraps `kernel` and `ramdisk` into a BIOS and a UEFI disk image named
/// after `name`, and tells the `boot` library where they are through
/// `{variable}_BIOS_IMAGE` and `{variable}_UEFI_IMAGE`.
fn write_images(kernel: &Path, ramdisk: &Path, out_dir: &Path, name: &str, variable: &str) {
    let mut builder = DiskImageBuilder::new(kernel.to_path_buf());
    builder.set_boot_config(&quiet_boot_config());
    builder.set_ramdisk(ramdisk.to_path_buf());

    let bios = out_dir.join(format!("{name}-bios.img"));
    let uefi = out_dir.join(format!("{name}-uefi.img"));
    builder.create_bios_image(&bios).unwrap_or_else(|error| {
        panic!(
            "creating the BIOS image {} failed: {error:#}",
            bios.display()
        )
    });
    builder.create_uefi_image(&uefi).unwrap_or_else(|error| {
        panic!(
            "creating the UEFI image {} failed: {error:#}",
            uefi.display()
        )
    });

    println!("cargo:rustc-env={variable}_BIOS_IMAGE={}", bios.display());
    println!("cargo:rustc-env={variable}_UEFI_IMAGE={}", uefi.display());
}

/// Packs every user program into the ramdisk archive at `path`, so that a new
/// file in `user/src/bin/` ships without any change here.
fn write_ramdisk(path: &Path) {
    let mut programs = Vec::new();
    for (variable, file) in std::env::vars_os() {
        let Some(name) = variable
            .to_str()
            .and_then(|variable| variable.strip_prefix(USER_PROGRAM_PREFIX))
        else {
            continue;
        };
        let contents = std::fs::read(&file).unwrap_or_else(|error| {
            panic!(
                "reading user program {}: {error}",
                Path::new(&file).display()
            )
        });
        println!("cargo:rerun-if-changed={}", Path::new(&file).display());
        programs.push((name.to_owned(), contents));
    }
    assert!(
        !programs.is_empty(),
        "cargo built no user programs (is `user` an artifact build-dependency?)"
    );
    // The C programs, also left where `bench --against linux` finds them.
    let c_programs_dir = profile_dir(path).join("c-programs");
    programs.extend(c_programs::build(
        &workspace_root().join("user/c"),
        &c_programs_dir,
    ));
    println!(
        "cargo:rustc-env=C_PROGRAMS_DIR={}",
        c_programs_dir.display()
    );
    let archive = ramdisk::pack(&programs);
    ramdisk::verify(&archive, &programs);
    std::fs::write(path, archive)
        .unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
}

/// The workspace's root, the parent of this crate's directory.
fn workspace_root() -> PathBuf {
    let manifest_dir =
        std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    Path::new(&manifest_dir)
        .parent()
        .expect("boot/ lies in the workspace")
        .to_path_buf()
}

/// `target/<profile>/`, from a path in this build script's `OUT_DIR`,
/// which lies in the profile's `build/` directory (at
/// `build/boot-<hash>/out/` or, with newer cargo, `build/boot/<hash>/out/`).
fn profile_dir(in_out_dir: &Path) -> PathBuf {
    in_out_dir
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "build"))
        .and_then(Path::parent)
        .expect("OUT_DIR lies in the profile's build/ directory")
        .to_path_buf()
}

/// The bootloader logs to the serial port and the framebuffer by default. Its
/// lines would mix with the kernel's test output, and framebuffer logging is
/// slow under TCG, so both are off: the serial port belongs to the kernel.
fn quiet_boot_config() -> BootConfig {
    let mut config = BootConfig::default();
    config.serial_logging = false;
    config.frame_buffer_logging = false;
    config
}
