//! Processes: an address space, its threads, an exit status.
//!
//! A process ends when its last thread exits. That thread, still running on
//! the process's page tables, first switches its CPU to the kernel's address
//! space and then tears the process's down (see [`AddressSpace::tear_down`]).
//! The process object stays (a "zombie") until its parent collects the exit
//! code with `wait`.
//!
//! Killing a process (a fault, or `exit` from any thread) only marks it;
//! every thread notices on its next way back to ring 3 and exits there, so no
//! thread is ever torn out of the middle of a kernel operation.
//!
//! ## Limits
//!
//! At most [`abi::MAX_PROCESSES`] processes exist at once, zombies included,
//! and each has at most [`abi::MAX_THREADS`] live threads; beyond either,
//! `spawn`, `fork` or `clone` fails with `EAGAIN`. (A thread leaves the
//! count when it ends: user space learns of the end through the futex word
//! of `CLONE_CHILD_CLEARTID`, not from the kernel's books.)
//! A spawn takes its place in the table ([`ProcessSlot`]) before loading
//! anything, so a spawn over the limit costs nothing.
//!
//! A zombie nobody will wait for would hold its place for good, so orphans
//! are reaped: when a process ends, its ended children leave the table, and
//! a process that ends after its parent ended leaves at once. (Both sides
//! set their `finished` flag before taking the table lock and then look at
//! the other's, so whichever comes second does the reaping.)

use alloc::{collections::BTreeMap, string::String, sync::Arc, vec::Vec};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use abi::Errno;
use spin::Mutex;

use super::{
    futex, sched,
    thread::{Thread, ThreadState},
    vm::{AddressSpace, Placement, Sharing},
};
use hal::{context::ThreadStart, cpu::without_interrupts, trap::TrapFrame, user_state::UserState};

/// The exit code of a process killed for a fault (128 + SIGSEGV, as shells
/// report it).
pub const KILLED_EXIT_CODE: i32 = 128 + abi::wait_status::SIGSEGV as i32;

static NEXT_PID: AtomicU64 = AtomicU64::new(1);

/// Processes in the table plus spawns that have reserved a place in it.
static PROCESS_COUNT: AtomicUsize = AtomicUsize::new(0);

/// Every process that has not been waited for (or reaped as an orphan).
static PROCESSES: Mutex<BTreeMap<u64, TableEntry>> = Mutex::new(BTreeMap::new());

struct TableEntry {
    process: Arc<Process>,
    /// Gives the place back when the entry leaves the table.
    _slot: ProcessSlot,
}

/// A place in the process table, one of [`abi::MAX_PROCESSES`].
pub struct ProcessSlot(());

impl ProcessSlot {
    /// Takes a place, or `Again` when every place is taken.
    pub fn reserve() -> Result<Self, Errno> {
        PROCESS_COUNT
            .try_update(Ordering::AcqRel, Ordering::Acquire, |count| {
                (count < abi::MAX_PROCESSES).then_some(count + 1)
            })
            .map(|_| Self(()))
            .map_err(|_| Errno::Again)
    }
}

impl Drop for ProcessSlot {
    fn drop(&mut self) {
        PROCESS_COUNT.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Default)]
struct Status {
    exit_code: Option<i32>,
    /// Set when a fault killed the process: how `wait4` reports its end.
    killed: bool,
    waiters: Vec<Arc<Thread>>,
}

pub struct Process {
    pub pid: u64,
    pub name: String,
    /// Who may `wait` for it (`None`: started by the kernel).
    pub parent: Option<u64>,
    pub space: AddressSpace,
    /// Threads started and not yet ended: what [`abi::MAX_THREADS`] limits.
    live_threads: AtomicUsize,
    exiting: AtomicBool,
    /// All threads have exited and the address space is gone. Set under the
    /// `status` lock (for `wait`), read without it (for reaping).
    finished: AtomicBool,
    status: Mutex<Status>,
    /// Threads waiting for any child of this process to end (`wait4(-1)`);
    /// each child that finishes wakes them.
    child_waiters: Mutex<Vec<Arc<Thread>>>,
    /// The live threads.
    threads: Mutex<BTreeMap<u64, Arc<Thread>>>,
    /// The heap `brk` moves (see [`ProgramBreak`]).
    program_break: Mutex<ProgramBreak>,
}

/// The heap that `brk` grows and shrinks: from the first page after the
/// program's image (`start`) to `end`, mapped up to `end` rounded up to a
/// page. It may grow until it would meet another mapping.
#[derive(Clone, Copy, Debug)]
pub struct ProgramBreak {
    pub start: u64,
    pub end: u64,
}

