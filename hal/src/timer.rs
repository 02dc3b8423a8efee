//! The periodic tick: each CPU's local APIC timer, calibrated once.
//!
//! The APIC timer counts down at a rate the architecture does not specify,
//! so the boot CPU lets it run for 10 ms of TSC time and counts. Every CPU
//! then programs the same period.

use core::time::Duration;

use spin::Once;

use crate::{apic::LocalApic, time, vectors};

/// Timer interrupts per second on every CPU.
pub const TICK_HZ: u64 = 100;

const CALIBRATION: Duration = Duration::from_millis(10);

/// APIC timer counts per tick.
static PERIOD: Once<u32> = Once::new();

/// Measures the APIC timer rate on this (the boot) CPU. Returns counts per
/// second.
pub fn calibrate(apic: &LocalApic) -> u64 {
    apic.start_masked_countdown();
    time::delay(CALIBRATION);
    let counted = u64::from(u32::MAX - apic.timer_count());
    let per_second = counted * (1000 / CALIBRATION.as_millis() as u64);
    PERIOD.call_once(|| (per_second / TICK_HZ).clamp(1, u64::from(u32::MAX)) as u32);
    per_second
}

/// Starts the periodic tick on this CPU.
pub fn start(apic: &LocalApic) {
    let period = *PERIOD
        .get()
        .expect("timer::calibrate runs before timer::start");
    apic.start_timer(vectors::TIMER, period, true);
}
