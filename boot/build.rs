//! Wraps the kernel ELF (built by cargo as an artifact dependency) into a BIOS
//! and a UEFI disk image with the `bootloader` crate, and tells the `boot`
//! library where they are through `BIOS_IMAGE` and `UEFI_IMAGE`.
//!
//! Both images carry a ramdisk: every program of the `user` crate (also an
//! artifact dependency), packed into a cpio "newc" archive (the format of
//! Linux's initramfs, see `build/ramdisk.rs`), written next to the images as
//! `ramdisk.cpio`. The bootloader loads it into memory and the kernel finds
//! its programs there by name.

#[path = "build/ramdisk.rs"]
mod ramdisk;

use std::path::{Path, PathBuf};

use bootloader::{BootConfig, DiskImageBuilder};

/// Cargo names each artifact binary of the `user` dependency in an
/// environment variable `CARGO_BIN_FILE_USER_<program name>`.
const USER_PROGRAM_PREFIX: &str = "CARGO_BIN_FILE_USER_";

fn main() {
    let kernel = PathBuf::from(
        std::env::var_os("CARGO_BIN_FILE_KERNEL_kernel")
            .expect("cargo did not build the kernel artifact (is `-Z bindeps` enabled?)"),
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));

    let ramdisk = out_dir.join("ramdisk.cpio");
    write_ramdisk(&ramdisk);

    let mut builder = DiskImageBuilder::new(kernel.clone());
    builder.set_boot_config(&quiet_boot_config());
    builder.set_ramdisk(ramdisk);

    let bios = out_dir.join("shootdown-bios.img");
    let uefi = out_dir.join("shootdown-uefi.img");
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

    println!("cargo:rustc-env=BIOS_IMAGE={}", bios.display());
    println!("cargo:rustc-env=UEFI_IMAGE={}", uefi.display());
    println!("cargo:rustc-env=KERNEL_ELF={}", kernel.display());
    println!("cargo:rerun-if-changed={}", kernel.display());
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
    let archive = ramdisk::pack(&programs);
    ramdisk::verify(&archive, &programs);
    std::fs::write(path, archive)
        .unwrap_or_else(|error| panic!("writing {}: {error}", path.display()));
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
