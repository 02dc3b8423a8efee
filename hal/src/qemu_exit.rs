//! Ending an emulator run with a status the host can read.
//!
//! QEMU's `isa-debug-exit` device (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`)
//! terminates the emulator when a value is written to its port, with exit
//! status `(value << 1) | 1`. The kernel writes 0x10 for success (status 33)
//! and 0x11 for failure (status 35); the host runner maps those back.

use core::time::Duration;

use x86_64::instructions::port::Port;

use crate::time;

/// The I/O port the runner configures for `isa-debug-exit`.
const DEBUG_EXIT_PORT: u16 = 0xf4;

/// How long the CPU waits after the write before it concludes that no
/// device took it. QEMU 7.2 exits inside the write, but QEMU 10 only asks
/// its main loop to stop the machine, so the vCPU runs on for a moment;
/// without the wait, the start of the "no isa-debug-exit device" line
/// reached the serial port of a run that was ending (a stray `no` after
/// the results). Fifty milliseconds outlast a busy host's scheduling delays
/// of the emulator's main loop, cost little in a suite of hundreds of
/// boots, and are nothing to a machine that halts for good.
const EXIT_GRACE: Duration = Duration::from_millis(50);

/// What the run achieved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum QemuExitCode {
    /// QEMU exits with status 33.
    Success = 0x10,
    /// QEMU exits with status 35.
    Failure = 0x11,
}

/// Ends the emulator run. On a machine without `isa-debug-exit` (real
/// hardware, another hypervisor, Bochs) the write does nothing, so the CPU
/// then halts for good after saying so; the Bochs runner reads that line
/// as the run's status. Before saying so it waits a moment for an emulator
/// that stops the machine late; before the clock is measured (a fatal
/// error early in boot) it cannot, and on such an emulator the line may be
/// cut short.
pub fn exit_qemu(code: QemuExitCode) -> ! {
    // Nothing may take this CPU away between the write and the line below.
    crate::cpu::disable_interrupts();
    let mut port = Port::<u32>::new(DEBUG_EXIT_PORT);
    // Writing to port 0xf4 has no effect on anything but the
    // isa-debug-exit device; on machines without that device the port is
    // unclaimed and the write is ignored.
    // SAFETY: port 0xf4 belongs to isa-debug-exit or to nobody.
    unsafe { port.write(code as u32) };
    if time::is_measured() {
        time::delay(EXIT_GRACE);
    }
    crate::println!("no isa-debug-exit device: halting this CPU ({code:?})");
    crate::cpu::halt_forever()
}
