//! The one way a run ends after something went wrong in the kernel.
//!
//! Panics, CPU exceptions, unanswered IPIs and rejected boot input all come
//! here. The report goes out through the emergency console path (which
//! cannot deadlock on a console lock held by the failing code), the
//! in-kernel test that was running is reported as failed, and QEMU exits
//! with the failure status. Nothing here waits for another CPU, so a fatal
//! error can never turn into a hang.
//!
//! A kernel bug ([`stop`]) is reported with the CPU, the registers, a
//! symbolized backtrace ([`crate::backtrace`]) and the last system call each
//! CPU started (what a fuzzer needs to replay the crash); input the kernel
//! cannot boot with ([`reject`]) needs only its message.

use core::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};

use crate::arch::{
    cpu,
    qemu_exit::{QemuExitCode, exit_qemu},
    serial::write_emergency,
    stack_walk,
    trap::TrapFrame,
};

/// Set by the first CPU that stops the machine.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Ends the run for a kernel bug: prints `what`, the registers (of `frame`,
/// if the error was a trap, else the few that describe the reporting
/// context) and a backtrace, fails the running test and exits with the
/// failure status.
pub fn stop(what: fmt::Arguments<'_>, frame: Option<&TrapFrame>) -> ! {
    announce(what);
    match frame {
        Some(frame) => {
            crate::exceptions::print_registers(frame);
            crate::backtrace::print(frame.rip, frame.rbp);
        }
        None => {
            let (rip, rbp) = stack_walk::here();
            write_emergency(format_args!(
                "  no trap frame; at the report: rbp {rbp:#018x}  cr2 {:#018x}  cr3 {:#018x}  cr4 {:#x}\n",
                cpu::page_fault_address(),
                cpu::cr3_raw(),
                cpu::cr4_raw(),
            ));
            crate::backtrace::print(rip, rbp);
        }
    }
    crate::task::syscall::print_last_calls();
    finish(what)
}

/// Ends the run because the kernel cannot work with its input or hardware
/// (a rejected command line, too little memory): the message says it all.
pub fn reject(what: fmt::Arguments<'_>) -> ! {
    announce(what);
    finish(what)
}

/// Prints the first line of the report; a CPU that finds another one
/// already stopping the machine adds its line and ends the run at once.
fn announce(what: fmt::Arguments<'_>) {
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
}

fn finish(what: fmt::Arguments<'_>) -> ! {
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
