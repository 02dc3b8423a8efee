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
//! The hooks are called where the kernel carries out `mm`'s decisions
//! ([`super::KernelTlb`], [`super::broadcast`]): a flush request's begin and
//! end, `mm`'s decision, each round of IPIs and its answers, each handler
//! on its target (with what it flushed, from that CPU's `mm` counters), and
//! each INVLPGB and TLBSYNC.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use hal::{percpu, time};
use mm::{CpuSet, TraceEvent};
use spin::Once;

use crate::timeline::{Decision, Event, Flushed, Kind, PAYLOAD_WORDS, Purpose, Summary};

/// How many events each CPU keeps. A two-thread `tlbtest` run of a few
/// hundred flushes records a few thousand; longer runs keep their start.
pub const CAPACITY: usize = 4096;

/// A slot: the tag (0: not written yet), the TSC (converted to time since
/// boot only when printed: one instruction on the hot path), the payload.
type Slot = [AtomicU64; 2 + PAYLOAD_WORDS];

/// Whether the timeline is on (set once, at boot, before any AP runs).
static ON: AtomicBool = AtomicBool::new(false);

static BUFFERS: Once<Vec<CpuBuffer>> = Once::new();

/// One CPU's events.
struct CpuBuffer {
    /// The next slot to claim; past [`CAPACITY`], claims are drops.
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

/// Turns the timeline on for `cpu_count` CPUs. Called once by the boot CPU
/// before any AP starts.
pub fn start(cpu_count: usize) -> Result<(), NoRoom> {
    let no_room = |_| NoRoom {
        bytes: cpu_count * CAPACITY * core::mem::size_of::<Slot>(),
    };
    let mut buffers = Vec::new();
    buffers.try_reserve_exact(cpu_count).map_err(no_room)?;
    for _ in 0..cpu_count {
        let mut slots = Vec::new();
        slots.try_reserve_exact(CAPACITY).map_err(no_room)?;
        slots.extend((0..CAPACITY).map(|_| core::array::from_fn(|_| AtomicU64::new(0))));
        buffers.push(CpuBuffer {
            next: AtomicUsize::new(0),
            slots,
            rounds: AtomicU64::new(0),
        });
    }
    BUFFERS.call_once(|| buffers);
    ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// Whether events are being recorded.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn buffers() -> &'static [CpuBuffer] {
    BUFFERS.get().expect("the timeline is on only once started")
}

/// Records `kind` on this CPU, now.
#[inline]
pub fn record(kind: Kind) {
    if on() {
        record_on(percpu::current().index, kind);
    }
}

fn record_on(cpu: usize, kind: Kind) {
    let buffer = &buffers()[cpu];
    let index = buffer.next.fetch_add(1, Ordering::Relaxed);
    if index >= CAPACITY {
        return;
    }
    let slot = &buffer.slots[index];
    let (tag, payload) = kind.pack();
    slot[1].store(time::ticks(), Ordering::Relaxed);
    for (word, value) in slot[2..].iter().zip(payload) {
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

/// A round of IPIs this CPU sends, as its targets' handlers name it.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    from: usize,
    number: u64,
}

/// Records that this CPU sends a round of IPIs for `purpose` to `targets`
/// (this CPU, if among them, runs its share without an IPI) and returns the
/// round, or `None` with the timeline off or no other target.
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
    record_on(
        from,
        Kind::IpisSent {
            round: number,
            purpose,
            targets: remote,
        },
    );
    Some(Round { from, number })
}

impl Round {
    /// Records that every target answered.
    pub fn answered(self) {
        record_on(self.from, Kind::AnswersSeen { round: self.number });
    }
}

/// Runs `handler` for `round` on this CPU, recording its begin and end with
/// what it flushed, if the round is recorded (and just runs it if not, or
/// if this is the sender running its own share).
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
    record_on(
        me,
        Kind::HandlerBegin {
            from: round.from,
            round: round.number,
        },
    );
    let before = flush_counts(me);
    handler();
    let after = flush_counts(me);
    record_on(
        me,
        Kind::HandlerEnd {
            from: round.from,
            round: round.number,
            flushed: Flushed {
                full: after.full.saturating_sub(before.full),
                partial: after.partial.saturating_sub(before.partial),
                pages: after.pages.saturating_sub(before.pages),
                trims: after.trims.saturating_sub(before.trims),
            },
        },
    );
}

/// The four counters of `cpu` that say what a handler did, so far. (Only
/// these: a whole snapshot reads all of them, which a handler would pay for
/// twice.)
fn flush_counts(cpu: usize) -> Flushed {
    let counters = super::system().cpu(cpu).counters();
    Flushed {
        full: counters.local_full_flushes.load(Ordering::Relaxed),
        partial: counters.local_partial_flushes.load(Ordering::Relaxed),
        pages: counters.pages_invalidated.load(Ordering::Relaxed),
        trims: counters.cpu_set_trims.load(Ordering::Relaxed),
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
    let mut summary = Summary {
        cpus: buffers().len(),
        capacity: CAPACITY,
        recorded: 0,
        dropped: 0,
    };
    for (cpu, buffer) in buffers().iter().enumerate() {
        let claimed = buffer.next.load(Ordering::Relaxed);
        summary.dropped += claimed.saturating_sub(CAPACITY) as u64;
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
            hal::println!("{}", Event { cpu, ns, kind });
            summary.recorded += 1;
        }
    }
    hal::println!("{summary}");
}
