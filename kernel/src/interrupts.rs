//! Hardware interrupts (vectors 32-255): the vector map and the dispatcher.
//!
//! | vector      | source                                    |
//! |-------------|-------------------------------------------|
//! | 0x20        | local APIC timer ([`crate::smp::timer`])  |
//! | 0xE0-0xEF   | legacy PICs, masked (spurious only)       |
//! | 0xF0        | cross-CPU call IPI ([`crate::arch::ipi`]) |
//! | 0xF1        | reschedule IPI ([`crate::task::sched`])   |
//! | 0xFF        | local APIC spurious interrupt             |

use core::sync::atomic::Ordering;

use crate::{
    arch::{apic::LocalApic, percpu, pic::PIC_VECTOR_BASE, trap::TrapFrame},
    task::{self, sched},
};

pub const TIMER_VECTOR: u8 = 0x20;
pub const SPURIOUS_VECTOR: u8 = 0xFF;

/// Handles interrupt `frame.vector` (32-255).
pub fn dispatch(frame: &TrapFrame) {
    let vector = frame.vector as u8;
    match vector {
        TIMER_VECTOR => {
            percpu::current().ticks.fetch_add(1, Ordering::Relaxed);
            end_of_interrupt();
            sched::tick();
            // Preemption: only ring 3 is ever interrupted mid-time-slice
            // (the kernel is not preemptible, see `task::sched`).
            if frame.interrupted_user() {
                sched::yield_now();
            }
        }
        crate::arch::ipi::CALL_VECTOR => {
            crate::arch::ipi::handle_call_ipi();
            end_of_interrupt();
        }
        sched::RESCHEDULE_VECTOR => {
            percpu::current()
                .ipis_received
                .fetch_add(1, Ordering::Relaxed);
            end_of_interrupt();
            if frame.interrupted_user() {
                sched::yield_now();
            }
        }
        // Spurious interrupts are not in service: no EOI.
        SPURIOUS_VECTOR => {}
        _ if (PIC_VECTOR_BASE..PIC_VECTOR_BASE + 16).contains(&vector) => {}
        _ => crate::fatal::stop(
            format_args!("unexpected interrupt vector {vector:#x}"),
            Some(frame),
        ),
    }
    if frame.interrupted_user() {
        task::before_return_to_user();
    }
}

fn end_of_interrupt() {
    if let Ok(apic) = LocalApic::get() {
        apic.end_of_interrupt();
    }
}