impl Process {
    /// Enters a new process with address space `space` and heap
    /// `program_break` in the table, in the place `slot` reserved.
    pub fn new(
        name: &str,
        parent: Option<u64>,
        space: AddressSpace,
        program_break: ProgramBreak,
        slot: ProcessSlot,
    ) -> Arc<Self> {
        let process = Arc::new(Self {
            pid: NEXT_PID.fetch_add(1, Ordering::Relaxed),
            name: String::from(name),
            parent,
            space,
            live_threads: AtomicUsize::new(0),
            exiting: AtomicBool::new(false),
            finished: AtomicBool::new(false),
            status: Mutex::new(Status::default()),
            child_waiters: Mutex::new(Vec::new()),
            threads: Mutex::new(BTreeMap::new()),
            program_break: Mutex::new(program_break),
        });
        let entry = TableEntry {
            process: Arc::clone(&process),
            _slot: slot,
        };
        PROCESSES.lock().insert(process.pid, entry);
        process
    }

    /// `fork`: a child of this process with a copy of its address space
    /// ([`AddressSpace::fork`]) and one thread, which leaves the system call
    /// with the caller's `registers` (and stack pointer `stack`, if not 0),
    /// SSE registers and FS base `user`, and a return value of 0. `prepare`
    /// runs on the child's thread before it is scheduled (a `clone`'s tid
    /// stores). `Again` when the process table is full, `NoMem` when memory
    /// is.
    pub fn fork(
        &self,
        registers: &TrapFrame,
        stack: u64,
        user: UserState,
        prepare: impl FnOnce(&Self, &Thread) -> Result<(), Errno>,
    ) -> Result<Arc<Self>, Errno> {
        let slot = ProcessSlot::reserve()?;
        let space = self.space.fork()?;
        let program_break = *self.program_break.lock();
        let child = Self::new(&self.name, Some(self.pid), space, program_break, slot);
        let start = ThreadStart::Resume(TrapFrame {
            rax: 0,
            rsp: if stack == 0 { registers.rsp } else { stack },
            ..registers.clone()
        });
        let started =
            child.start_thread(start, user, abi::ANY_CPU, |thread| prepare(&child, thread));
        if let Err(errno) = started {
            child.abandon();
            return Err(errno);
        }
        Ok(child)
    }

    /// Takes a process whose first thread could not start out of the table
    /// again and frees its memory. Nobody knows its pid yet.
    pub fn abandon(&self) {
        drop(PROCESSES.lock().remove(&self.pid));
        self.space.tear_down();
    }

    /// Looks a live or zombie process up.
    pub fn find(pid: u64) -> Option<Arc<Self>> {
        PROCESSES
            .lock()
            .get(&pid)
            .map(|entry| Arc::clone(&entry.process))
    }

    /// Starts a thread of this process in ring 3, as `start` says, with the
    /// SSE registers and FS base in `user`, allowed on `cpu` (or anywhere:
    /// [`abi::ANY_CPU`]). `prepare` runs on the new thread before anything
    /// can schedule it; its error undoes the start. `Again` when the process
    /// already has [`abi::MAX_THREADS`] threads or is exiting, `NoMem` when
    /// the kernel stack does not fit in the heap budget.
    pub fn start_thread(
        self: &Arc<Self>,
        start: ThreadStart,
        user: UserState,
        cpu: u64,
        prepare: impl FnOnce(&Thread) -> Result<(), Errno>,
    ) -> Result<Arc<Thread>, Errno> {
        if self.is_exiting() {
            return Err(Errno::Again);
        }
        // Counted before it exists: the caller is a live thread of this
        // process (or the process has none yet), so the count cannot reach
        // 0 and tear the process down meanwhile.
        self.live_threads
            .try_update(Ordering::AcqRel, Ordering::Acquire, |live| {
                (live < abi::MAX_THREADS).then_some(live + 1)
            })
            .map_err(|_| Errno::Again)?;
        let thread = Thread::new_user(Arc::clone(self), start, user)
            .and_then(|thread| prepare(&thread).map(|()| thread))
            .inspect_err(|_| {
                self.live_threads.fetch_sub(1, Ordering::AcqRel);
            })?;
        thread.set_affinity(cpu);
        self.threads.lock().insert(thread.tid, Arc::clone(&thread));
        sched::spawn(Arc::clone(&thread));
        Ok(thread)
    }

    /// Moves the end of the heap to `end` and returns the end there is now
    /// (the old one if `end` is below the heap's start or the pages cannot
    /// be mapped, as Linux's `brk` does).
    pub fn move_break(&self, end: u64) -> u64 {
        let mut program_break = self.program_break.lock();
        let mapped = program_break.end.next_multiple_of(abi::PAGE_SIZE);
        if end < program_break.start || end >= abi::USER_END {
            return program_break.end;
        }
        let wanted = end.next_multiple_of(abi::PAGE_SIZE);
        let moved = if wanted > mapped {
            self.space
                .map_anonymous(
                    mapped,
                    wanted - mapped,
                    abi::Prot::READ | abi::Prot::WRITE,
                    Placement::FixedNoReplace,
                    Sharing::Private,
                )
                .map(|_| ())
        } else if wanted < mapped {
            self.space.unmap(wanted, mapped - wanted)
        } else {
            Ok(())
        };
        if moved.is_ok() {
            program_break.end = end;
        }
        program_break.end
    }

    /// A live thread of this process by id.
    pub fn thread(&self, tid: u64) -> Option<Arc<Thread>> {
        self.threads.lock().get(&tid).cloned()
    }

