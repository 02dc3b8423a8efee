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
    /// Nanoseconds per TSC tick, times 2^32: converting is a multiply and a
    /// shift, not a 128-bit division (the clock is read in every wait loop).
    ns_per_tick_fixed: u64,
}

static CLOCK: Once<Clock> = Once::new();

/// Measures the TSC rate. Returns it in Hz.
pub fn init() -> Result<u64, tsc::CalibrationFailed> {
    let boot_tsc = tsc::read();
    let tsc_hz = tsc::measure_hz()?;
    let ns_per_tick_fixed = ((1_000_000_000u128 << 32) / u128::from(tsc_hz.max(1))) as u64;
    Ok(CLOCK
        .call_once(|| Clock {
            tsc_hz,
            boot_tsc,
            ns_per_tick_fixed,
        })
        .tsc_hz)
}

/// Whether [`init`] has measured the TSC, so that [`Deadline`] and
/// [`delay`] can be used: code that may run before that (the exit path of
/// an early fatal error) asks first.
pub fn is_measured() -> bool {
    CLOCK.get().is_some()
}

/// The TSC's rate, in Hz, as [`init`] measured it.
pub fn tsc_hz() -> u64 {
    clock().tsc_hz
}

fn clock() -> &'static Clock {
    CLOCK
        .get()
        .expect("time::init runs before the clock is read")
}

/// Nanoseconds since [`init`].
pub fn now_ns() -> u64 {
    ticks_to_ns(tsc::read().saturating_sub(clock().boot_tsc))
}

/// The TSC now: a timestamp that costs one instruction, for intervals
/// measured on hot paths and converted later with [`ticks_to_ns`].
pub fn ticks() -> u64 {
    tsc::read()
}

/// An interval of `ticks` TSC ticks in nanoseconds.
pub fn ticks_to_ns(ticks: u64) -> u64 {
    ((u128::from(ticks) * u128::from(clock().ns_per_tick_fixed)) >> 32) as u64
}

/// A point in time, for bounded waits: a TSC value, so that checking it in
/// a spin loop costs one instruction and a compare.
#[derive(Clone, Copy, Debug)]
pub struct Deadline(u64);

impl Deadline {
    /// `after` from now.
    pub fn after(after: Duration) -> Self {
        let ticks = u128::from(clock().tsc_hz) * after.as_nanos() / 1_000_000_000;
        Self(tsc::read().saturating_add(u64::try_from(ticks).unwrap_or(u64::MAX)))
    }

    pub fn has_passed(&self) -> bool {
        tsc::read() >= self.0
    }
}

/// Busy-waits for `duration`.
pub fn delay(duration: Duration) {
    let deadline = Deadline::after(duration);
    while !deadline.has_passed() {
        core::hint::spin_loop();
    }
}
