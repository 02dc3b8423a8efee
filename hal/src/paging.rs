//! Changes to the kernel's own page tables, and lookups in the active ones.
//!
//! The kernel makes two kinds of mappings of its own, each in a window of
//! the upper half that the bootloader leaves empty:
//! - device registers (the local APIC) mapped *uncached*. The bootloader's
//!   window onto physical memory is write-back cached, which is wrong for
//!   MMIO: a cached read of a timer count or a posted write to the interrupt
//!   command register would not reach the device when the code expects.
//!   Handed out bump-style and never unmapped.
//! - thread stacks ([`crate::kernel_stack`]), mapped *global* and removed
//!   again when threads go away. Removing a kernel mapping is the kernel's
//!   own TLB shootdown: every CPU may hold the translation, so the frames are
//!   reused only after a kernel-range flush (`tlb::flush_kernel_range`). The
//!   mappings are global so that INVLPG and INVLPGB's kernel form reach them
//!   whatever PCID a CPU runs with.
//!
//! User page tables copy the kernel's PML4 slots when they are created, so
//! both windows get their level-3 table at boot ([`init`]); later mappings
//! below it are shared by every address space.
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

use crate::frames::{self, StackFrame};

/// The MMIO window: PML4 slot 508, far from everything the bootloader maps.
const MMIO_WINDOW_START: u64 = 0xffff_fe00_0000_0000;
const MMIO_WINDOW_SIZE: u64 = 1 << 30;
/// The thread-stack window: PML4 slot 507, all of it.
pub const STACK_WINDOW_START: u64 = 0xffff_fd80_0000_0000;
pub const STACK_WINDOW_SIZE: u64 = 1 << 39;
const PAGE_SIZE: u64 = 4096;

/// The physical-address bits of a page-table entry (bits 51:12).
pub const ENTRY_ADDRESS_MASK: u64 = 0x000f_ffff_ffff_f000;
/// Start of the upper (kernel) half of the canonical address space.
pub const UPPER_HALF_START: u64 = 0xffff_8000_0000_0000;

/// The kernel's level-4 table and the MMIO bump pointer. The lock
/// serialises every change to the kernel page tables; it is taken with
/// interrupts off, because stacks are unmapped wherever a thread is freed.
struct KernelTables {
    root: PhysAddr,
    next_mmio: u64,
}

static KERNEL_TABLES: Mutex<Option<KernelTables>> = Mutex::new(None);

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
    /// The bootloader already uses a PML4 slot this kernel reserves.
    SlotInUse(u64),
}

impl core::fmt::Display for MapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::WindowFull => write!(f, "the mapping window is full"),
            Self::OutOfMemory => write!(f, "no memory for a page table"),
            Self::SlotInUse(start) => write!(
                f,
                "the bootloader maps something at {start:#x}, where this kernel puts its own mappings"
            ),
        }
    }
}

/// Records the active page table as the kernel's and gives both windows
/// their level-3 table. Runs once on the boot CPU, before any address space
/// copies the kernel half.
pub fn init() -> Result<(), MapError> {
    let root = Cr3::read().0.start_address();
    let mut tables = KERNEL_TABLES.lock();
    let tables = tables.insert(KernelTables {
        root,
        next_mmio: MMIO_WINDOW_START,
    });
    let level_4 = level_4_table(tables.root);
    for start in [MMIO_WINDOW_START, STACK_WINDOW_START] {
        let entry =
            &mut level_4[Page::<Size4KiB>::containing_address(VirtAddr::new(start)).p4_index()];
        if !entry.is_unused() {
            return Err(MapError::SlotInUse(start));
        }
        let frame = KernelFrames.allocate_frame().ok_or(MapError::OutOfMemory)?;
        let table = crate::phys::to_virt(frame.start_address()).as_mut_ptr::<PageTable>();
        // The frame was just allocated for this table and nothing else
        // refers to it; the offset mapping makes it writable at `table`.
        // SAFETY: a fresh, exclusively owned frame, written before use.
        unsafe { table.write(PageTable::new()) };
        entry.set_frame(frame, PageTableFlags::PRESENT | PageTableFlags::WRITABLE);
    }
    Ok(())
}

fn level_4_table(root: PhysAddr) -> &'static mut PageTable {
    let table = crate::phys::to_virt(root).as_mut_ptr::<PageTable>();
    // `root` is the kernel's level-4 table, which the offset mapping makes
    // reachable at `table`; every caller holds `KERNEL_TABLES`, which makes
    // it the only code changing the kernel's page tables (the CPU only sets
    // accessed bits, which the `x86_64` crate's entries tolerate), so the
    // `&mut` is exclusive while it is used.
    // SAFETY: the kernel's level-4 table, exclusively ours under the lock.
    unsafe { &mut *table }
}

