//! The time-stamp counter, and measuring its frequency with the PIT.
//!
//! The kernel's clock is the TSC: cheap to read on every CPU and, on the CPUs
//! this kernel targets (and in QEMU), running at a constant rate. Its rate is
//! not architecturally known, so the boot CPU measures it once against the
//! 8254 PIT, whose input clock is fixed at 1.193182 MHz: channel 2 counts
//! down a 10 ms interval, and the TSC ticks in between give the rate.
//! Channel 2 is used because it can be started and polled through port 0x61
//! without any interrupt.
//!
//! A CPU that stops for a while between starting the PIT and reading the
//! TSC, or between the PIT's end and the poll that sees it, measures a
//! window of the wrong length: an SMI on real hardware, and under an
//! emulator any moment the host does not run the virtual CPU (a millisecond
//! is a tenth of the window). So each edge is bracketed by two TSC reads, a
//! window whose brackets are not tight is measured again, and the rate is
//! the median of several windows.

use x86_64::instructions::port::Port;

const PIT_HZ: u64 = 1_193_182;
const CALIBRATION_MS: u64 = 10;
const PIT_CHANNEL2_DATA: u16 = 0x42;
const PIT_COMMAND: u16 = 0x43;
const SPEAKER_CONTROL: u16 = 0x61;
/// Port 0x61 bit 0 gates channel 2; bit 1 would drive the speaker; bit 5
/// reads channel 2's output.
const GATE: u8 = 1 << 0;
const SPEAKER: u8 = 1 << 1;
const OUTPUT: u8 = 1 << 5;
/// Give up if the PIT has not finished after this many TSC ticks (a machine
/// without a PIT, or a TSC that does not count).
const GIVE_UP_AFTER_TICKS: u64 = 50_000_000_000;

/// Reads this CPU's time-stamp counter.
pub fn read() -> u64 {
    // RDTSC has no side effects and is available on every x86-64 CPU
    // (CR4.TSD is clear, so it is allowed at any privilege level).
    // SAFETY: RDTSC is always available and has no side effects.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Why the TSC rate could not be measured.
#[derive(Debug)]
pub struct CalibrationFailed;

/// Measures the TSC frequency in Hz against the PIT: the median of
/// [`WINDOWS`] windows whose edges were seen promptly.
pub fn measure_hz() -> Result<u64, CalibrationFailed> {
    median_of_windows(one_window)
}

/// Windows a calibration keeps, and how many it may try for them.
pub const WINDOWS: usize = 5;
const TRIES: usize = 50;
/// An edge is seen promptly if the TSC reads around it are less than this
/// part of the window apart (1/200: 0.5%, 50 us of 10 ms).
pub const BRACKET_PART: u64 = 200;

/// One measurement of a calibration window, and whether both its edges
/// were seen promptly.
pub struct Window {
    pub value: u64,
    pub prompt: bool,
}

/// The median of the first [`WINDOWS`] prompt measurements by `window`, in
/// at most fifty tries; on a machine so busy that none was prompt, the last.
pub fn median_of_windows<E>(mut window: impl FnMut() -> Result<Window, E>) -> Result<u64, E> {
    let mut kept = [0; WINDOWS];
    let mut count = 0;
    let mut last = 0;
    for _ in 0..TRIES {
        let measured = window()?;
        last = measured.value;
        if measured.prompt {
            kept[count] = measured.value;
            count += 1;
            if count == WINDOWS {
                break;
            }
        }
    }
    if count == 0 {
        return Ok(last);
    }
    let kept = &mut kept[..count];
    kept.sort_unstable();
    Ok(kept[count / 2])
}

/// One window: the TSC rate it measured.
fn one_window() -> Result<Window, CalibrationFailed> {
    let mut control = Port::<u8>::new(SPEAKER_CONTROL);
    let mut command = Port::<u8>::new(PIT_COMMAND);
    let mut channel2 = Port::<u8>::new(PIT_CHANNEL2_DATA);
    let count = PIT_HZ * CALIBRATION_MS / 1000;
    // These are the PIT's command and channel-2 ports and the speaker
    // control port; channel 2 drives nothing but the (disabled) speaker, so
    // programming it affects no other device. Mode 0 ("interrupt on terminal
    // count") raises channel 2's output when the count reaches zero.
    // SAFETY: only PIT channel 2 and the speaker gate are programmed.
    let (before_start, after_start) = unsafe {
        let gate_off = control.read() & !(GATE | SPEAKER);
        control.write(gate_off);
        command.write(0b1011_0000); // channel 2, lobyte/hibyte, mode 0, binary
        channel2.write(count as u8);
        channel2.write((count >> 8) as u8);
        let before = read();
        control.write(gate_off | GATE);
        (before, read())
    };
    let mut last_poll = after_start;
    loop {
        // SAFETY: reading port 0x61 only samples status bits.
        let status = unsafe { control.read() };
        let now = read();
        if status & OUTPUT != 0 {
            // The PIT ended between the last poll and this one.
            let window = now - after_start;
            let prompt = |bracket: u64| bracket * BRACKET_PART < window;
            return Ok(Window {
                value: window * 1000 / CALIBRATION_MS,
                prompt: prompt(after_start - before_start) && prompt(now - last_poll),
            });
        }
        if now.wrapping_sub(after_start) > GIVE_UP_AFTER_TICKS {
            return Err(CalibrationFailed);
        }
        last_poll = now;
        core::hint::spin_loop();
    }
}
