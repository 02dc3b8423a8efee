//! A deterministic scheduler for real threads: only one simulated CPU runs at a time, and at
//! every scheduling point (every atomic operation inside `mm`, through its `model-hooks`
//! feature, and every lock attempt or spin in the model) a seeded random generator decides
//! whether to hand over, and to whom. The same seed gives the same interleaving, so a failing
//! schedule can be replayed with `MM_MODEL_SEED`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

pub struct Sched {
    state: Mutex<State>,
    cv: Condvar,
}

struct State {
    turn: usize,
    alive: Vec<bool>,
    rng: u64,
    /// Probability (per 1024) of a hand-over at an ordinary scheduling point.
    switch_per_1024: u64,
    points: u64,
}

thread_local! {
    static CURRENT: RefCell<Option<(usize, Arc<Sched>)>> = const { RefCell::new(None) };
}

pub fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The hook installed into `mm` (a plain `fn`, so it finds its scheduler per thread).
pub fn hook() {
    CURRENT.with(|c| {
        if let Some((me, s)) = &*c.borrow() {
            s.point(*me, false);
        }
    });
}

/// Hands over unconditionally (used while waiting for another simulated CPU).
pub fn yield_now() {
    CURRENT.with(|c| {
        if let Some((me, s)) = &*c.borrow() {
            s.point(*me, true);
        }
    });
}

impl Sched {
    pub fn new(threads: usize, seed: u64, switch_per_1024: u64) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State {
                turn: 0,
                alive: vec![true; threads],
                rng: seed ^ 0x5eed,
                switch_per_1024,
                points: 0,
            }),
            cv: Condvar::new(),
        })
    }

    pub fn points(&self) -> u64 {
        self.state.lock().unwrap().points
    }

    fn point(&self, me: usize, force: bool) {
        let mut st = self.state.lock().unwrap();
        assert_eq!(st.turn, me, "a thread ran out of turn");
        st.points += 1;
        let r = splitmix(&mut st.rng);
        if !force && r % 1024 >= st.switch_per_1024 {
            return;
        }
        let candidates: Vec<usize> = (0..st.alive.len())
            .filter(|&t| st.alive[t] && (!force || t != me))
            .collect();
        if candidates.is_empty() {
            return;
        }
        st.turn = candidates[(r >> 10) as usize % candidates.len()];
        if st.turn == me {
            return;
        }
        self.cv.notify_all();
        while st.turn != me {
            st = self.cv.wait(st).unwrap();
        }
    }

    /// Runs `body` as simulated CPU `me`: waits for its first turn, and hands the turn on
    /// when done (or when it panicked, which `failed` records).
    pub fn run(self: &Arc<Self>, me: usize, failed: &AtomicBool, body: impl FnOnce()) {
        {
            let mut st = self.state.lock().unwrap();
            while st.turn != me {
                st = self.cv.wait(st).unwrap();
            }
        }
        CURRENT.with(|c| *c.borrow_mut() = Some((me, self.clone())));
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        CURRENT.with(|c| *c.borrow_mut() = None);
        if result.is_err() {
            failed.store(true, Ordering::SeqCst);
        }
        let mut st = self.state.lock().unwrap();
        st.alive[me] = false;
        let alive: Vec<usize> = (0..st.alive.len()).filter(|&t| st.alive[t]).collect();
        if !alive.is_empty() {
            let r = splitmix(&mut st.rng);
            st.turn = alive[r as usize % alive.len()];
        }
        self.cv.notify_all();
    }
}

/// A lock that yields to the scheduler while it is held elsewhere: used for a simulated CPU's
/// "interrupts disabled" state, which is held across code that has scheduling points.
pub struct YieldLock {
    held: AtomicBool,
}

impl YieldLock {
    pub const fn new() -> Self {
        Self {
            held: AtomicBool::new(false),
        }
    }

    pub fn lock(&self) -> YieldGuard<'_> {
        while self.held.swap(true, Ordering::Acquire) {
            yield_now();
        }
        YieldGuard(self)
    }
}

pub struct YieldGuard<'a>(&'a YieldLock);

impl Drop for YieldGuard<'_> {
    fn drop(&mut self) {
        self.0.held.store(false, Ordering::Release);
    }
}
