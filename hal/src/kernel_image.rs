//! The kernel's own ELF file, as the bootloader left it in memory.
//!
//! The bootloader reads the whole kernel file (not only its loadable
//! segments) into physical memory before it maps the image, and reports
//! where in `BootInfo::kernel_addr` and `kernel_len`. Those frames are listed
//! as `Bootloader` memory, not `Usable`, and the frame allocator only hands
//! out `Usable` frames, so the file stays intact for as long as the kernel
//! runs. Its symbol table is what turns addresses in crash reports into
//! function names (the kernel's symbol table).
//!
//! As with the ramdisk, the kernel checks rather than trusts: [`file()`]
//! refuses a range that wraps or touches allocatable memory.

use bootloader_api::{BootInfo, info::MemoryRegion};
use x86_64::PhysAddr;

use crate::frames::overlaps_usable;

/// The kernel's ELF file, read-only, for the kernel's lifetime; `None` if
/// the bootloader reported no usable range. Needs the physical-memory
/// window (`memory::init`).
pub fn file(boot_info: &BootInfo) -> Option<&'static [u8]> {
    let (start, len) = (boot_info.kernel_addr, boot_info.kernel_len);
    let end = start.checked_add(len)?;
    let regions: &[MemoryRegion] = &boot_info.memory_regions;
    if len == 0 || overlaps_usable(regions, start, end) {
        return None;
    }
    let bytes = crate::phys::to_virt(PhysAddr::new(start)).as_ptr::<u8>();
    // The physical-memory window maps all RAM, so `start..end` (RAM
    // the bootloader loaded the file into) is mapped at `bytes`. None of it
    // lies in a `Usable` region (checked above), so the kernel never
    // allocates, writes or frees it; the bootloader wrote it before the
    // kernel started. `u8` has alignment 1 and no invalid values.
    // SAFETY: mapped, initialised memory that nothing ever writes.
    Some(unsafe { core::slice::from_raw_parts(bytes, len as usize) })
}
