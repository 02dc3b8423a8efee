//! The COM1 serial port: the kernel's console.
//!
//! Everything the kernel says (logs, the banner, test results, crash reports)
//! goes out through the 16550 UART at I/O port 0x3F8, which the runner
//! connects to its standard output (`-serial stdio`).
//!
//! One lock serialises the writers so that lines from different CPUs do not
//! interleave. A crash report must never wait forever for that lock (the
//! crashing code may be the holder), so [`write_emergency`] takes it by force
//! after a bounded wait.

use core::fmt::{self, Write};

use spin::Mutex;
use uart_16550::{Config, Uart16550Tty, backend::PioBackend};

use crate::cpu::without_interrupts;

const COM1_PORT: u16 = 0x3F8;

/// How many times an emergency writer retries the lock before breaking it.
const EMERGENCY_LOCK_ATTEMPTS: u32 = 1_000_000;

/// `None` until [`init`] ran, or when no UART answered the loopback test.
static COM1: Mutex<Option<Uart16550Tty<PioBackend>>> = Mutex::new(None);

/// Initialises COM1 (115200 8N1). Without a working UART the kernel runs on
/// silently: output is dropped, nothing fails.
pub fn init() {
    // 0x3F8..0x3FF are the standard COM1 registers on every PC
    // platform the kernel supports; this module is their only user and keeps
    // the device for the kernel's whole lifetime.
    // SAFETY: COM1's ports are valid and exclusively this module's.
    let uart = unsafe { Uart16550Tty::new_port(COM1_PORT, Config::default()) };
    *COM1.lock() = uart.ok();
}

/// Writes formatted text to the console, holding the lock with interrupts
/// disabled so an interrupt handler on this CPU cannot deadlock on it.
pub fn write_fmt(args: fmt::Arguments<'_>) {
    without_interrupts(|| {
        if let Some(uart) = COM1.lock().as_mut() {
            // A UART cannot refuse bytes; `fmt::Error` can only come from a
            // `Display` implementation, and there is nobody to report it to.
            let _ = uart.write_fmt(args);
        }
    });
}

/// Writes formatted text even if the console lock is held, for crash reports.
///
/// Waits a bounded time for the lock; if it is still held, the holder is this
/// very CPU (a fault while printing) or a CPU that has stopped, and the lock is
/// broken so the report gets out.
pub fn write_emergency(args: fmt::Arguments<'_>) {
    without_interrupts(|| {
        for _ in 0..EMERGENCY_LOCK_ATTEMPTS {
            if let Some(mut guard) = COM1.try_lock() {
                if let Some(uart) = guard.as_mut() {
                    let _ = uart.write_fmt(args);
                }
                return;
            }
            core::hint::spin_loop();
        }
        // The machine is going down after this report. The holder is
        // either this CPU, interrupted by the fault inside `write_fmt` and never
        // to resume, or another CPU that kept the lock for over a million
        // attempts. At worst its output and ours interleave on the wire; the
        // UART state itself is a handful of I/O registers that tolerate it.
        // SAFETY: the lock's holder will never touch the UART again, or does so harmlessly.
        unsafe { COM1.force_unlock() };
        if let Some(uart) = COM1.lock().as_mut() {
            let _ = uart.write_fmt(args);
        }
    });
}
