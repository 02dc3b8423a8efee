//! Access to physical memory through the bootloader's offset mapping.
//!
//! The bootloader maps all physical memory (at least the first 4 GiB, in
//! 2 MiB pages, writable and non-executable) at `physical_memory_offset`. The
//! kernel reaches any frame `p` at virtual address `offset + p`.
//!
//! Turning such an address into a Rust reference is only sound while nothing
//! else uses the frame. This module therefore hands out memory only for
//! [`PermanentFrames`]: frames the allocator gave up for good, a type only the
//! allocator can create.

use core::mem::MaybeUninit;

use spin::Once;
use x86_64::{PhysAddr, VirtAddr};

use crate::memory::frames::{FRAME_SIZE, PermanentFrames};

static OFFSET: Once<u64> = Once::new();

/// Records where the bootloader mapped physical memory. Called once at boot.
pub fn init(physical_memory_offset: u64) {
    OFFSET.call_once(|| physical_memory_offset);
}

/// The virtual address at which physical address `addr` is mapped.
pub fn to_virt(addr: PhysAddr) -> VirtAddr {
    let offset = *OFFSET
        .get()
        .expect("phys::init runs before any physical access");
    VirtAddr::new(offset + addr.as_u64())
}

/// The memory of `frames` as uninitialised bytes, for the kernel's lifetime.
pub fn permanent_bytes(frames: PermanentFrames) -> &'static mut [MaybeUninit<u8>] {
    let start = to_virt(frames.start()).as_mut_ptr::<MaybeUninit<u8>>();
    let len = frames.count() * FRAME_SIZE;
    // `PermanentFrames` is only created by the frame allocator for
    // frames it marked used and will never hand out again, so this is the one
    // and only reference to them. They are mapped writable through the offset
    // mapping, which covers all RAM; `MaybeUninit<u8>` has no validity
    // requirement and alignment 1.
    // SAFETY: exclusive, mapped, writable memory with no validity requirement.
    unsafe { core::slice::from_raw_parts_mut(start, len) }
}

/// The memory of `frames` as zeroed 64-bit words, for the kernel's lifetime.
pub fn permanent_words(frames: PermanentFrames) -> &'static mut [u64] {
    let bytes = permanent_bytes(frames);
    bytes.fill(MaybeUninit::new(0));
    let words = bytes.len() / size_of::<u64>();
    // The region is exclusively ours (see `permanent_bytes`), starts at
    // a frame boundary (so it is 8-byte aligned), spans `words * 8` bytes, and
    // every byte was just initialised to zero, a valid `u64` bit pattern.
    // SAFETY: exclusive, aligned, initialised memory of the right length.
    unsafe { core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<u64>(), words) }
}

/// Copies physical memory at `addr` into `buffer`, for firmware tables (ACPI)
/// that the kernel reads but does not own.
pub fn read_bytes(addr: PhysAddr, buffer: &mut [u8]) {
    let start = to_virt(addr).as_ptr::<u8>();
    for (offset, byte) in buffer.iter_mut().enumerate() {
        // The offset mapping covers all physical memory the firmware
        // reports (and at least 4 GiB), so the address is mapped. Firmware
        // tables live in reserved memory the frame allocator never hands out,
        // so no Rust reference aliases it; a volatile byte read has no
        // alignment requirement and every bit pattern is a valid `u8`.
        // SAFETY: a mapped, unaliased byte, read volatile.
        *byte = unsafe { core::ptr::read_volatile(start.add(offset)) };
    }
}
