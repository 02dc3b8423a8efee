//! Hardware interrupts (vectors 32-255): the vector map and the dispatcher.
//!
//! | vector      | source                                    |
//! |-------------|-------------------------------------------|
//! | 0x20        | local APIC timer ([`crate::smp::timer`])  |
//! | 0xE0-0xEF   | legacy PICs, masked (spurious only)       |
//! | 0xF0        | cross-CPU call IPI ([`crate::arch::ipi`])       |
//! | 0xFF        | local APIC spurious interrupt             |

use core::sync::atomic::Ordering;

use crate::arch::{apic::LocalApic, percpu, pic::PIC_VECTOR_BASE, trap::TrapFrame};

pub const TIMER_VECTOR: u8 = 0x20;
pub const SPURIOUS_VECTOR: u8 = 0xFF;

/// Handles interrupt `frame.vector` (32-255).
pub fn dispatch(frame: &TrapFrame) {
    let vector = frame.vector as u8;
    match vector {
        TIMER_VECTOR => {
            percpu::current().ticks.fetch_add(1, Ordering::Relaxed);
            end_of_interrupt();
        }
        crate::arch::ipi::CALL_VECTOR => {
            crate::arch::ipi::handle_call_ipi();
            end_of_interrupt();
        }
        // Spurious interrupts are not in service: no EOI.
        SPURIOUS_VECTOR => {}
        _ if (PIC_VECTOR_BASE..PIC_VECTOR_BASE + 16).contains(&vector) => {}
        _ => crate::fatal::stop(
            format_args!("unexpected interrupt vector {vector:#x}"),
            Some(frame),
        ),
    }
}

fn end_of_interrupt() {
    if let Ok(apic) = LocalApic::get() {
        apic.end_of_interrupt();
    }
}
