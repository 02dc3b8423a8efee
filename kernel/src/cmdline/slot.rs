//! Where a machine without fw_cfg finds the command line: a slot in the
//! kernel's own file.

/// The command-line slot: a fixed-size, NUL-padded field in the kernel's
/// file, for machines without fw_cfg. Bochs has none, and no other way to
/// hand the kernel a string at boot, so the Bochs runner
/// (`boot/src/machine/bochs/slot.rs`) writes the command line into this
/// field of its own temporary copy of the disk image, and the kernel reads
/// it back from its ELF file as the bootloader loaded it ([`find_in_slot`]).
/// Every built image has the field empty, which means the defaults, and
/// QEMU's runs never look at it: fw_cfg comes first.
///
/// The two markers let the runner find the field among the disk image's
/// bytes without decoding its FAT partition, and prove that the field lies
/// in one piece there (the end marker is where it should be). The runner
/// keeps its own copy of these constants; a host test in `boot` checks that
/// each built image holds exactly one empty slot.
#[repr(C)]
pub struct Slot {
    start: [u8; 16],
    line: [u8; SLOT_CAPACITY],
    end: [u8; 16],
}

/// The bytes just before the slot's command line.
pub const SLOT_START: [u8; 16] = *b"<shootdown-cmdl:";
/// The bytes just after it.
pub const SLOT_END: [u8; 16] = *b":shootdown-cmdl>";
/// How long a command line the slot holds.
pub const SLOT_CAPACITY: usize = 1024;

/// The slot, empty, as it is built into every image.
pub static SLOT: Slot = Slot {
    start: SLOT_START,
    line: [0; SLOT_CAPACITY],
    end: SLOT_END,
};

/// The command line in the slot of `file` (the kernel's ELF file): the
/// bytes between the markers up to the first NUL, empty if nobody wrote
/// one; `None` if `file` has no slot.
///
/// The markers it looks for are [`SLOT`]'s own (behind a
/// [`black_box`](core::hint::black_box), so that the compiler neither drops
/// the unreferenced static nor makes a second copy of the markers for the
/// comparison, which would be a false slot for the runner to find).
pub fn find_in_slot(file: &[u8]) -> Option<&[u8]> {
    let slot = core::hint::black_box(&SLOT);
    let length = slot.start.len() + SLOT_CAPACITY + slot.end.len();
    let found = (0..file.len().saturating_sub(length - 1)).find(|&at| {
        file[at..].starts_with(&slot.start)
            && file[at + slot.start.len() + SLOT_CAPACITY..].starts_with(&slot.end)
    })?;
    let line = &file[found + slot.start.len()..][..SLOT_CAPACITY];
    let end = line
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(line.len());
    Some(&line[..end])
}
