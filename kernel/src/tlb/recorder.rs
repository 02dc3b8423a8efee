//! The timeline's recorder (`tlb.timeline=on`): each CPU's bounded buffer
//! of [`crate::timeline`] events, filled while the system runs and printed
//! at the end of the run.
//!
//! Recording must not change what it records. So a CPU records into its own
//! buffer only, without a lock: it claims the next slot with one atomic
//! add (an interrupt handler on the same CPU that records meanwhile claims
//! the slot after it), writes the slot's words, and publishes the slot by
//! writing its tag last, with release. A full buffer keeps what it has and
//! counts what did not fit (`dropped=` on the `timeline-end:` line): the
//! start of a run is kept whole, never a torn mixture. With the timeline
//! off every hook is one relaxed load of a flag that never changes after
//! boot.
//!
//! Recording must also cost the shootdown as little as it can: a span (a
//! request, a round of IPIs, a handler, a TLBSYNC) is one event, stored
//! when it ends with the time it began, and an event stores only the
//! payload words it uses (slots are never reused, so the others stay 0).
//! A flush request borrows the latency measurement's clock readings.
//!
//! The hooks are called where the kernel carries out `mm`'s decisions
//! ([`super::KernelTlb`], [`super::broadcast`], [`super::switch_to`]): each
//! flush request, `mm`'s decision, each round of IPIs once answered, each
//! handler on its target (with what it flushed, from that CPU's `mm`
//! counters), each INVLPGB and TLBSYNC, and each switch that flushed.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use hal::{percpu, time};
use mm::{CpuSet, TraceEvent};
use spin::Once;

use crate::timeline::{Decision, Event, Flushed, Kind, PAYLOAD_WORDS, Purpose, Summary};

/// A slot: the tag (0: not written yet), the TSC (converted to time since
/// boot only when printed: one instruction on the hot path), the payload.
type Slot = [AtomicU64; 2 + PAYLOAD_WORDS];

/// Whether the timeline is on (set once, at boot, before any AP runs).
static ON: AtomicBool = AtomicBool::new(false);

static BUFFERS: Once<Buffers> = Once::new();

/// Every CPU's buffer, each of `capacity` slots.
struct Buffers {
    capacity: usize,
    cpus: Vec<CpuBuffer>,
}

/// One CPU's events.
struct CpuBuffer {
    /// The next slot to claim; past the capacity, claims are drops.
    next: AtomicUsize,
    slots: Vec<Slot>,
    /// This CPU's IPI rounds so far (a round's number names it in the
    /// handlers' events on other CPUs).
    rounds: AtomicU64,
}

/// The heap could not hold the buffers.
#[derive(Debug)]
pub struct NoRoom {
    pub bytes: usize,
}

/// Turns the timeline on for `cpu_count` CPUs, `capacity` events each.
/// Called once by the boot CPU before any AP starts.
pub fn start(cpu_count: usize, capacity: usize) -> Result<(), NoRoom> {
    let no_room = |_| NoRoom {
        bytes: cpu_count * capacity * core::mem::size_of::<Slot>(),
    };
    let mut cpus = Vec::new();
    cpus.try_reserve_exact(cpu_count).map_err(no_room)?;
    for _ in 0..cpu_count {
        let mut slots = Vec::new();
        slots.try_reserve_exact(capacity).map_err(no_room)?;
        slots.extend((0..capacity).map(|_| core::array::from_fn(|_| AtomicU64::new(0))));
        cpus.push(CpuBuffer {
            next: AtomicUsize::new(0),
            slots,
            rounds: AtomicU64::new(0),
        });
    }
    BUFFERS.call_once(|| Buffers { capacity, cpus });
    ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// Whether events are being recorded.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn buffers() -> &'static [CpuBuffer] {
    &BUFFERS
        .get()
        .expect("the timeline is on only once started")
        .cpus
}

/// Records `kind` on this CPU, now.
#[inline]
pub fn record(kind: Kind) {
    if on() {
        record_on(percpu::current().index, time::ticks(), kind);
    }
}

/// Stores `kind`, which happened at TSC `ticks`, into `cpu`'s buffer: only
/// the payload words it uses (the rest of a fresh slot is 0), the tag last.
fn record_on(cpu: usize, ticks: u64, kind: Kind) {
    let buffer = &buffers()[cpu];
    let index = buffer.next.fetch_add(1, Ordering::Relaxed);
    let Some(slot) = buffer.slots.get(index) else {
        return;
    };
    let (tag, payload, used) = kind.pack();
    slot[1].store(ticks, Ordering::Relaxed);
    for (word, &value) in slot[2..].iter().zip(&payload[..used]) {
        word.store(value, Ordering::Relaxed);
    }
    // Published last: a reader that sees the tag sees the rest.
    slot[0].store(tag, Ordering::Release);
}

/// Records `mm`'s decision `event`.
pub fn decision(event: &TraceEvent) {
    record(Kind::Decision(Decision {
        ctx: event.ctx_id,
        range: event.range,
        reason: event.reason,
        skipped: event.skipped,
    }));
}

/// Records the flush request that ran from TSC `began` to `ended` (the
/// latency measurement's own readings: the request pays no clock read for
/// the timeline).
#[inline]
pub fn request(began: u64, ended: u64) {
    if on() {
        record_on(percpu::current().index, ended, Kind::Request { began });
    }
}

/// Runs `tlbsync` and records how long it waited.
#[inline]
pub fn tlbsync(tlbsync: impl FnOnce()) {
    if !on() {
        return tlbsync();
    }
    let began = time::ticks();
    tlbsync();
    record(Kind::Tlbsync { began });
}

