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

use core::{mem::MaybeUninit, sync::atomic::AtomicU32};

use spin::Once;
use x86_64::{PhysAddr, VirtAddr};

use crate::frames::{FRAME_SIZE, Frame, PermanentFrames};

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

/// The memory of `frames` as zeroed 32-bit atomic counters, for the
/// kernel's lifetime (per-frame bookkeeping that every CPU updates).
pub fn permanent_counters(frames: PermanentFrames) -> &'static [AtomicU32] {
    let words = permanent_words(frames);
    let counters = words.len() * 2;
    // The words are exclusively ours for good (see `permanent_bytes`),
    // zeroed, and 8-byte aligned, so each half is a valid, aligned
    // `AtomicU32` (same size and bit validity as `u32`). Handing out only a
    // shared slice of atomics is what lets every CPU update them.
    // SAFETY: exclusive, aligned, initialised memory of the right length.
    unsafe { core::slice::from_raw_parts(words.as_mut_ptr().cast::<AtomicU32>(), counters) }
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

// Access to allocator frames (page tables and user pages). No Rust object
// ever lives in such a frame, so volatile and atomic accesses through the
// offset mapping cannot alias a reference; races between CPUs on a frame's
// contents are the callers' protocol to prevent (page-table locks).

fn frame_pointer(frame: Frame, offset: usize, len: usize) -> *mut u8 {
    assert!(
        offset.checked_add(len).is_some_and(|end| end <= FRAME_SIZE),
        "access beyond the frame"
    );
    // The offset mapping covers all RAM and `offset + len` stays in the frame.
    to_virt(frame.address())
        .as_mut_ptr::<u8>()
        .wrapping_add(offset)
}

/// Fills `frame` with zeroes.
pub fn zero_frame(frame: Frame) {
    let start = frame_pointer(frame, 0, FRAME_SIZE);
    // SAFETY: a whole allocator frame, mapped and holding no Rust object.
    unsafe { core::ptr::write_bytes(start, 0, FRAME_SIZE) };
}

/// Copies `buffer.len()` bytes at `offset` in `frame` into `buffer`.
pub fn read_frame(frame: Frame, offset: usize, buffer: &mut [u8]) {
    let source = frame_pointer(frame, offset, buffer.len());
    // In-bounds bytes of an allocator frame (checked above), which
    // cannot overlap `buffer` (a Rust object, so not in such a frame).
    // SAFETY: in-bounds bytes of an allocator frame, disjoint from `buffer`.
    unsafe { core::ptr::copy_nonoverlapping(source, buffer.as_mut_ptr(), buffer.len()) };
}

/// Copies `data` into `frame` at `offset`.
pub fn write_frame(frame: Frame, offset: usize, data: &[u8]) {
    let destination = frame_pointer(frame, offset, data.len());
    // SAFETY: in-bounds bytes of an allocator frame, not overlapping `data`.
    unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), destination, data.len()) };
}

/// Copies the whole of `source` into `destination` (a copy-on-write break,
/// a fork of a swapped page).
///
/// # Panics
/// If the two are the same frame.
pub fn copy_frame(source: Frame, destination: Frame) {
    assert_ne!(source, destination, "a frame copied onto itself");
    let from = frame_pointer(source, 0, FRAME_SIZE);
    let to = frame_pointer(destination, 0, FRAME_SIZE);
    // Two different allocator frames: whole, mapped, disjoint, holding no
    // Rust object.
    // SAFETY: in-bounds bytes of two distinct allocator frames.
    unsafe { core::ptr::copy_nonoverlapping(from, to, FRAME_SIZE) };
}

fn table_entry(table: Frame, index: usize) -> &'static core::sync::atomic::AtomicU64 {
    assert!(index < 512, "page-table index {index} out of range");
    let entry = frame_pointer(table, index * 8, 8).cast::<u64>();
    // An 8-byte aligned, in-bounds word of an allocator frame used as
    // a page table. The CPU's page walker updates accessed/dirty bits in it
    // with atomic operations, so Rust must only access it atomically too.
    // SAFETY: an aligned, in-bounds page-table word, only ever accessed atomically.
    unsafe { core::sync::atomic::AtomicU64::from_ptr(entry) }
}

/// Reads entry `index` of page table `table`.
pub fn load_entry(table: Frame, index: usize) -> u64 {
    table_entry(table, index).load(core::sync::atomic::Ordering::Acquire)
}

/// Writes entry `index` of page table `table`.
pub fn store_entry(table: Frame, index: usize, value: u64) {
    table_entry(table, index).store(value, core::sync::atomic::Ordering::Release);
}

/// Replaces entry `index` of `table` with `new` if it still holds
/// `current`; otherwise returns what it holds (the accessed and dirty bits
/// the hardware sets count as a change).
pub fn compare_exchange_entry(
    table: Frame,
    index: usize,
    current: u64,
    new: u64,
) -> Result<u64, u64> {
    table_entry(table, index).compare_exchange(
        current,
        new,
        core::sync::atomic::Ordering::AcqRel,
        core::sync::atomic::Ordering::Acquire,
    )
}

/// Replaces entry `index` of `table`, returning the old value with the
/// accessed and dirty bits as the hardware last set them.
pub fn swap_entry(table: Frame, index: usize, value: u64) -> u64 {
    table_entry(table, index).swap(value, core::sync::atomic::Ordering::AcqRel)
}
