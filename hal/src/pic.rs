//! The legacy 8259 interrupt controllers, switched off.
//!
//! The kernel takes all interrupts through the local APIC. The two PICs
//! still exist on PCs, and after reset they deliver IRQs 0-15 at vectors
//! 8-15 and 0x70-0x77: the first range collides with CPU exceptions. They are
//! remapped out of the way (to [`crate::vectors::PIC_BASE`]..+16) and then every line is
//! masked; a *spurious* IRQ 7 or 15 can still arrive despite the masks, so
//! those vectors are ignored by the interrupt dispatcher.

use x86_64::instructions::port::Port;

/// Remaps both PICs to [`crate::vectors::PIC_BASE`] and masks all their lines.
pub fn disable() {
    let mut master_command = Port::<u8>::new(0x20);
    let mut master_data = Port::<u8>::new(0x21);
    let mut slave_command = Port::<u8>::new(0xA0);
    let mut slave_data = Port::<u8>::new(0xA1);
    // Ports 0x20/0x21/0xA0/0xA1 are the PICs' command and data
    // registers; this is the standard initialisation sequence (ICW1: edge
    // triggered, cascade, ICW4 follows; ICW2: vector base; ICW3: slave on
    // IRQ 2; ICW4: 8086 mode), followed by masking every line.
    // SAFETY: only the PICs are touched, with their documented init sequence.
    unsafe {
        master_command.write(0x11);
        slave_command.write(0x11);
        master_data.write(crate::vectors::PIC_BASE);
        slave_data.write(crate::vectors::PIC_BASE + 8);
        master_data.write(0x04);
        slave_data.write(0x02);
        master_data.write(0x01);
        slave_data.write(0x01);
        master_data.write(0xFF);
        slave_data.write(0xFF);
    }
}
