//! Ending an emulator run with a status the host can read.
//!
//! QEMU's `isa-debug-exit` device (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`)
//! terminates the emulator when a value is written to its port, with exit
//! status `(value << 1) | 1`. The kernel writes 0x10 for success (status 33)
//! and 0x11 for failure (status 35); the host runner maps those back.

use x86_64::instructions::port::Port;

/// The I/O port the runner configures for `isa-debug-exit`.
const DEBUG_EXIT_PORT: u16 = 0xf4;

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
/// hardware, another hypervisor) the write does nothing, so the CPU then
/// halts for good after saying so.
pub fn exit_qemu(code: QemuExitCode) -> ! {
    let mut port = Port::<u32>::new(DEBUG_EXIT_PORT);
    // Writing to port 0xf4 has no effect on anything but the
    // isa-debug-exit device; on machines without that device the port is
    // unclaimed and the write is ignored.
    // SAFETY: port 0xf4 belongs to isa-debug-exit or to nobody.
    unsafe { port.write(code as u32) };
    crate::println!("no isa-debug-exit device: halting this CPU ({code:?})");
    crate::cpu::halt_forever()
}
