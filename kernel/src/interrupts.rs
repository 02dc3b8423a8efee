//! Hardware interrupts (vectors 32-255): what each one does. The vector map
//! itself is the hardware layer's ([`hal::vectors`]); the trap path calls
//! [`dispatch`], registered at boot.

use hal::{apic::LocalApic, percpu, trap::TrapFrame, vectors};

use crate::task::{self, sched};

/// Handles interrupt `frame.vector` (32-255).
pub fn dispatch(frame: &mut TrapFrame) {
    let vector = frame.vector as u8;
    match vector {
        vectors::TIMER => {
            // With the profiler on, the timer runs faster than the tick and
            // only every n-th interrupt is one.
            let is_tick = crate::profiler::on_timer_interrupt(frame);
            end_of_interrupt();
            if is_tick {
                percpu::current()
                    .ticks
                    .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                sched::tick();
                // Preemption: only ring 3 is ever interrupted mid-time-slice
                // (the kernel is not preemptible, see `task::sched`).
                if frame.interrupted_user() {
                    sched::yield_now();
                }
            }
        }
        vectors::CROSS_CALL => {
            hal::ipi::handle_call_ipi();
            end_of_interrupt();
        }
        vectors::CALL_ANSWERED => {
            hal::ipi::handle_answered_ipi();
            end_of_interrupt();
        }
        vectors::RESCHEDULE => {
            percpu::current().count_ipi_received();
            end_of_interrupt();
            if frame.interrupted_user() {
                sched::yield_now();
            }
        }
        // Spurious interrupts are not in service: no EOI.
        vectors::SPURIOUS => {}
        _ if (vectors::PIC_BASE..vectors::PIC_BASE + 16).contains(&vector) => {}
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
