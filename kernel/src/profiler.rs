//! The sampling profiler (`profile=on`): every CPU's timer interrupt notes
//! what the CPU was doing, and the end of the run prints where the time
//! went ([`crate::profile`] says how to read it).
//!
//! **How it samples.** The local APIC timer, which already gives the
//! scheduler its tick, runs faster: at the profile's rate (1000 Hz by
//! default) instead of [`hal::timer::TICK_HZ`]. Every interrupt is a sample;
//! every n-th is also the scheduler's tick, so time slices and sleeps do not
//! change. A sample is the interrupted ring and instruction pointer: ring 3
//! counts as `[user]`, the idle thread as `[idle]`, anything else by its
//! address. The timer cannot interrupt code that runs with interrupts off;
//! such a sample waits, and is marked as held (see [`crate::profile`]).
//!
//! **Where samples go.** Each CPU has its own table of addresses and their
//! counts, written only by that CPU's timer interrupt: no lock, no shared
//! cache line, nothing allocated while sampling. Addresses are named only
//! at the end, with the symbol table sorted once ([`SortedSymbols`]), so a
//! sample costs a hash and an increment, not a search of 5000 symbols. A
//! table that fills up (more distinct addresses than slots) counts the rest
//! as unplaced, which the report shows.
//!
//! **Off, it costs nothing:** nothing is allocated, the timer runs at the
//! tick rate, and the timer interrupt pays one load to find no profiler.
//!
//! The NMI would see inside interrupts-off code too, but an NMI per sample
//! needs a source: under QEMU's TCG there is no performance counter to
//! overflow, and IPIs sent to make NMIs would disturb the very IPIs a
//! shootdown profile is about. The timer keeps every CPU to itself.

use alloc::{boxed::Box, string::String, vec::Vec};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use hal::{apic::LocalApic, percpu, time, trap::TrapFrame};
use spin::Once;

use crate::{
    profile::{self, CpuTotals, Profile},
    symbols::SortedSymbols,
    task::sched,
};

const _: () = assert!(
    hal::timer::TICK_HZ == profile::MIN_HZ as u64,
    "profile rates are multiples of the scheduler tick"
);

/// Address slots per CPU (a power of two): a run samples a few thousand
/// distinct addresses.
const SLOTS: usize = 8192;
const _: () = assert!(SLOTS.is_power_of_two());

/// How many slots an address may be placed away from its hash.
const PROBES: usize = 64;

/// A sample was held if the timer had counted this far (in 1/256ths of a
/// period) past its interrupt when the handler ran: a quarter period.
const HELD_AFTER: u32 = 64;

/// The opcode of `sti`, and of the `nop` that the x86_64 crate puts after it: a
/// sample right after either waited for interrupts to come back on.
const STI: u8 = 0xfb;
const NOP: u8 = 0x90;

/// One sampled kernel address and how often it was seen.
struct Slot {
    /// 0 while free (no kernel code lives at address 0).
    address: AtomicU64,
    samples: AtomicU32,
    held: AtomicU32,
}

/// One CPU's samples.
struct CpuSamples {
    slots: Box<[Slot]>,
    kernel: AtomicU64,
    user: AtomicU64,
    idle: AtomicU64,
    kernel_held: AtomicU64,
    user_held: AtomicU64,
    idle_held: AtomicU64,
    /// Kernel samples with no free slot near their hash.
    unplaced: AtomicU64,
    /// Timer interrupts so far, to find every n-th (the tick).
    interrupts: AtomicU64,
    /// When this CPU took its last sample (the kernel's clock, ns), and
    /// the sample periods that passed without an interrupt since sampling
    /// started ([`Profile::missed`]).
    last_sample_ns: AtomicU64,
    missed: AtomicU64,
}

struct Profiler {
    hz: u32,
    /// Timer interrupts per scheduler tick.
    interrupts_per_tick: u64,
    cpus: Vec<CpuSamples>,
    sampling: AtomicBool,
    started_ns: AtomicU64,
}

static PROFILER: Once<Profiler> = Once::new();

