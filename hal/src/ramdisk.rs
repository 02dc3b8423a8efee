//! The ramdisk: the archive of user programs the bootloader loads with the
//! kernel, as one `&'static [u8]`.
//!
//! The bootloader reads the ramdisk file of the boot image into physical
//! memory and maps it, contiguously and non-executable, at a virtual address
//! it reports in `BootInfo::ramdisk_addr` (in the upper half here, as every
//! dynamic bootloader mapping: see `BOOTLOADER_CONFIG`). Its frames are
//! listed in the memory map as `Bootloader` memory, not `Usable` (the
//! bootloader carves them out of the firmware's free memory, for BIOS and
//! UEFI boots alike), and the frame allocator only ever hands out `Usable`
//! frames, so the bytes stay where they are for as long as the kernel runs.
//!
//! The kernel does not take that on trust: [`bytes`] walks the page tables
//! for every page of the ramdisk and checks that it is mapped and that its
//! frame lies in no `Usable` region.

use bootloader_api::{BootInfo, info::MemoryRegion};
use x86_64::VirtAddr;

use crate::frames::overlaps_usable;
use crate::paging::translate;

const PAGE_SIZE: u64 = 4096;

/// Why the ramdisk cannot be used.
#[derive(Debug)]
pub enum RamdiskError {
    /// The boot image has no ramdisk.
    Missing,
    /// The reported range wraps around the address space.
    BadRange { addr: u64, len: u64 },
    /// A page of the ramdisk is not mapped.
    NotMapped { addr: u64 },
    /// A page of the ramdisk is memory the frame allocator may hand out.
    InUsableMemory { addr: u64, phys: u64 },
}

impl core::fmt::Display for RamdiskError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Missing => write!(f, "the bootloader loaded no ramdisk"),
            Self::BadRange { addr, len } => {
                write!(f, "the ramdisk at {addr:#x}, {len} bytes, wraps around")
            }
            Self::NotMapped { addr } => write!(f, "ramdisk page {addr:#x} is not mapped"),
            Self::InUsableMemory { addr, phys } => write!(
                f,
                "ramdisk page {addr:#x} is in usable (allocatable) memory at {phys:#x}"
            ),
        }
    }
}

/// The ramdisk's bytes, after checking that they are mapped and that no
/// allocation can ever reuse them. Needs the physical-memory window
/// (`memory::init`).
pub fn bytes(boot_info: &BootInfo) -> Result<&'static [u8], RamdiskError> {
    let addr = boot_info
        .ramdisk_addr
        .into_option()
        .ok_or(RamdiskError::Missing)?;
    let len = boot_info.ramdisk_len;
    let end = addr
        .checked_add(len)
        .filter(|end| VirtAddr::try_new(*end).is_ok())
        .ok_or(RamdiskError::BadRange { addr, len })?;
    let regions: &[MemoryRegion] = &boot_info.memory_regions;
    let mut page = addr & !(PAGE_SIZE - 1);
    while page < end {
        let phys = translate(VirtAddr::new(page)).ok_or(RamdiskError::NotMapped { addr: page })?;
        if overlaps_usable(regions, phys.as_u64(), phys.as_u64() + PAGE_SIZE) {
            return Err(RamdiskError::InUsableMemory {
                addr: page,
                phys: phys.as_u64(),
            });
        }
        page += PAGE_SIZE;
    }
    let start = VirtAddr::new(addr).as_ptr::<u8>();
    // Every page of `addr..addr + len` was just found mapped, in
    // memory that is not `Usable` and so never handed out, written or freed
    // by the kernel; the bootloader wrote the bytes before the kernel
    // started, and nothing but this slice knows the address. `u8` has
    // alignment 1 and no invalid values, and `len` bytes from `addr` do not
    // wrap (checked above).
    // SAFETY: mapped, initialised memory that nothing ever writes.
    Ok(unsafe { core::slice::from_raw_parts(start, len as usize) })
}
