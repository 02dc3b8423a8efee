//! # shootdown: a teaching kernel for TLB shootdown
//!
//! This is the kernel binary. It boots through the `bootloader` crate on one
//! CPU, sets up its descriptor tables, memory and console, reads its command
//! line, prints what hardware it found, and runs the selected workload: the
//! guided demo, or the in-kernel tests.
//!
//! Layout:
//! - [`arch`]: every privileged instruction and every `unsafe` block;
//! - [`memory`]: frame allocator and heap;
//! - [`acpi`], [`smp`], [`time`], [`interrupts`]: finding and starting
//!   the other CPUs, the clock and tick, and cross-CPU calls;
//! - [`exceptions`], [`fatal`], [`backtrace`] and [`symbols`]: how faults
//!   and panics are reported, down to the names of the functions involved;
//! - [`cmdline`]: the options, read from QEMU's fw_cfg;
//! - [`ktest`]: the in-kernel test framework.
//!
//! The decisions about TLBs live in the separate, host-testable `mm` crate.

#![no_std]
#![no_main]
#![warn(clippy::undocumented_unsafe_blocks, clippy::missing_safety_doc)]

extern crate alloc;

mod acpi;
mod arch;
mod backtrace;
mod banner;
mod cmdline;
mod console;
mod cpu_features;
mod demo;
mod elf;
mod exceptions;
mod fatal;
mod initrd;
mod interrupts;
mod ktest;
mod logger;
mod memory;
mod smp;
mod symbols;
mod task;
mod time;
mod tlb;
mod tlb_broadcast;
mod tlb_latency;

use bootloader_api::{BootInfo, BootloaderConfig, config::Mapping, entry_point};
use spin::Once;

use crate::{
    arch::qemu_exit::{QemuExitCode, exit_qemu},
    cmdline::Workload,
};

/// Where the kernel image is mapped: the top 2 GiB of the address space.
const KERNEL_BASE: u64 = 0xffff_ffff_8000_0000;

/// Start of the upper (kernel) half of the canonical address space.
const UPPER_HALF_START: u64 = 0xffff_8000_0000_0000;

/// Asks the bootloader to put everything it maps for the kernel (the image,
/// its stack, the boot information and the window onto all physical memory)
/// in the upper half, leaving the lower half free for user address spaces,
/// and to give the kernel a roomy stack.
const BOOTLOADER_CONFIG: BootloaderConfig = {
    let mut config = BootloaderConfig::new_default();
    config.mappings.kernel_base = Mapping::FixedAddress(KERNEL_BASE);
    config.mappings.dynamic_range_start = Some(UPPER_HALF_START);
    config.mappings.physical_memory = Some(Mapping::Dynamic);
    config.kernel_stack_size = 256 * 1024;
    config
};

entry_point!(kernel_main, config = &BOOTLOADER_CONFIG);

/// What CPU bring-up found, for the banner and the tests.
static SMP_SUMMARY: Once<smp::SmpSummary> = Once::new();

fn kernel_main(boot_info: &'static mut BootInfo) -> ! {
    arch::serial::init();
    // The host runner times the boot up to this line.
    println!("shootdown: kernel entered");
    logger::init();
    arch::init_boot_cpu();

    let memory = memory::init(boot_info)
        .unwrap_or_else(|error| fatal::reject(format_args!("memory: {error}")));
    arch::paging::init()
        .unwrap_or_else(|error| fatal::reject(format_args!("kernel page tables: {error}")));
    let symbol_count = arch::kernel_image::file(boot_info)
        .and_then(|file| symbols::init(file, boot_info.kernel_image_offset));
    initrd::init(boot_info).unwrap_or_else(|error| fatal::reject(format_args!("ramdisk: {error}")));
    let options = cmdline::load().unwrap_or_else(|error| {
        fatal::reject(format_args!("rejected kernel command line: {error}"))
    });
    logger::set_level(options.log_level);

    let cpu = cpu_features::CpuFeatures::detect();
    let topology = acpi::discover(boot_info.rsdp_addr.into_option())
        .unwrap_or_else(|error| fatal::reject(format_args!("cannot find the CPUs: {error}")));
    let smp = smp::init(&topology, &cpu, &options.tlb)
        .unwrap_or_else(|error| fatal::reject(format_args!("smp: {error}")));
    let smp = SMP_SUMMARY.call_once(|| smp);
    banner::print(&cpu, &memory, smp, symbol_count);

    let outcome = match options.workload {
        Workload::Demo => {
            if demo::run() {
                QemuExitCode::Success
            } else {
                QemuExitCode::Failure
            }
        }
        Workload::ListTests => {
            ktest::list();
            QemuExitCode::Success
        }
        Workload::Program => {
            let (name, args) = options.program.as_ref().expect("exec= sets the program");
            run_program(name, args)
        }
        Workload::Tests => match ktest::run(&options.test_filters) {
            Ok(true) => QemuExitCode::Success,
            Ok(false) => QemuExitCode::Failure,
            Err(unmatched) => fatal::reject(format_args!("{unmatched}")),
        },
    };
    println!("{}", tlb::counters_line());
    println!("{}", tlb_latency::line());
    exit_qemu(outcome)
}

/// Runs one user program to completion; success if it exits with 0.
fn run_program(name: &str, args: &str) -> QemuExitCode {
    match task::loader::spawn(name, args, None) {
        Ok(process) => {
            let code = process.wait().unwrap_or(-1);
            println!("exec: {name} (pid {}) exited with {code}", process.pid);
            if code == 0 {
                QemuExitCode::Success
            } else {
                QemuExitCode::Failure
            }
        }
        Err(errno) => {
            println!("exec: cannot start {name}: {errno:?}");
            QemuExitCode::Failure
        }
    }
}