/// Turns the profiler on at `hz` samples a second on each of `cpu_count`
/// CPUs. Called once by the boot CPU after the timer's calibration and
/// before any CPU starts its timer. Sampling itself waits for [`start`].
pub fn init(hz: u32, cpu_count: usize) {
    PROFILER.call_once(|| Profiler {
        hz,
        interrupts_per_tick: u64::from(hz) / hal::timer::TICK_HZ,
        cpus: (0..cpu_count).map(|_| CpuSamples::new()).collect(),
        sampling: AtomicBool::new(false),
        started_ns: AtomicU64::new(0),
    });
    hal::timer::set_rate(u64::from(hz));
}

/// The sampling rate per CPU, if the profiler is on.
pub fn rate() -> Option<u32> {
    PROFILER.get().map(|profiler| profiler.hz)
}

/// Starts sampling (the workload begins).
pub fn start() {
    if let Some(profiler) = PROFILER.get() {
        let now = time::now_ns();
        profiler.started_ns.store(now, Ordering::Relaxed);
        for cpu in &profiler.cpus {
            cpu.last_sample_ns.store(now, Ordering::Relaxed);
        }
        profiler.sampling.store(true, Ordering::Release);
    }
}

/// Stops sampling and returns the profile, if the profiler is on.
pub fn finish() -> Option<Profile> {
    let profiler = PROFILER.get()?;
    profiler.sampling.store(false, Ordering::Release);
    let now = time::now_ns();
    // A CPU whose virtual CPU the host did not run near the end took its
    // last sample early: the periods since then are missed too.
    let online = crate::smp::online();
    for (index, cpu) in profiler.cpus.iter().enumerate() {
        if online.contains(index) {
            cpu.count_periods_since_last_sample(u64::from(profiler.hz), now);
        }
    }
    let seconds = now.saturating_sub(profiler.started_ns.load(Ordering::Relaxed)) as f64 / 1e9;
    Some(profiler.profile(seconds))
}

/// The timer interrupt's part (interrupts off): takes a sample if sampling,
/// and says whether this interrupt is also a scheduler tick.
pub fn on_timer_interrupt(frame: &TrapFrame) -> bool {
    let Some(profiler) = PROFILER.get() else {
        return true;
    };
    let Some(samples) = profiler.cpus.get(percpu::current().index) else {
        return true;
    };
    if profiler.sampling.load(Ordering::Relaxed) {
        samples.record(frame, was_held(frame));
        samples.count_missed_periods(u64::from(profiler.hz));
    }
    samples.interrupts.fetch_add(1, Ordering::Relaxed) % profiler.interrupts_per_tick == 0
}

/// Whether the sample in `frame` waited for interrupts to come back on
/// ([`crate::profile`] explains both signs).
fn was_held(frame: &TrapFrame) -> bool {
    let timer_was_late = LocalApic::get()
        .map(|apic| hal::timer::elapsed_since_interrupt(&apic) >= HELD_AFTER)
        .unwrap_or(false);
    if timer_was_late {
        return true;
    }
    if frame.interrupted_user() {
        return false;
    }
    // Kernel text is always mapped; the probe turns a surprise into "no".
    let byte_before = |back: u64| hal::probe::read_byte(frame.rip.wrapping_sub(back)).ok();
    match byte_before(1) {
        Some(STI) => true,
        Some(NOP) => byte_before(2) == Some(STI),
        _ => false,
    }
}

impl CpuSamples {
    fn new() -> Self {
        Self {
            slots: (0..SLOTS)
                .map(|_| Slot {
                    address: AtomicU64::new(0),
                    samples: AtomicU32::new(0),
                    held: AtomicU32::new(0),
                })
                .collect(),
            kernel: AtomicU64::new(0),
            user: AtomicU64::new(0),
            idle: AtomicU64::new(0),
            kernel_held: AtomicU64::new(0),
            user_held: AtomicU64::new(0),
            idle_held: AtomicU64::new(0),
            unplaced: AtomicU64::new(0),
            interrupts: AtomicU64::new(0),
            last_sample_ns: AtomicU64::new(0),
            missed: AtomicU64::new(0),
        }
    }

    /// Adds the whole sample periods (at `hz`) between this CPU's last
    /// sample and this one that brought no interrupt, rounding to the
    /// nearest period (an interrupt is a little late or early).
    fn count_missed_periods(&self, hz: u64) {
        let period_ns = 1_000_000_000 / hz;
        let now = time::now_ns();
        let last = self.last_sample_ns.swap(now, Ordering::Relaxed);
        let periods = (now.saturating_sub(last) + period_ns / 2) / period_ns;
        self.missed
            .fetch_add(periods.saturating_sub(1), Ordering::Relaxed);
    }

