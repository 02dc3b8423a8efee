//! The one way a run ends after something went wrong in the kernel.
//!
//! Panics, CPU exceptions, unanswered IPIs and rejected boot input all come
//! here. The report goes out through the emergency console path (which
//! cannot deadlock on a console lock held by the failing code), the
//! in-kernel test that was running is reported as failed, and QEMU exits
//! with the failure status. Nothing here waits for another CPU, so a fatal
//! error can never turn into a hang.
//!
//! A kernel bug ([`stop`]) is reported with the CPU, the registers and a
//! symbolized backtrace ([`crate::backtrace`]); input the kernel cannot boot
//! with ([`reject`]) needs only its message.
//!
//! Modules that have more to say are registered here at boot
//! ([`set_reporters`], by `boot`) rather than called by name: the system-call log adds the last call
//! each CPU started (what a fuzzer needs to replay a crash), and the test
//! framework fails the test that was running. This module stays at the
//! bottom of the kernel, below everything it reports on.

use core::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};

use hal::{
    cpu,
    qemu_exit::{QemuExitCode, exit_qemu},
    serial::write_emergency,
    stack_walk,
    trap::TrapFrame,
};
use spin::Once;

/// Set by the first CPU that stops the machine.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// What the fatal path tells the modules that report on it.
pub struct Reporters {
    /// After the backtrace of a kernel bug: more about the machine's state.
    pub bug_details: fn(),
    /// Last, on every fatal end, with its reason.
    pub run_ends: fn(fmt::Arguments<'_>),
}

static REPORTERS: Once<Reporters> = Once::new();

/// Registers what the fatal path reports besides the error itself. Called
/// once at boot, before anything can go wrong that is worth more than its
/// message; the first registration stays.
pub fn set_reporters(reporters: Reporters) {
    REPORTERS.call_once(|| reporters);
}

/// Ends the run for a kernel bug: prints `what`, the registers (of `frame`,
/// if the error was a trap, else the few that describe the reporting
/// context) and a backtrace, fails the running test and exits with the
/// failure status.
pub fn stop(what: fmt::Arguments<'_>, frame: Option<&TrapFrame>) -> ! {
    announce(what);
    match frame {
        Some(frame) => {
            print_registers(frame);
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
    if let Some(reporters) = REPORTERS.get() {
        (reporters.bug_details)();
    }
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
    match hal::percpu::current_if_installed() {
        Some(cpu) => write_emergency(format_args!("\nFATAL on CPU {}: {what}\n", cpu.index)),
        None => write_emergency(format_args!("\nFATAL: {what}\n")),
    }
}

fn finish(what: fmt::Arguments<'_>) -> ! {
    if let Some(reporters) = REPORTERS.get() {
        (reporters.run_ends)(what);
    }
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

/// Prints every register of `frame` plus CR2, CR3 and CR4.
fn print_registers(frame: &TrapFrame) {
    write_emergency(format_args!(
        "  rip {:#018x}  cs  {:#06x}  rflags {:#010x}  rsp {:#018x}  ss {:#06x}\n\
         \x20 rax {:#018x}  rbx {:#018x}  rcx {:#018x}  rdx {:#018x}\n\
         \x20 rsi {:#018x}  rdi {:#018x}  rbp {:#018x}  r8  {:#018x}\n\
         \x20 r9  {:#018x}  r10 {:#018x}  r11 {:#018x}  r12 {:#018x}\n\
         \x20 r13 {:#018x}  r14 {:#018x}  r15 {:#018x}\n\
         \x20 vector {}  error code {:#x}  cr2 {:#018x}  cr3 {:#018x}  cr4 {:#x}\n",
        frame.rip,
        frame.cs,
        frame.rflags,
        frame.rsp,
        frame.ss,
        frame.rax,
        frame.rbx,
        frame.rcx,
        frame.rdx,
        frame.rsi,
        frame.rdi,
        frame.rbp,
        frame.r8,
        frame.r9,
        frame.r10,
        frame.r11,
        frame.r12,
        frame.r13,
        frame.r14,
        frame.r15,
        frame.vector,
        frame.error_code,
        cpu::page_fault_address(),
        cpu::cr3_raw(),
        cpu::cr4_raw(),
    ));
}
