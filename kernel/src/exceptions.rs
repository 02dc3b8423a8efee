//! CPU exceptions (vectors 0-31): what each one means and how it is reported.
//!
//! A kernel that is still being built has no exception it can recover from:
//! every one is a bug, and the most useful thing to do is to say exactly what
//! happened (which exception, the error code decoded, the faulting address for
//! a page fault, whether SMEP and SMAP were on, every register, the
//! backtrace) and end the run as a failure. A #GP raised by INVLPGB is
//! explained: which of the instruction's rules its operands broke. Two
//! exceptions to ending the run: a *probe* ([`hal::probe`]), an access or
//! instruction the tests make on purpose to see it fault; and the NMI another CPU sends to ask a CPU that does not
//! answer its IPIs where it is stuck ([`hal::ipi`]).

use hal::{cpu, ipi, percpu, probe, protection, serial::write_emergency, trap::TrapFrame};
use x86_64::structures::idt::PageFaultErrorCode;

const NMI: u64 = 2;
const GENERAL_PROTECTION: u64 = 13;
const PAGE_FAULT: u64 = 14;
/// The end of the lower (user) half of the address space.
const LOWER_HALF_END: u64 = 0x0000_8000_0000_0000;

/// The architectural names of vectors 0-31 (AMD APM vol. 2, table 8-1).
const NAMES: [&str; 32] = [
    "divide error (#DE)",
    "debug (#DB)",
    "non-maskable interrupt (NMI)",
    "breakpoint (#BP)",
    "overflow (#OF)",
    "bound range exceeded (#BR)",
    "invalid opcode (#UD)",
    "device not available (#NM)",
    "double fault (#DF)",
    "coprocessor segment overrun",
    "invalid TSS (#TS)",
    "segment not present (#NP)",
    "stack-segment fault (#SS)",
    "general protection fault (#GP)",
    "page fault (#PF)",
    "reserved vector 15",
    "x87 floating-point error (#MF)",
    "alignment check (#AC)",
    "machine check (#MC)",
    "SIMD floating-point error (#XM)",
    "virtualization exception (#VE)",
    "control protection exception (#CP)",
    "reserved vector 22",
    "reserved vector 23",
    "reserved vector 24",
    "reserved vector 25",
    "reserved vector 26",
    "reserved vector 27",
    "hypervisor injection exception (#HV)",
    "VMM communication exception (#VC)",
    "security exception (#SX)",
    "reserved vector 31",
];

/// Handles CPU exception `frame.vector` (0-31). Those raised by ring 3 go
/// to the process's fault handler; in the kernel every one is fatal.
pub fn handle(frame: &mut TrapFrame) {
    let name = NAMES[frame.vector as usize];
    if frame.vector == NMI && ipi::answer_where_stuck(|| report_where_stuck(frame)) {
        return;
    }
    if frame.interrupted_user() {
        return crate::task::fault::handle(frame, name);
    }
    if probe::recover(frame) {
        return;
    }
    if frame.vector == GENERAL_PROTECTION
        && let Some(why) = crate::tlb::broadcast::explain_invlpgb_fault(frame)
    {
        crate::fatal::stop(
            format_args!("{name} at rip {:#x}: {why}", frame.rip),
            Some(frame),
        );
    }
    if frame.vector == PAGE_FAULT {
        let address = cpu::page_fault_address();
        crate::fatal::stop(
            format_args!(
                "{name} at rip {:#x}: {} {} {:#x} ({}); SMEP {}, SMAP {}",
                frame.rip,
                privilege(frame.page_fault_error()),
                access_kind(frame.page_fault_error()),
                address,
                page_fault_cause(frame.page_fault_error(), address),
                on_off(protection::smep_enabled()),
                on_off(protection::smap_enabled()),
            ),
            Some(frame),
        )
    }
    crate::fatal::stop(
        format_args!(
            "{name} at rip {:#x}, error code {:#x}",
            frame.rip, frame.error_code
        ),
        Some(frame),
    )
}

/// The answer of a CPU that did not answer a cross-call and was sent an
/// NMI to ask where it is (see [`hal::ipi`]): where the NMI found
/// it, and how it got there.
fn report_where_stuck(frame: &TrapFrame) {
    const INTERRUPTS_ENABLED: u64 = 1 << 9;
    let symbol = crate::symbols::lookup(frame.rip);
    write_emergency(format_args!(
        "\ncpu {} did not answer a cross-call; an NMI found it at rip {:#x} ({}) with interrupts {}\n",
        percpu::current().index,
        frame.rip,
        DisplayOption(symbol),
        on_off(frame.rflags & INTERRUPTS_ENABLED != 0),
    ));
    crate::backtrace::print(frame.rip, frame.rbp);
}

/// Shows `Some(x)` as `x` and `None` as `?`.
struct DisplayOption<T>(Option<T>);

impl<T: core::fmt::Display> core::fmt::Display for DisplayOption<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match &self.0 {
            Some(value) => value.fmt(f),
            None => f.write_str("?"),
        }
    }
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// What the faulting access tried to do, from the page-fault error code.
fn access_kind(error_code: PageFaultErrorCode) -> &'static str {
    if error_code.contains(PageFaultErrorCode::INSTRUCTION_FETCH) {
        "instruction fetch from"
    } else if error_code.contains(PageFaultErrorCode::CAUSED_BY_WRITE) {
        "write to"
    } else {
        "read from"
    }
}

/// Which privilege level made the faulting access.
fn privilege(error_code: PageFaultErrorCode) -> &'static str {
    if error_code.contains(PageFaultErrorCode::USER_MODE) {
        "user"
    } else {
        "kernel"
    }
}

/// Why the access to `address` faulted, from the page-fault error code. A
/// kernel access to a present user page can only have been refused by SMEP
/// (an instruction fetch) or SMAP (a read or write).
fn page_fault_cause(error_code: PageFaultErrorCode, address: u64) -> &'static str {
    let present = error_code.contains(PageFaultErrorCode::PROTECTION_VIOLATION);
    let kernel_touched_user_page =
        present && !error_code.contains(PageFaultErrorCode::USER_MODE) && address < LOWER_HALF_END;
    if error_code.contains(PageFaultErrorCode::MALFORMED_TABLE) {
        "reserved bit set in a page-table entry"
    } else if error_code.contains(PageFaultErrorCode::PROTECTION_KEY) {
        "protection-key violation"
    } else if !present {
        "page not present"
    } else if kernel_touched_user_page && error_code.contains(PageFaultErrorCode::INSTRUCTION_FETCH)
    {
        "SMEP: the kernel may not execute user pages"
    } else if kernel_touched_user_page {
        "SMAP: the kernel may not touch user pages"
    } else {
        "protection violation"
    }
}
