//! Wraps the kernel ELF (built by cargo as an artifact dependency) into a BIOS
//! and a UEFI disk image with the `bootloader` crate, and tells the `boot`
//! library where they are through `BIOS_IMAGE` and `UEFI_IMAGE`.

use std::path::PathBuf;

use bootloader::{BootConfig, DiskImageBuilder};

fn main() {
    let kernel = PathBuf::from(
        std::env::var_os("CARGO_BIN_FILE_KERNEL_kernel")
            .expect("cargo did not build the kernel artifact (is `-Z bindeps` enabled?)"),
    );
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR is set by cargo"));

    let mut builder = DiskImageBuilder::new(kernel.clone());
    builder.set_boot_config(&quiet_boot_config());

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

/// The bootloader logs to the serial port and the framebuffer by default. Its
/// lines would mix with the kernel's test output, and framebuffer logging is
/// slow under TCG, so both are off: the serial port belongs to the kernel.
fn quiet_boot_config() -> BootConfig {
    let mut config = BootConfig::default();
    config.serial_logging = false;
    config.frame_buffer_logging = false;
    config
}
