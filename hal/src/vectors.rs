//! The interrupt vector map: which vector each interrupt source uses.
//!
//! | vector      | source                                              |
//! |-------------|-----------------------------------------------------|
//! | 0x00-0x1F   | CPU exceptions                                      |
//! | 0x20        | local APIC timer ([`crate::timer`])                 |
//! | 0xE0-0xEF   | legacy PICs, masked (spurious only, [`crate::pic`]) |
//! | 0xF0        | cross-CPU call IPI ([`crate::ipi`])                 |
//! | 0xF1        | reschedule IPI (the kernel's scheduler)             |
//! | 0xF2        | a cross-call answered: wakes its halted caller      |
//! | 0xFF        | local APIC spurious interrupt                       |
//!
//! System calls arrive through the same trap path with the pseudo-vector
//! [`SYSCALL`], which no IDT entry uses.

/// Exceptions are vectors `0..FIRST_INTERRUPT`.
pub const FIRST_INTERRUPT: u64 = 32;
pub const TIMER: u8 = 0x20;
pub const PIC_BASE: u8 = 0xE0;
pub const CROSS_CALL: u8 = 0xF0;
pub const RESCHEDULE: u8 = 0xF1;
pub const CALL_ANSWERED: u8 = 0xF2;
pub const SPURIOUS: u8 = 0xFF;
/// The `vector` field of a system call's trap frame (not an IDT vector).
pub const SYSCALL: u64 = 0x100;