/// Runs `switch`, a switch into address space `ctx`, and records it if it
/// flushed this CPU's entries of `ctx` (it caught up with flushes that
/// skipped it), saying whether the CPU came back from lazy mode.
#[inline]
pub fn switching(ctx: u64, switch: impl FnOnce()) {
    if !on() {
        return switch();
    }
    let me = percpu::current().index;
    let cpu = super::system().cpu(me);
    let flushes = || cpu.counters().switch_flushes.load(Ordering::Relaxed);
    let lazy = cpu.is_lazy();
    let before = flushes();
    switch();
    if flushes() != before {
        record_on(me, time::ticks(), Kind::SwitchFlush { ctx, lazy });
    }
}

/// A round of IPIs this CPU sends, as its targets' handlers name it.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    from: usize,
    number: u64,
    purpose: Purpose,
    targets: CpuSet,
    /// When the IPIs went out (TSC).
    sent: u64,
}

/// Numbers the round of IPIs this CPU is about to send for `purpose` to
/// `targets` (this CPU, if among them, runs its share without an IPI), or
/// `None` with the timeline off or no other target. Nothing is recorded
/// until every target has answered ([`Round::answered`]).
#[inline]
pub fn send_round(purpose: Purpose, targets: &CpuSet) -> Option<Round> {
    if !on() {
        return None;
    }
    let from = percpu::current().index;
    let remote = targets.without(from);
    if remote.is_empty() {
        return None;
    }
    let number = buffers()[from].rounds.fetch_add(1, Ordering::Relaxed) + 1;
    Some(Round {
        from,
        number,
        purpose,
        targets: remote,
        sent: time::ticks(),
    })
}

impl Round {
    /// Records the round, now that every target has answered.
    pub fn answered(self) {
        record_on(
            self.from,
            time::ticks(),
            Kind::IpiRound {
                round: self.number,
                purpose: self.purpose,
                targets: self.targets,
                sent: self.sent,
            },
        );
    }
}

/// Runs `handler` for `round` on this CPU and records it with what it
/// flushed, if the round is recorded (and just runs it if not, or if this
/// is the sender running its own share).
#[inline]
pub fn handling(round: Option<Round>, handler: impl FnOnce()) {
    // Off (`None`), a handler pays for nothing but this match.
    let Some(round) = round else {
        return handler();
    };
    let me = percpu::current().index;
    if round.from == me {
        // The sender's own share, inside its request: not a handler.
        return handler();
    }
    let began = time::ticks();
    let before = flush_counts(me);
    let was_lazy = super::system().cpu(me).is_lazy();
    handler();
    let after = flush_counts(me);
    let left_lazy = was_lazy && !super::system().cpu(me).is_lazy();
    record_on(
        me,
        time::ticks(),
        Kind::Handler {
            from: round.from,
            round: round.number,
            began,
            flushed: Flushed {
                full: after.full.saturating_sub(before.full),
                partial: after.partial.saturating_sub(before.partial),
                pages: after.pages.saturating_sub(before.pages),
                trims: after.trims.saturating_sub(before.trims),
                lazy_leaves: u64::from(left_lazy),
            },
        },
    );
}

/// The four counters of `cpu` that say what a handler did, so far. (Only
/// these: a whole snapshot reads all of them, which a handler would pay for
/// twice.) A lazy leave is no counter: the handler compares `is_lazy`.
fn flush_counts(cpu: usize) -> Flushed {
    let counters = super::system().cpu(cpu).counters();
    Flushed {
        full: counters.local_full_flushes.load(Ordering::Relaxed),
        partial: counters.local_partial_flushes.load(Ordering::Relaxed),
        pages: counters.pages_invalidated.load(Ordering::Relaxed),
        trims: counters.cpu_set_trims.load(Ordering::Relaxed),
        lazy_leaves: 0,
    }
}

/// Prints every recorded event, CPU by CPU, then the `timeline-end:` line;
/// nothing with the timeline off. Called once at the end of the run, when
/// only this CPU is recording.
pub fn print_all() {
    if !on() {
        return;
    }
    // One moment on both clocks turns each recorded TSC into time since boot.
    let (now_ticks, now_ns) = (time::ticks(), time::now_ns());
    let ns_of =
        |ticks: u64| now_ns.saturating_sub(time::ticks_to_ns(now_ticks.saturating_sub(ticks)));
    let capacity = BUFFERS.get().map_or(0, |buffers| buffers.capacity);
    let mut summary = Summary {
        cpus: buffers().len(),
        capacity,
        recorded: 0,
        dropped: 0,
    };
    for (cpu, buffer) in buffers().iter().enumerate() {
        let claimed = buffer.next.load(Ordering::Relaxed);
        summary.dropped += claimed.saturating_sub(capacity) as u64;
        for slot in buffer.slots.iter().take(claimed) {
            let tag = slot[0].load(Ordering::Acquire);
            let payload: [u64; PAYLOAD_WORDS] =
                core::array::from_fn(|word| slot[2 + word].load(Ordering::Relaxed));
            // A slot claimed but not yet published (an interrupt that is
            // recording right now) is left out.
            let Some(kind) = Kind::unpack(tag, &payload) else {
                continue;
            };
            let ns = ns_of(slot[1].load(Ordering::Relaxed));
            let kind = kind.map_times(ns_of);
            hal::println!("{}", Event { cpu, ns, kind });
            summary.recorded += 1;
        }
    }
    hal::println!("{summary}");
}
