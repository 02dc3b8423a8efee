//! The `kernel` image: the kernel without its tests, as `cargo run` boots
//! it. The in-kernel tests are in the `kernel-tests` image
//! (`src/ktest/main.rs`).

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

fn main(boot_info: &'static mut bootloader_api::BootInfo) -> ! {
    kernel::boot::kernel_main(boot_info, None)
}

// The macro defines the `_start` symbol the bootloader jumps to; its
// exported-symbol attribute is the bootloader crate's code, not this crate's.
bootloader_api::entry_point!(main, config = &kernel::boot::BOOTLOADER_CONFIG);
