//! The interrupt descriptor table.
//!
//! Every one of the 256 vectors points at its entry stub in [`crate::trap`],
//! so there is no vector the CPU could take without reaching Rust code and a
//! report. All entries are interrupt gates (IF cleared on entry) reachable
//! only from ring 0; the double fault runs on its own stack (see
//! [`crate::gdt`]).

use spin::Lazy;
use x86_64::{
    PrivilegeLevel, VirtAddr,
    instructions::{
        segmentation::{CS, Segment},
        tables::lidt,
    },
    structures::DescriptorTablePointer,
};

use crate::{gdt::DOUBLE_FAULT_IST_INDEX, trap::stub_address};

const DOUBLE_FAULT_VECTOR: u8 = 8;

/// One 16-byte gate descriptor, in the layout the CPU reads.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Gate {
    offset_low: u16,
    selector: u16,
    /// Bits 0-2: interrupt stack table index (0 = stay on the current stack).
    ist: u8,
    /// Present bit, descriptor privilege level, gate type.
    attributes: u8,
    offset_middle: u16,
    offset_high: u32,
    reserved: u32,
}

impl Gate {
    const PRESENT: u8 = 1 << 7;
    const INTERRUPT_GATE: u8 = 0xE;

    fn interrupt(handler: VirtAddr, code_selector: u16, ist: u8, dpl: PrivilegeLevel) -> Self {
        let address = handler.as_u64();
        Self {
            offset_low: address as u16,
            selector: code_selector,
            ist,
            attributes: Self::PRESENT | ((dpl as u8) << 5) | Self::INTERRUPT_GATE,
            offset_middle: (address >> 16) as u16,
            offset_high: (address >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Idt([Gate; 256]);

/// Built on first use, after the GDT is loaded (it records the current code
/// selector). All CPUs share it.
static IDT: Lazy<Idt> = Lazy::new(|| {
    let code_selector = CS::get_reg().0;
    let mut gates = [Gate::default(); 256];
    for (vector, gate) in (0..=u8::MAX).zip(gates.iter_mut()) {
        let ist = if vector == DOUBLE_FAULT_VECTOR {
            DOUBLE_FAULT_IST_INDEX + 1
        } else {
            0
        };
        *gate = Gate::interrupt(
            stub_address(vector),
            code_selector,
            ist,
            PrivilegeLevel::Ring0,
        );
    }
    Idt(gates)
});

/// Loads the IDT on this CPU.
pub fn load() {
    let table: &'static Idt = &IDT;
    let pointer = DescriptorTablePointer {
        limit: (size_of::<Idt>() - 1) as u16,
        base: VirtAddr::from_ptr(table),
    };
    // The table is 'static and never changes after it is built, and
    // every gate points at an entry stub in this kernel's text with the
    // kernel code selector, so any vector the CPU takes lands in valid code.
    // SAFETY: a 'static, immutable IDT whose every gate is valid.
    unsafe { lidt(&pointer) };
}