    pub fn is_exiting(&self) -> bool {
        self.exiting.load(Ordering::Acquire)
    }

    /// Ends the process for a bad access of one of its threads, as Linux's
    /// `SIGSEGV` would: exit code [`KILLED_EXIT_CODE`], and `wait4` says it
    /// was killed by that signal.
    pub fn kill_for_fault(&self) {
        {
            let mut status = self.status.lock();
            if status.exit_code.is_none() {
                status.exit_code = Some(KILLED_EXIT_CODE);
                status.killed = true;
            }
        }
        self.kill(KILLED_EXIT_CODE);
    }

    /// How `wait4` reports the end of this finished process, in Linux's
    /// encoding.
    pub fn wait_status(&self) -> i32 {
        let status = self.status.lock();
        if status.killed {
            abi::wait_status::signalled(abi::wait_status::SIGSEGV)
        } else {
            abi::wait_status::exited(status.exit_code.unwrap_or(0))
        }
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

    /// Called by each exiting thread: keeps its `clear_child_tid` promise
    /// and forgets it; the last one tears the process down.
    pub fn thread_exited(&self, thread: &Thread) {
        let clear_child_tid = thread.clear_child_tid.swap(0, Ordering::AcqRel);
        if clear_child_tid != 0 {
            // As Linux: the memory may be gone or read-only by now, and
            // then nobody is told (the thread ends either way).
            if self
                .space
                .copy_out(clear_child_tid, &0u32.to_le_bytes())
                .is_ok()
            {
                let _ = futex::wake(self.pid, clear_child_tid, 1, abi::futex::BITSET_MATCH_ANY);
            }
        }
        self.threads.lock().remove(&thread.tid);
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
            self.finished.store(true, Ordering::SeqCst);
            core::mem::take(&mut status.waiters)
        };
        for waiter in &waiters {
            sched::wake(waiter);
        }
        if let Some(parent) = self.parent.and_then(Self::find) {
            let waiters = core::mem::take(&mut *parent.child_waiters.lock());
            for waiter in &waiters {
                sched::wake(waiter);
            }
        }
        drop(threads);
        self.reap_orphans();
    }

    /// Whether every thread has ended and the address space is gone.
    pub fn is_finished(&self) -> bool {
        self.finished.load(Ordering::SeqCst)
    }

    /// `wait4(-1)`: a finished child of this process, taken out of the
    /// table, waiting for one to finish unless `block` is false (`WNOHANG`:
    /// then `Ok(None)`). `Child` if the process has no children, `Srch` if
    /// it is killed while it waits.
    pub fn wait_any_child(&self, block: bool) -> Result<Option<Arc<Self>>, Errno> {
        let me = sched::current();
        loop {
            {
                // Under this lock a finishing child cannot slip between the
                // look at the table and the sleep: it wakes the waiters
                // under it, after it set its `finished` flag.
                let mut waiters = self.child_waiters.lock();
                let (mut children, mut done) = (0, None);
                for entry in PROCESSES.lock().values() {
                    if entry.process.parent == Some(self.pid) {
                        children += 1;
                        if done.is_none() && entry.process.is_finished() {
                            done = Some(Arc::clone(&entry.process));
                        }
                    }
                }
                if let Some(child) = done {
                    drop(PROCESSES.lock().remove(&child.pid));
                    return Ok(Some(child));
                }
                if children == 0 {
                    return Err(Errno::Child);
                }
                if !block {
                    return Ok(None);
                }
                waiters.push(Arc::clone(&me));
                *me.state.lock() = ThreadState::Blocked;
            }
            if !sched::block_unless_killed(&me) {
                return Err(Errno::Srch);
            }
        }
    }

    /// Removes from the table the processes nobody will wait for now that
    /// this one has finished: its finished children, and itself if its
    /// parent has finished or is gone (see the module docs for the race).
    fn reap_orphans(&self) {
        let mut reaped = Vec::new();
        {
            let mut table = PROCESSES.lock();
            let finished_children: Vec<u64> = table
                .values()
                .filter(|entry| {
                    entry.process.parent == Some(self.pid)
                        && entry.process.finished.load(Ordering::SeqCst)
                })
                .map(|entry| entry.process.pid)
                .collect();
            for pid in finished_children {
                reaped.extend(table.remove(&pid));
            }
            if let Some(parent) = self.parent {
                let parent_gone = table
                    .get(&parent)
                    .is_none_or(|entry| entry.process.finished.load(Ordering::SeqCst));
                if parent_gone {
                    reaped.extend(table.remove(&self.pid));
                }
            }
        }
        // Dropped outside the table lock: the last reference to a process
        // frees its page tables.
        drop(reaped);
    }

    /// Waits until the process has finished and returns its exit code;
    /// `None` if the caller's own process is killed meanwhile.
    pub fn wait(self: &Arc<Self>) -> Option<i32> {
        let me = sched::current();
        loop {
            {
                let mut status = self.status.lock();
                if self.finished.load(Ordering::SeqCst) {
                    drop(PROCESSES.lock().remove(&self.pid));
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
