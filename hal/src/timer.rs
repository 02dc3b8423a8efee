//! The periodic timer interrupt: each CPU's local APIC timer, calibrated
//! once.
//!
//! The APIC timer counts down at a rate the architecture does not specify,
//! so the boot CPU lets it run for 10 ms of TSC time and counts, in several
//! windows whose edges are bracketed by TSC reads, as the TSC's own
//! calibration does ([`crate::tsc`]): the median of the prompt ones. Every
//! CPU then programs the same period.
//!
//! The scheduler wants [`TICK_HZ`] ticks a second. The kernel's sampling
//! profiler wants more interrupts than that (a thousand or more a second),
//! so the rate is the kernel's choice ([`set_rate`], before any CPU starts
//! its timer) and the kernel turns every n-th interrupt into a scheduler
//! tick. Without a profiler the rate is the tick.

use core::{
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use spin::Once;

use core::convert::Infallible;

use crate::{apic::LocalApic, time, tsc, vectors};

/// Scheduler ticks per second on every CPU.
pub const TICK_HZ: u64 = 100;

const CALIBRATION: Duration = Duration::from_millis(10);

/// APIC timer counts per second (divided by 16), measured once.
static COUNTS_PER_SECOND: Once<u64> = Once::new();

/// APIC timer counts between two interrupts; 0 until [`set_rate`] or the
/// first [`start`].
static PERIOD: AtomicU32 = AtomicU32::new(0);

/// Measures the APIC timer rate on this (the boot) CPU. Returns counts per
/// second.
pub fn calibrate(apic: &LocalApic) -> u64 {
    let per_second = tsc::median_of_windows(|| Ok::<_, Infallible>(one_window(apic)))
        .unwrap_or_else(|never| match never {});
    *COUNTS_PER_SECOND.call_once(|| per_second)
}

/// One window: the timer's counts per second.
fn one_window(apic: &LocalApic) -> tsc::Window {
    let started_before = tsc::read();
    apic.start_masked_countdown();
    let started_after = tsc::read();
    time::delay(CALIBRATION);
    let read_before = tsc::read();
    let counted = u64::from(u32::MAX - apic.timer_count());
    let read_after = tsc::read();
    let window = read_after - started_before;
    let prompt = |bracket: u64| bracket * tsc::BRACKET_PART < window;
    // Counts over the TSC ticks between the edges' midpoints.
    let ticks = (read_before + read_after) / 2 - (started_before + started_after) / 2;
    tsc::Window {
        value: (u128::from(counted) * u128::from(time::tsc_hz()) / u128::from(ticks.max(1)))
            .try_into()
            .unwrap_or(u64::MAX),
        prompt: prompt(started_after - started_before) && prompt(read_after - read_before),
    }
}

/// Sets how many timer interrupts a second every CPU gets from now on (at
/// its next [`start`]); [`TICK_HZ`] if never called. Needs [`calibrate`].
pub fn set_rate(interrupts_per_second: u64) {
    let per_second = *COUNTS_PER_SECOND
        .get()
        .expect("timer::calibrate runs before timer::set_rate");
    let period = (per_second / interrupts_per_second.max(1)).clamp(1, u64::from(u32::MAX));
    PERIOD.store(period as u32, Ordering::Relaxed);
}

/// Starts the periodic timer on this CPU at the rate [`set_rate`] chose.
pub fn start(apic: &LocalApic) {
    if PERIOD.load(Ordering::Relaxed) == 0 {
        set_rate(TICK_HZ);
    }
    apic.start_timer(vectors::TIMER, PERIOD.load(Ordering::Relaxed), true);
}

/// How far this CPU's timer has counted since its last interrupt fired, as
/// a fraction of the period in 1/256ths (0 = it just fired, 255 = the next
/// is due). A handler that reads a large value ran late: interrupts were
/// off when the timer fired.
pub fn elapsed_since_interrupt(apic: &LocalApic) -> u32 {
    let period = PERIOD.load(Ordering::Relaxed).max(1);
    let remaining = apic.timer_count().min(period);
    ((u64::from(period - remaining) * 256) / u64::from(period)).min(255) as u32
}
