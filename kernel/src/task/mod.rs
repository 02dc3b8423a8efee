//! Processes and threads in ring 3: scheduling, address spaces, system
//! calls, faults and program loading.

pub mod fault;
pub mod futex;
pub mod loader;
pub mod process;
pub mod sched;
pub mod shared_memory;
pub mod swap;
pub mod sync;
pub mod syscall;
pub mod thread;
pub mod vm;

/// The last stop before a thread returns to ring 3 (interrupts off): a
/// thread of a process that is being killed exits here instead.
pub fn before_return_to_user() {
    let thread = sched::current();
    if thread
        .process
        .as_ref()
        .is_some_and(|process| process.is_exiting())
    {
        drop(thread);
        sched::exit_current(0);
    }
}