/// Runs `f` with a mapper over the kernel's page tables, under the lock
/// and with interrupts off.
fn with_kernel_tables<R>(f: impl FnOnce(&mut OffsetPageTable<'static>, &mut u64) -> R) -> R {
    crate::cpu::without_interrupts(|| {
        let mut guard = KERNEL_TABLES.lock();
        let tables = guard
            .as_mut()
            .expect("paging::init runs before any kernel mapping");
        // The offset is the one all physical memory is mapped at, and the
        // table is the kernel's, exclusively ours under the lock.
        // SAFETY: see `level_4_table`; the physical-memory offset is right.
        let mut mapper = unsafe {
            OffsetPageTable::new(
                level_4_table(tables.root),
                crate::phys::to_virt(PhysAddr::new(0)),
            )
        };
        f(&mut mapper, &mut tables.next_mmio)
    })
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
    let flags = PageTableFlags::PRESENT
        | PageTableFlags::WRITABLE
        | PageTableFlags::NO_CACHE
        | PageTableFlags::WRITE_THROUGH
        | PageTableFlags::NO_EXECUTE;
    with_kernel_tables(|mapper, next| {
        let base = *next;
        if base + pages * PAGE_SIZE > MMIO_WINDOW_START + MMIO_WINDOW_SIZE {
            return Err(MapError::WindowFull);
        }
        for index in 0..pages {
            let page =
                Page::<Size4KiB>::containing_address(VirtAddr::new(base + index * PAGE_SIZE));
            let frame = PhysFrame::containing_address(first_frame + index * PAGE_SIZE);
            // `page` lies in the MMIO window, which nothing else maps, so
            // no existing reference covers it; `frame` is device memory (or
            // other physical memory the caller owns) that may be aliased
            // uncached.
            // SAFETY: the page is unused and the frame may be aliased uncached.
            let flush = unsafe { mapper.map_to(page, frame, flags, &mut KernelFrames) }
                .map_err(|_| MapError::OutOfMemory)?;
            flush.flush();
        }
        *next = base + pages * PAGE_SIZE;
        Ok(VirtAddr::new(base + (phys.as_u64() - first_frame.as_u64())))
    })
}

fn stack_window_page(va: u64) -> Page<Size4KiB> {
    assert!(
        (STACK_WINDOW_START..STACK_WINDOW_START + STACK_WINDOW_SIZE).contains(&va),
        "{va:#x} is outside the stack window"
    );
    Page::containing_address(VirtAddr::new(va))
}

/// Maps the stack-window page at `va` to `frame`: global, writable,
/// non-executable. The page must be unmapped and, if it was mapped before,
/// flushed from every CPU since ([`crate::kernel_stack`] sees to both).
pub(super) fn map_stack_page(va: u64, frame: &StackFrame) -> Result<(), MapError> {
    let flags = PageTableFlags::PRESENT
        | PageTableFlags::WRITABLE
        | PageTableFlags::GLOBAL
        | PageTableFlags::NO_EXECUTE;
    let page = stack_window_page(va);
    with_kernel_tables(|mapper, _| {
        let frame = PhysFrame::containing_address(frame.address());
        // The page is in the stack window and unmapped (the caller owns its
        // slot), so no reference covers it; the frame is a stack frame that
        // only this mapping will use. No CPU can hold a translation of the
        // page (it was flushed after its last unmapping), hence no flush.
        // SAFETY: the page is unused and the frame exclusively the new stack's.
        let flush = unsafe { mapper.map_to(page, frame, flags, &mut KernelFrames) }
            .map_err(|_| MapError::OutOfMemory)?;
        flush.ignore();
        Ok(())
    })
}

/// Removes the stack-window mapping at `va` and returns its frame. Does not
/// flush: other CPUs may still translate `va` until a kernel-range flush,
/// so the frame must not be reused before one.
pub(super) fn unmap_stack_page(va: u64) -> Option<PhysAddr> {
    let page = stack_window_page(va);
    with_kernel_tables(|mapper, _| {
        let (frame, flush) = mapper.unmap(page).ok()?;
        // Deliberately not flushed here; see the function's documentation.
        flush.ignore();
        Some(frame.start_address())
    })
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
        crate::phys::read_bytes(table + u64::from(index) * 8, &mut entry);
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
