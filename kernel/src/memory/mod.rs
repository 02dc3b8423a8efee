//! Memory at boot: the frame allocator ([`hal::frames`]) set up from the
//! boot memory map, the kernel heap with its budget ([`heap`]), and the
//! reference counts of frames mapped more than once ([`shared_frames`]),
//! and the test option that holds freed ones back from reuse
//! ([`quarantine`]).

pub mod heap;
pub mod quarantine;
pub mod shared_frames;

use bootloader_api::{
    BootInfo,
    info::{MemoryRegion, MemoryRegionKind},
};

use hal::frames::{self, FRAME_SIZE};

/// What the kernel found and set up, for the boot banner.
#[derive(Debug)]
pub struct MemorySummary {
    pub regions: usize,
    pub usable_regions: usize,
    pub usable_bytes: u64,
    pub bootloader_bytes: u64,
    pub end_of_ram: u64,
    pub heap_bytes: usize,
    pub free_frames_after_init: usize,
}

/// Why memory could not be set up.
#[derive(Debug)]
pub enum MemoryInitError {
    NoPhysicalMemoryMapping,
    Frames(frames::FrameInitError),
    Heap(heap::HeapInitError),
    FrameCounters(shared_frames::NoRoomForCounters),
}

impl core::fmt::Display for MemoryInitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoPhysicalMemoryMapping => {
                write!(
                    f,
                    "the bootloader did not map physical memory (BootloaderConfig.mappings.physical_memory)"
                )
            }
            Self::Frames(frames::FrameInitError::NoRoomForBitmap { bitmap_bytes }) => {
                write!(
                    f,
                    "no usable memory region can hold the {bitmap_bytes}-byte frame bitmap"
                )
            }
            Self::FrameCounters(shared_frames::NoRoomForCounters { bytes }) => write!(
                f,
                "not enough contiguous free memory for the {} KiB of per-frame reference counts",
                bytes / 1024
            ),
            Self::Heap(heap::HeapInitError { wanted_bytes }) => write!(
                f,
                "not enough contiguous free memory for a {} KiB kernel heap; give the machine more RAM",
                wanted_bytes / 1024
            ),
        }
    }
}

/// Sets up the frame allocator and the heap from the bootloader's memory map.
pub fn init(boot_info: &BootInfo) -> Result<MemorySummary, MemoryInitError> {
    let offset = boot_info
        .physical_memory_offset
        .into_option()
        .ok_or(MemoryInitError::NoPhysicalMemoryMapping)?;
    hal::phys::init(offset);
    let regions: &[MemoryRegion] = &boot_info.memory_regions;
    let free_frames = frames::init(regions).map_err(MemoryInitError::Frames)?;
    let end_of_ram = regions
        .iter()
        .filter(|region| region.kind == MemoryRegionKind::Usable)
        .map(|region| region.end)
        .max()
        .unwrap_or(0);
    shared_frames::init(end_of_ram as usize / FRAME_SIZE)
        .map_err(MemoryInitError::FrameCounters)?;
    let heap_bytes = heap::init(free_frames * FRAME_SIZE).map_err(MemoryInitError::Heap)?;

    let bytes_of = |kind: MemoryRegionKind| -> u64 {
        regions
            .iter()
            .filter(|region| region.kind == kind)
            .map(|region| region.end - region.start)
            .sum()
    };
    Ok(MemorySummary {
        regions: regions.len(),
        usable_regions: regions
            .iter()
            .filter(|region| region.kind == MemoryRegionKind::Usable)
            .count(),
        usable_bytes: bytes_of(MemoryRegionKind::Usable),
        bootloader_bytes: bytes_of(MemoryRegionKind::Bootloader),
        end_of_ram,
        heap_bytes,
        free_frames_after_init: frames::free_count(),
    })
}
