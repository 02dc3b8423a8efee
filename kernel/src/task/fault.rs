//! Exceptions raised by ring 3: resolve them, or kill the process.
//!
//! A page fault in a region that allows the access is demand paging: a
//! zeroed page appears and the instruction runs again. Anything else (an
//! access outside every region, to kernel memory, a write to a read-only
//! page, executing a non-executable page, a page no frame is left for, a
//! general protection fault, an invalid opcode) kills the faulting process
//! with a report that says which. The rest of the system keeps running.

use alloc::string::String;

use super::{
    process::{KILLED_EXIT_CODE, Process},
    sched,
    vm::{Access, FaultError},
};
use hal::trap::TrapFrame;
use x86_64::structures::idt::PageFaultErrorCode;

const PAGE_FAULT: u64 = 14;

/// Handles exception `frame.vector` raised in ring 3: a page fault a region
/// allows is resolved and the thread goes on; anything else kills the
/// process, with a line that says why.
pub fn handle(frame: &mut TrapFrame, name: &str) {
    let thread = sched::current();
    let process = thread
        .process
        .clone()
        .expect("ring 3 runs only user threads");
    let what = if frame.vector == PAGE_FAULT {
        match page_fault(&process, frame, name) {
            None => {
                drop((thread, process));
                return super::before_return_to_user();
            }
            Some(what) => what,
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
    process.kill_for_fault();
    drop(process);
    drop(thread);
    sched::exit_current(i64::from(KILLED_EXIT_CODE))
}

/// A page fault in ring 3: `None` once the address space has resolved it,
/// else what the access was and why it failed, for the kill report.
fn page_fault(process: &Process, frame: &TrapFrame, name: &str) -> Option<String> {
    let address = hal::cpu::page_fault_address();
    let error = frame.page_fault_error();
    let access = Access {
        write: error.contains(PageFaultErrorCode::CAUSED_BY_WRITE),
        execute: error.contains(PageFaultErrorCode::INSTRUCTION_FETCH),
    };
    let resolved = if address >= abi::USER_END {
        // The kernel half: mapped only without the USER bit, if at all.
        Err(
            if error.contains(PageFaultErrorCode::PROTECTION_VIOLATION) {
                "kernel memory: present, but supervisor-only"
            } else {
                "kernel memory: not mapped"
            },
        )
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
    let reason = resolved.err()?;
    let kind = if access.execute {
        "execute"
    } else if access.write {
        "write"
    } else {
        "read"
    };
    Some(alloc::format!("{name}: {kind} at {address:#x} ({reason})"))
}
