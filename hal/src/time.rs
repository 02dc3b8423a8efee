//! The kernel's clock: nanoseconds since boot, from the TSC.
//!
//! The boot CPU measures the TSC rate once (see [`crate::tsc`]); every
//! CPU then converts its own TSC reading. This assumes the TSCs of all CPUs
//! run in step at a constant rate, which holds for the invariant TSC of
//! current AMD and Intel parts and in QEMU.

use core::time::Duration;

use spin::Once;

use crate::tsc;

struct Clock {
    tsc_hz: u64,
    boot_tsc: u64,
}

static CLOCK: Once<Clock> = Once::new();

/// Measures the TSC rate. Returns it in Hz.
pub fn init() -> Result<u64, tsc::CalibrationFailed> {
    let boot_tsc = tsc::read();
    let tsc_hz = tsc::measure_hz()?;
    Ok(CLOCK.call_once(|| Clock { tsc_hz, boot_tsc }).tsc_hz)
}

fn clock() -> &'static Clock {
    CLOCK
        .get()
        .expect("time::init runs before the clock is read")
}

/// Nanoseconds since [`init`].
pub fn now_ns() -> u64 {
    let clock = clock();
    let ticks = tsc::read().saturating_sub(clock.boot_tsc);
    (u128::from(ticks) * 1_000_000_000 / u128::from(clock.tsc_hz)) as u64
}

/// A point in time, for bounded waits.
#[derive(Clone, Copy, Debug)]
pub struct Deadline(u64);

impl Deadline {
    /// `after` from now.
    pub fn after(after: Duration) -> Self {
        Self(now_ns().saturating_add(after.as_nanos() as u64))
    }

    pub fn has_passed(&self) -> bool {
        now_ns() >= self.0
    }
}

/// Busy-waits for `duration`.
pub fn delay(duration: Duration) {
    let deadline = Deadline::after(duration);
    while !deadline.has_passed() {
        core::hint::spin_loop();
    }
}
