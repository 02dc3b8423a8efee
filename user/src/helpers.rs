//! Helper threads that keep this address space on other CPUs while a
//! workload runs.
//!
//! A flush only has to reach the CPUs that may cache the address space's
//! translations, so a workload that wants to *see* shootdowns needs threads
//! of its own process on other CPUs. What those threads do there decides
//! what a flush costs:
//!
//! - [`Activity::Spin`]: they run in user mode, so their CPUs have the
//!   address space loaded and every flush must interrupt them (or, once
//!   the process is promoted to a global ASID, reach them by broadcast);
//! - [`Activity::Sleep`]: their CPUs go idle in *lazy TLB* mode, which the
//!   kernel (like Linux on x86) skips for ordinary flushes; only a flush
//!   that frees page tables reaches them. This is what the reclaim seed's
//!   benchmark does, and why it shows few IPIs on such a kernel. They
//!   sleep on a futex until they are stopped, not in naps: a helper that
//!   woke between naps would be awake for a flush now and then, and what
//!   the workload counts would depend on the timing.
//!
//! Helpers are pinned one per CPU; one whose CPU is offline runs wherever
//! the scheduler puts it (a demo on fewer CPUs still runs), which
//! [`Helpers::all_pinned`] reports. One set runs per process at a time.

use core::{
    ops::Range,
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering},
};

use abi::Errno;

use crate::{
    sys,
    thread::{self, JoinHandle},
};

/// The highest CPU count the runner can ask QEMU for.
pub const MAX_CPUS: usize = 64;

/// How many CPUs are online: `set_affinity` refuses the first one that is
/// not. Leaves the caller on CPU 0.
pub fn online_cpus() -> u64 {
    let count = (1..MAX_CPUS as u64)
        .find(|&cpu| sys::set_affinity(cpu).is_err())
        .unwrap_or(MAX_CPUS as u64);
    let _ = sys::set_affinity(0);
    count
}

/// How long [`Helpers::start`] waits after every helper reached its CPU, so
/// that the CPUs have settled into what the helpers do.
const SETTLE_NS: u64 = 20_000_000;

/// What each helper does on its CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// Spin in user mode; with `reading`, read that `u64` on every turn (it
    /// must stay mapped and readable until the helpers stop), so the CPU
    /// also caches that page's translation.
    Spin { reading: Option<u64> },
    /// Sleep until stopped.
    Sleep,
}

/// A running set of helpers; they stop when it is dropped (or
/// [`Helpers::stop`]ped).
#[derive(Debug)]
pub struct Helpers {
    handles: [Option<JoinHandle>; MAX_CPUS],
    all_pinned: bool,
}

static RUNNING: AtomicBool = AtomicBool::new(false);
/// 1 once the helpers are to stop; sleeping helpers wait on it as a futex.
static STOP: AtomicU32 = AtomicU32::new(0);
static ARRIVED: AtomicUsize = AtomicUsize::new(0);
static MISPLACED: AtomicBool = AtomicBool::new(false);
/// What spinning helpers read, summed, so the reads cannot be optimised out.
static SPINS: AtomicU64 = AtomicU64::new(0);

fn work(activity: Activity) {
    match activity {
        Activity::Spin { reading } => {
            while STOP.load(Ordering::Relaxed) == 0 {
                let value = match reading {
                    // SAFETY: the caller of `start` keeps `address` mapped
                    // and readable until the helpers stop.
                    Some(address) => unsafe { (address as *const u64).read_volatile() },
                    None => 0,
                };
                SPINS.fetch_add(value | 1, Ordering::Relaxed);
            }
        }
        Activity::Sleep => {
            while STOP.load(Ordering::Relaxed) == 0 {
                let _ = sys::futex_wait(&STOP, 0);
            }
        }
    }
}

impl Helpers {
    /// Starts one helper pinned to each CPU of `cpus` and returns once all
    /// of them run (see [`Helpers::all_pinned`]). Fails with `Again` if
    /// this process already has helpers, `Inval` if a CPU is out of range.
    pub fn start(cpus: Range<usize>, activity: Activity) -> Result<Self, Errno> {
        if cpus.end > MAX_CPUS {
            return Err(Errno::Inval);
        }
        if RUNNING.swap(true, Ordering::Acquire) {
            return Err(Errno::Again);
        }
        STOP.store(0, Ordering::Relaxed);
        ARRIVED.store(0, Ordering::Relaxed);
        MISPLACED.store(false, Ordering::Relaxed);
        // From here on, dropping `helpers` stops whatever was started.
        let mut helpers = Self {
            handles: [const { None }; MAX_CPUS],
            all_pinned: false,
        };
        let wanted = cpus.len();
        for cpu in cpus {
            helpers.handles[cpu] = Some(thread::spawn(move || {
                if sys::set_affinity(cpu as u64).is_err() {
                    MISPLACED.store(true, Ordering::Relaxed);
                }
                ARRIVED.fetch_add(1, Ordering::Relaxed);
                work(activity);
                0
            })?);
        }
        while ARRIVED.load(Ordering::Relaxed) < wanted {
            let _ = sys::yield_now();
        }
        helpers.all_pinned = !MISPLACED.load(Ordering::Relaxed);
        let _ = sys::sleep(SETTLE_NS);
        Ok(helpers)
    }

    /// Whether every helper runs on its own CPU (false if one of the CPUs
    /// is offline).
    pub fn all_pinned(&self) -> bool {
        self.all_pinned
    }

    /// Tells every helper to stop and waits for them.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        STOP.store(1, Ordering::Relaxed);
        let _ = sys::futex_wake(&STOP, i32::MAX as u32);
        for handle in self.handles.iter_mut().filter_map(Option::take) {
            let _ = handle.join();
        }
        RUNNING.store(false, Ordering::Release);
    }
}
