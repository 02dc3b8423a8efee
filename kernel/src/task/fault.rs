//! Exceptions raised by ring 3: resolve them, or kill the process.
//!
//! A page fault in a region that allows the access is demand paging: a
//! zeroed page appears and the instruction runs again. Anything else (an
//! access outside every region, to kernel memory, a write to a read-only
//! page, executing a non-executable page, a page no frame is left for, a
//! general protection fault, an invalid opcode) kills the faulting process
//! with a report that says which. The rest of the system keeps running.

use super::{
    process::KILLED_EXIT_CODE,
    sched,
    vm::{Access, FaultError},
};
use hal::{self, trap::TrapFrame};

const PAGE_FAULT: u64 = 14;

/// Handles exception `frame.vector` raised in ring 3.
pub fn handle(frame: &mut TrapFrame, name: &str) {
    let thread = sched::current();
    let process = thread
        .process
        .clone()
        .expect("ring 3 runs only user threads");
    let what = if frame.vector == PAGE_FAULT {
        const PRESENT: u64 = 1 << 0;
        const WRITE: u64 = 1 << 1;
        const INSTRUCTION_FETCH: u64 = 1 << 4;
        let address = hal::cpu::page_fault_address();
        let access = Access {
            write: frame.error_code & WRITE != 0,
            execute: frame.error_code & INSTRUCTION_FETCH != 0,
        };
        let resolved = if address >= abi::USER_END {
            // The kernel half: mapped only without the USER bit, if at all.
            Err(if frame.error_code & PRESENT != 0 {
                "kernel memory: present, but supervisor-only"
            } else {
                "kernel memory: not mapped"
            })
        } else {
            // The address-space lock may be held by a CPU waiting for a TLB
            // shootdown that this CPU must answer: take it with interrupts on.
            hal::cpu::enable_interrupts();
            let resolved = process.space.handle_fault(address, access);
            hal::cpu::disable_interrupts();
            resolved.map_err(|error| match error {
                FaultError::Unmapped => "no mapping",
                FaultError::Protection => "protection violation",
                FaultError::OutOfMemory => "out of memory: no free frame for the page",
            })
        };
        match resolved {
            Ok(()) => {
                drop((thread, process));
                return super::before_return_to_user();
            }
            Err(reason) => {
                let kind = if access.execute {
                    "execute"
                } else if access.write {
                    "write"
                } else {
                    "read"
                };
                alloc::format!("{name}: {kind} at {address:#x} ({reason})")
            }
        }
    } else {
        alloc::format!("{name}, error code {:#x}", frame.error_code)
    };
    hal::println!(
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
