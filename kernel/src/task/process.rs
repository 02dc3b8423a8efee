//! Processes: an address space, its threads, an exit status.
//!
//! A process ends when its last thread exits. That thread, still running on
//! the process's page tables, first switches its CPU to the kernel's address
//! space and then tears the user half down (see [`AddressSpace::tear_down`]).
//! The process object stays (a "zombie") until its parent collects the exit
//! code with `wait`.
//!
//! Killing a process (a fault, or `exit` from any thread) only marks it;
//! every thread notices on its next way back to ring 3 and exits there, so no
//! thread is ever torn out of the middle of a kernel operation.

use alloc::{collections::BTreeMap, string::String, sync::Arc, vec::Vec};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use spin::Mutex;

use super::{
    sched,
    thread::{Thread, ThreadState},
    vm::AddressSpace,
};
use crate::arch::{context::ThreadStart, cpu::without_interrupts};

/// The exit code of a process killed for a fault (128 + SIGSEGV, as shells
/// report it).
pub const KILLED_EXIT_CODE: i32 = 139;

/// Most threads one process may have alive at once.
pub const MAX_THREADS: usize = 64;

static NEXT_PID: AtomicU64 = AtomicU64::new(1);

/// Every process that has not been waited for.
static PROCESSES: Mutex<BTreeMap<u64, Arc<Process>>> = Mutex::new(BTreeMap::new());

#[derive(Default)]
struct Status {
    exit_code: Option<i32>,
    /// All threads have exited and the address space is gone.
    finished: bool,
    waiters: Vec<Arc<Thread>>,
}

pub struct Process {
    pub pid: u64,
    pub name: String,
    /// Who may `wait` for it (`None`: started by the kernel).
    pub parent: Option<u64>,
    pub space: AddressSpace,
    live_threads: AtomicUsize,
    exiting: AtomicBool,
    status: Mutex<Status>,
    threads: Mutex<BTreeMap<u64, Arc<Thread>>>,
}

impl Process {
    /// Registers a new process with address space `space`.
    pub fn new(name: &str, parent: Option<u64>, space: AddressSpace) -> Arc<Self> {
        let process = Arc::new(Self {
            pid: NEXT_PID.fetch_add(1, Ordering::Relaxed),
            name: String::from(name),
            parent,
            space,
            live_threads: AtomicUsize::new(0),
            exiting: AtomicBool::new(false),
            status: Mutex::new(Status::default()),
            threads: Mutex::new(BTreeMap::new()),
        });
        PROCESSES.lock().insert(process.pid, Arc::clone(&process));
        process
    }

    /// Looks a live or zombie process up.
    pub fn find(pid: u64) -> Option<Arc<Self>> {
        PROCESSES.lock().get(&pid).cloned()
    }

    /// Starts a thread of this process in ring 3. `None` when the process
    /// already has [`MAX_THREADS`] threads or is exiting.
    pub fn start_thread(
        self: &Arc<Self>,
        entry: u64,
        stack: u64,
        rdi: u64,
        rsi: u64,
        cpu: u64,
    ) -> Option<Arc<Thread>> {
        if self.is_exiting() {
            return None;
        }
        if self.live_threads.fetch_add(1, Ordering::AcqRel) >= MAX_THREADS {
            self.live_threads.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let Ok(thread) = Thread::new(
            Some(Arc::clone(self)),
            ThreadStart::User {
                entry,
                stack,
                rdi,
                rsi,
            },
        ) else {
            self.live_threads.fetch_sub(1, Ordering::AcqRel);
            return None;
        };
        thread.affinity.store(cpu, Ordering::Relaxed);
        self.threads.lock().insert(thread.tid, Arc::clone(&thread));
        sched::spawn(Arc::clone(&thread));
        Some(thread)
    }

    /// A thread of this process by id.
    pub fn thread(&self, tid: u64) -> Option<Arc<Thread>> {
        self.threads.lock().get(&tid).cloned()
    }

    /// Forgets an exited thread once it has been joined.
    pub fn forget_thread(&self, tid: u64) {
        self.threads.lock().remove(&tid);
    }

    pub fn is_exiting(&self) -> bool {
        self.exiting.load(Ordering::Acquire)
    }

    /// Ends the process with `code`: every thread exits on its way back to
    /// ring 3. The first code given wins.
    pub fn kill(&self, code: i32) {
        self.status.lock().exit_code.get_or_insert(code);
        if self.exiting.swap(true, Ordering::AcqRel) {
            return;
        }
        let threads: Vec<Arc<Thread>> = self.threads.lock().values().cloned().collect();
        for thread in &threads {
            sched::wake(thread);
        }
    }

    /// Called by each exiting thread; the last one tears the process down.
    pub fn thread_exited(&self, _thread: &Thread) {
        if self.live_threads.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // This CPU still runs on the process's page tables: leave them first.
        without_interrupts(crate::tlb::switch_to_kernel);
        self.space.tear_down();
        let threads = core::mem::take(&mut *self.threads.lock());
        let waiters = {
            let mut status = self.status.lock();
            status.exit_code.get_or_insert(0);
            status.finished = true;
            core::mem::take(&mut status.waiters)
        };
        for waiter in &waiters {
            sched::wake(waiter);
        }
        drop(threads);
    }

    /// Waits until the process has finished and returns its exit code;
    /// `None` if the caller's own process is killed meanwhile.
    pub fn wait(self: &Arc<Self>) -> Option<i32> {
        let me = sched::current();
        loop {
            {
                let mut status = self.status.lock();
                if status.finished {
                    PROCESSES.lock().remove(&self.pid);
                    return status.exit_code;
                }
                status.waiters.push(Arc::clone(&me));
                *me.state.lock() = ThreadState::Blocked;
            }
            if !sched::block_unless_killed(&me) {
                return None;
            }
        }
    }
}
