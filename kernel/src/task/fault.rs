//! Exceptions raised by ring 3: resolve them, or kill the process.
//!
//! A page fault in a region that allows the access is demand paging: a
//! zeroed page appears and the instruction runs again. Anything else (an
//! access outside every region, to kernel memory, a write to a read-only
//! page, executing a non-executable page, a general protection fault, an
//! invalid opcode) kills the faulting process with a report. The rest of
//! the system keeps running.

use super::{
    process::KILLED_EXIT_CODE,
    sched,
    vm::{Access, FaultError},
};
use crate::arch::{self, trap::TrapFrame};

const PAGE_FAULT: u64 = 14;

/// Handles exception `frame.vector` raised in ring 3.
pub fn handle(frame: &mut TrapFrame, name: &str) {
    let thread = sched::current();
    let process = thread
        .process
        .clone()
        .expect("ring 3 runs only user threads");
    let what = if frame.vector == PAGE_FAULT {
        const WRITE: u64 = 1 << 1;
        const INSTRUCTION_FETCH: u64 = 1 << 4;
        let address = arch::cpu::page_fault_address();
        let access = Access {
            write: frame.error_code & WRITE != 0,
            execute: frame.error_code & INSTRUCTION_FETCH != 0,
        };
        // The address-space lock may be held by a CPU waiting for a TLB
        // shootdown that this CPU must answer: take it with interrupts on.
        arch::cpu::enable_interrupts();
        let resolved = process.space.handle_fault(address, access);
        arch::cpu::disable_interrupts();
        match resolved {
            Ok(()) => {
                drop((thread, process));
                return super::before_return_to_user();
            }
            Err(error) => {
                let kind = if access.execute {
                    "execute"
                } else if access.write {
                    "write"
                } else {
                    "read"
                };
                let reason = match error {
                    FaultError::Unmapped => "no mapping",
                    FaultError::Protection => "protection violation",
                    FaultError::OutOfMemory => "out of memory",
                };
                alloc::format!("{name}: {kind} at {address:#x} ({reason})")
            }
        }
    } else {
        alloc::format!("{name}, error code {:#x}", frame.error_code)
    };
    crate::println!(
        "process {} ({}) killed: thread {} {what} at rip {:#x}",
        process.pid,
        process.name,
        thread.tid,
        frame.rip
    );
    process.kill(KILLED_EXIT_CODE);
    drop(process);
    drop(thread);
    sched::exit_current(i64::from(KILLED_EXIT_CODE))
}