    /// At the end: adds the whole sample periods (at `hz`) between this
    /// CPU's last sample and `now`, which brought no sample.
    fn count_periods_since_last_sample(&self, hz: u64, now: u64) {
        let period_ns = 1_000_000_000 / hz;
        let last = self.last_sample_ns.load(Ordering::Relaxed);
        self.missed
            .fetch_add(now.saturating_sub(last) / period_ns, Ordering::Relaxed);
    }

    /// Counts one sample of `frame` (on this CPU, in its timer interrupt).
    fn record(&self, frame: &TrapFrame, held: bool) {
        let bump = |counter: &AtomicU64, held_counter: &AtomicU64| {
            counter.fetch_add(1, Ordering::Relaxed);
            if held {
                held_counter.fetch_add(1, Ordering::Relaxed);
            }
        };
        if frame.interrupted_user() {
            bump(&self.user, &self.user_held);
        } else if sched::idles_here() {
            bump(&self.idle, &self.idle_held);
        } else {
            bump(&self.kernel, &self.kernel_held);
            if !self.place(frame.rip, held) {
                self.unplaced.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts `address` in its slot (open addressing, linear probing);
    /// false if no slot near its hash is free.
    fn place(&self, address: u64, held: bool) -> bool {
        // Fibonacci hashing: the top bits of the product spread addresses
        // that differ only in their low bits.
        let mut index =
            (address.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - SLOTS.trailing_zeros())) as usize;
        for _ in 0..PROBES {
            let slot = &self.slots[index];
            let occupant = slot.address.load(Ordering::Relaxed);
            if occupant == 0 {
                slot.address.store(address, Ordering::Relaxed);
            }
            if occupant == 0 || occupant == address {
                slot.samples.fetch_add(1, Ordering::Relaxed);
                if held {
                    slot.held.fetch_add(1, Ordering::Relaxed);
                }
                return true;
            }
            index = (index + 1) % SLOTS;
        }
        false
    }

    fn totals(&self) -> CpuTotals {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        CpuTotals {
            kernel: read(&self.kernel),
            user: read(&self.user),
            idle: read(&self.idle),
            held: read(&self.kernel_held) + read(&self.user_held) + read(&self.idle_held),
        }
    }
}

impl Profiler {
    /// Everything sampled so far, named.
    fn profile(&self, seconds: f64) -> Profile {
        let symbols = SortedSymbols::build();
        let name = |address: u64| -> String {
            symbols
                .as_ref()
                .and_then(|symbols| symbols.lookup(address))
                .map_or_else(
                    || String::from(profile::UNKNOWN),
                    |symbol| symbol.function(),
                )
        };
        let mut samples: Vec<(String, u64, u64)> = Vec::new();
        for cpu in &self.cpus {
            let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
            samples.push((
                String::from(profile::USER),
                read(&cpu.user),
                read(&cpu.user_held),
            ));
            samples.push((
                String::from(profile::IDLE),
                read(&cpu.idle),
                read(&cpu.idle_held),
            ));
            for slot in cpu.slots.iter() {
                let address = slot.address.load(Ordering::Relaxed);
                if address != 0 {
                    samples.push((
                        name(address),
                        u64::from(slot.samples.load(Ordering::Relaxed)),
                        u64::from(slot.held.load(Ordering::Relaxed)),
                    ));
                }
            }
        }
        let sum = |counter: fn(&CpuSamples) -> &AtomicU64| -> u64 {
            self.cpus
                .iter()
                .map(|cpu| counter(cpu).load(Ordering::Relaxed))
                .sum()
        };
        let (unplaced, missed) = (sum(|cpu| &cpu.unplaced), sum(|cpu| &cpu.missed));
        // A CPU that never came online gets no line.
        let online = crate::smp::online();
        let cpus = self
            .cpus
            .iter()
            .enumerate()
            .filter(|&(index, _)| online.contains(index))
            .map(|(_, cpu)| cpu.totals())
            .collect();
        Profile::new(self.hz, seconds, cpus, unplaced, missed, samples)
    }
}
