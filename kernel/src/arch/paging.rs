//! Changes to the kernel's own page tables, and lookups in the active ones.
//!
//! For now the kernel needs one kind of new kernel mapping: device registers
//! (the local APIC) mapped *uncached*. The bootloader's window onto physical
//! memory is write-back cached, which is wrong for MMIO: a cached read of a
//! timer count or a posted write to the interrupt command register would not
//! reach the device when the code expects.
//!
//! MMIO mappings go into a dedicated window in the upper half, handed out
//! bump-style and never unmapped.
//!
//! [`translate`] answers "is this address mapped, and where?" by reading the
//! tables through the physical-memory window, so it cannot fault: the ramdisk
//! check and the crash reports' stack walk rely on that.

use spin::Mutex;
use x86_64::{
    PhysAddr, VirtAddr,
    registers::control::Cr3,
    structures::paging::{
        FrameAllocator, Mapper, OffsetPageTable, Page, PageTable, PageTableFlags, PhysFrame,
        Size4KiB,
    },
};

use crate::memory::frames;

/// The MMIO window: PML4 slot 508, far from everything the bootloader maps.
const MMIO_WINDOW_START: u64 = 0xffff_fe00_0000_0000;
const MMIO_WINDOW_SIZE: u64 = 1 << 30;
const PAGE_SIZE: u64 = 4096;

/// The physical-address bits of a page-table entry.
const ENTRY_ADDRESS_MASK: u64 = 0x000f_ffff_ffff_f000;

/// The next free address in the MMIO window; the lock also serialises every
/// change to the kernel page tables.
static NEXT_MMIO: Mutex<u64> = Mutex::new(MMIO_WINDOW_START);

/// Hands page-table frames to the `x86_64` crate's mapper.
struct KernelFrames;

// SAFETY: `frames::allocate` returns frames that are free and owned by no one
// else; the mapper zeroes them before using them as page tables.
unsafe impl FrameAllocator<Size4KiB> for KernelFrames {
    fn allocate_frame(&mut self) -> Option<PhysFrame<Size4KiB>> {
        frames::allocate().map(|frame| PhysFrame::containing_address(frame.address()))
    }
}

/// Why a mapping could not be made.
#[derive(Debug)]
pub enum MapError {
    WindowFull,
    OutOfMemory,
}

/// Maps `size` bytes of device memory at `phys` uncached, writable and
/// non-executable, and returns the virtual address of `phys`.
pub fn map_mmio(phys: PhysAddr, size: u64) -> Result<VirtAddr, MapError> {
    let first_frame = phys.align_down(PAGE_SIZE);
    let pages = (phys + size)
        .align_up(PAGE_SIZE)
        .as_u64()
        .saturating_sub(first_frame.as_u64())
        / PAGE_SIZE;
    let mut next = NEXT_MMIO.lock();
    let base = *next;
    if base + pages * PAGE_SIZE > MMIO_WINDOW_START + MMIO_WINDOW_SIZE {
        return Err(MapError::WindowFull);
    }
    let flags = PageTableFlags::PRESENT
        | PageTableFlags::WRITABLE
        | PageTableFlags::NO_CACHE
        | PageTableFlags::WRITE_THROUGH
        | PageTableFlags::NO_EXECUTE;
    let (level_4_frame, _) = Cr3::read();
    let level_4_table =
        super::phys::to_virt(level_4_frame.start_address()).as_mut_ptr::<PageTable>();
    // CR3 points at the active level-4 table, which the offset
    // mapping makes reachable at `level_4_table`; holding `NEXT_MMIO` makes
    // this the only code changing the kernel's page tables, so the `&mut` is
    // exclusive. The offset passed is the one all physical memory is mapped at.
    // SAFETY: the active level-4 table, exclusively ours under the lock.
    let mut mapper = unsafe {
        OffsetPageTable::new(&mut *level_4_table, super::phys::to_virt(PhysAddr::new(0)))
    };
    for index in 0..pages {
        let page = Page::<Size4KiB>::containing_address(VirtAddr::new(base + index * PAGE_SIZE));
        let frame = PhysFrame::containing_address(first_frame + index * PAGE_SIZE);
        // `page` lies in the MMIO window, which nothing else maps, so
        // no existing reference covers it; `frame` is device memory (or other
        // physical memory the caller owns) that may be aliased uncached.
        // SAFETY: the page is unused and the frame may be aliased uncached.
        let flush = unsafe { mapper.map_to(page, frame, flags, &mut KernelFrames) }
            .map_err(|_| MapError::OutOfMemory)?;
        flush.flush();
    }
    *next = base + pages * PAGE_SIZE;
    Ok(VirtAddr::new(base + (phys.as_u64() - first_frame.as_u64())))
}

/// The physical address `addr` maps to in the active page tables, by a walk
/// through the physical-memory window. Never faults, whatever `addr` is, so
/// crash reports can use it to check a pointer before following it.
pub fn translate(addr: VirtAddr) -> Option<PhysAddr> {
    let (top, _) = Cr3::read();
    let mut table = top.start_address();
    // The levels from the top; each index selects 512 entries of the
    // level below, and a huge entry maps the rest of the address directly.
    let levels = [
        (addr.p4_index(), 39),
        (addr.p3_index(), 30),
        (addr.p2_index(), 21),
        (addr.p1_index(), 12),
    ];
    for (index, shift) in levels {
        let mut entry = [0u8; 8];
        super::phys::read_bytes(table + u64::from(index) * 8, &mut entry);
        let entry = u64::from_le_bytes(entry);
        let flags = PageTableFlags::from_bits_truncate(entry);
        if !flags.contains(PageTableFlags::PRESENT) {
            return None;
        }
        let frame = entry & ENTRY_ADDRESS_MASK;
        if shift == 12 || flags.contains(PageTableFlags::HUGE_PAGE) {
            let offset_mask = (1u64 << shift) - 1;
            return Some(PhysAddr::new(
                (frame & !offset_mask) | (addr.as_u64() & offset_mask),
            ));
        }
        table = PhysAddr::new(frame);
    }
    None
}
