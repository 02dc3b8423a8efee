//! The one way a run ends after something went wrong in the kernel.
//!
//! Panics, CPU exceptions and rejected boot input all come here. The report
//! goes out through the emergency console path (which cannot deadlock on a
//! console lock held by the failing code), the in-kernel test that was running
//! is reported as failed, and QEMU exits with the failure status. Nothing here
//! waits for another CPU, so a fatal error can never turn into a hang.

use core::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};

use crate::arch::{
    qemu_exit::{QemuExitCode, exit_qemu},
    serial::write_emergency,
    trap::TrapFrame,
};

/// Set by the first CPU that stops the machine.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Prints `what` (and the register dump of `frame`, if the error was a trap),
/// fails the running test and ends the run with the failure status.
pub fn stop(what: fmt::Arguments<'_>, frame: Option<&TrapFrame>) -> ! {
    if STOPPING.swap(true, Ordering::AcqRel) {
        // A second fatal error, either on another CPU or while this one was
        // printing the first report: the first report is what matters.
        write_emergency(format_args!("\nFATAL (while already stopping): {what}\n"));
        exit_qemu(QemuExitCode::Failure);
    }
    match crate::arch::percpu::current_if_installed() {
        Some(cpu) => write_emergency(format_args!("\nFATAL on CPU {}: {what}\n", cpu.index)),
        None => write_emergency(format_args!("\nFATAL: {what}\n")),
    }
    if let Some(frame) = frame {
        crate::exceptions::print_registers(frame);
    }
    crate::ktest::report_abort(what);
    exit_qemu(QemuExitCode::Failure)
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    match info.location() {
        Some(location) => stop(
            format_args!("kernel panic at {location}: {}", info.message()),
            None,
        ),
        None => stop(format_args!("kernel panic: {}", info.message()), None),
    }
}
