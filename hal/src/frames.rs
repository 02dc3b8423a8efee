//! The physical frame allocator: one bit per 4 KiB frame.
//!
//! A bitmap is the simplest allocator that can both allocate and *free* single
//! frames (page tables and user pages come and go) and also find runs of
//! contiguous frames (the kernel heap). A set bit means "in use"; everything
//! starts in use and only the bootloader's `Usable` regions are released.
//!
//! Frames below 1 MiB stay reserved: the bootloader never hands them out so
//! that the kernel can place its real-mode AP start-up trampoline there.
//!
//! The allocator never reuses a frame before it is freed, and *when* a frame
//! may be freed is not its business: a frame that was mapped in some address
//! space may only be freed once the TLB flush covering its last mapping has
//! completed on every CPU. That rule lives with the shootdown code.

mod cpu_cache;

use bootloader_api::info::{MemoryRegion, MemoryRegionKind};
use cpu_cache::{BATCH, CACHES};
use spin::Mutex;
use x86_64::PhysAddr;

/// The size of a physical frame (and a small page).
pub const FRAME_SIZE: usize = 4096;

/// Physical memory below this address is never handed out.
pub const RESERVED_LOW_MEMORY: u64 = 1 << 20;

const BITS_PER_WORD: usize = u64::BITS as usize;

/// Frames taken out of the allocator for good: they will never be freed, so
/// whoever holds this may own their memory forever (see
/// [`crate::phys::permanent_bytes`]). Only this module creates them.
#[derive(Debug)]
pub struct PermanentFrames {
    start: PhysAddr,
    count: usize,
}

impl PermanentFrames {
    pub fn start(&self) -> PhysAddr {
        self.start
    }

    pub fn count(&self) -> usize {
        self.count
    }
}

/// A frame handed out by the kernel's allocator, for page tables and user
/// pages. Only this module and [`crate::page_table`] create these, and only for such frames: that
/// is what lets [`crate::phys`] offer safe access to their contents
/// (no Rust object ever lives in one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame(PhysAddr);

impl Frame {
    /// The frame whose address a page-table entry holds. Only for entries
    /// the memory module itself wrote with frames from [`allocate`].
    pub(crate) fn from_entry(address: PhysAddr) -> Self {
        Self(address)
    }

    pub fn address(&self) -> PhysAddr {
        self.0
    }
}

/// A frame backing a kernel stack (see [`crate::kernel_stack`]). Rust
/// objects live in it, so unlike [`Frame`] it gives no access to its
/// contents through [`crate::phys`]: only its kernel mapping is used.
#[derive(Debug, PartialEq, Eq)]
pub struct StackFrame(PhysAddr);

impl StackFrame {
    pub fn address(&self) -> PhysAddr {
        self.0
    }
}

/// A bitmap frame allocator over frames `0..frame_count`.
pub struct FrameAllocator<'bitmap> {
    /// Bit `i` set: frame `i` is in use (or not RAM).
    bitmap: &'bitmap mut [u64],
    frame_count: usize,
    free_count: usize,
    /// Every frame below this one is in use, so a search for one frame
    /// starts here and finds the lowest free frame (first fit). Frees move it
    /// down. Reusing the lowest frames keeps the frames in circulation few
    /// and cache-warm: `tlb_flush2` takes 256 frames from the bitmap and
    /// gives them back for every megabyte it maps, and a search that went on
    /// from where the last one stopped (next fit, as this allocator did
    /// before) walked it through all of memory, 176 MB/s of frames never
    /// touched before. Under an emulator each of those costs the host a page
    /// fault; a guest of 1 GiB ran the loop 40% slower than one of 512 MiB,
    /// whose memory was all touched by then.
    lowest_free: usize,
}

impl<'bitmap> FrameAllocator<'bitmap> {
    /// An allocator over `frame_count` frames, all of them in use.
    ///
    /// # Panics
    /// If `bitmap` has fewer than `frame_count` bits.
    pub fn new(bitmap: &'bitmap mut [u64], frame_count: usize) -> Self {
        assert!(
            bitmap.len() * BITS_PER_WORD >= frame_count,
            "frame bitmap too small"
        );
        bitmap.fill(u64::MAX);
        Self {
            bitmap,
            frame_count,
            free_count: 0,
            lowest_free: 0,
        }
    }

    /// Marks the frames wholly inside `[start, end)` free.
    pub fn release_range(&mut self, start: PhysAddr, end: PhysAddr) {
        let first = start.align_up(FRAME_SIZE as u64).as_u64() as usize / FRAME_SIZE;
        let last = (end.align_down(FRAME_SIZE as u64).as_u64() as usize / FRAME_SIZE)
            .min(self.frame_count);
        for frame in first..last {
            if self.is_used(frame) {
                self.set_used(frame, false);
                self.free_count += 1;
            }
        }
        self.lowest_free = self.lowest_free.min(first);
    }

    /// Marks the frames overlapping `[start, end)` used.
    pub fn reserve_range(&mut self, start: PhysAddr, end: PhysAddr) {
        let first = start.align_down(FRAME_SIZE as u64).as_u64() as usize / FRAME_SIZE;
        let last =
            (end.align_up(FRAME_SIZE as u64).as_u64() as usize / FRAME_SIZE).min(self.frame_count);
        for frame in first..last {
            if !self.is_used(frame) {
                self.set_used(frame, true);
                self.free_count -= 1;
            }
        }
    }

    /// Allocates one frame, or `None` when memory is exhausted.
    pub fn allocate(&mut self) -> Option<PhysAddr> {
        if self.free_count == 0 {
            return None;
        }
        let start_word = self.lowest_free / BITS_PER_WORD;
        for word_index in start_word..self.bitmap.len() {
            let word = self.bitmap[word_index];
            if word == u64::MAX {
                continue;
            }
            let frame = word_index * BITS_PER_WORD + (!word).trailing_zeros() as usize;
            if frame >= self.frame_count {
                continue;
            }
            self.set_used(frame, true);
            self.free_count -= 1;
            self.lowest_free = frame + 1;
            return Some(frame_address(frame));
        }
        None
    }

    /// Allocates `count` physically contiguous frames (first fit), or `None`.
    pub fn allocate_contiguous(&mut self, count: usize) -> Option<PhysAddr> {
        if count == 0 || count > self.free_count {
            return None;
        }
        let mut run_start = 0;
        let mut run_length = 0;
        for frame in 0..self.frame_count {
            if self.is_used(frame) {
                run_length = 0;
                continue;
            }
            if run_length == 0 {
                run_start = frame;
            }
            run_length += 1;
            if run_length == count {
                for taken in run_start..run_start + count {
                    self.set_used(taken, true);
                }
                self.free_count -= count;
                return Some(frame_address(run_start));
            }
        }
        None
    }

    /// Returns a frame to the allocator.
    ///
    /// # Panics
    /// If `frame` is not frame-aligned, out of range or already free: each is
    /// a kernel bug that would otherwise hand one frame to two owners.
    pub fn free(&mut self, frame: PhysAddr) {
        assert!(
            frame.is_aligned(FRAME_SIZE as u64),
            "freeing unaligned frame {frame:?}"
        );
        let index = frame.as_u64() as usize / FRAME_SIZE;
        assert!(
            index < self.frame_count,
            "freeing frame {frame:?} beyond the end of memory"
        );
        assert!(self.is_used(index), "double free of frame {frame:?}");
        self.set_used(index, false);
        self.free_count += 1;
        self.lowest_free = self.lowest_free.min(index);
    }

    /// How many frames are free.
    pub fn free_count(&self) -> usize {
        self.free_count
    }

    fn is_used(&self, frame: usize) -> bool {
        self.bitmap[frame / BITS_PER_WORD] & (1 << (frame % BITS_PER_WORD)) != 0
    }

    fn set_used(&mut self, frame: usize, used: bool) {
        let bit = 1 << (frame % BITS_PER_WORD);
        if used {
            self.bitmap[frame / BITS_PER_WORD] |= bit;
        } else {
            self.bitmap[frame / BITS_PER_WORD] &= !bit;
        }
    }
}

fn frame_address(frame: usize) -> PhysAddr {
    PhysAddr::new((frame * FRAME_SIZE) as u64)
}

/// Whether any byte of the physical range `start..end` lies in a `Usable`
/// region: memory the frame allocator may hand out, and so no place for
/// data the kernel keeps reading (the ramdisk, its own ELF file).
pub fn overlaps_usable(regions: &[MemoryRegion], start: u64, end: u64) -> bool {
    regions.iter().any(|region| {
        region.kind == MemoryRegionKind::Usable && region.start < end && start < region.end
    })
}

/// The kernel's frame allocator, `None` until [`init`] ran.
static FRAMES: Mutex<Option<FrameAllocator<'static>>> = Mutex::new(None);

/// Why the frame allocator could not be set up.
#[derive(Debug)]
pub enum FrameInitError {
    /// No usable region can hold the bitmap itself.
    NoRoomForBitmap { bitmap_bytes: usize },
}

/// Builds the kernel's frame allocator from the boot memory map. Returns the
/// number of free frames.
pub fn init(regions: &[MemoryRegion]) -> Result<usize, FrameInitError> {
    let usable = || {
        regions
            .iter()
            .filter(|region| region.kind == MemoryRegionKind::Usable)
    };
    let end_of_ram = usable().map(|region| region.end).max().unwrap_or(0);
    let frame_count = end_of_ram as usize / FRAME_SIZE;
    let bitmap_bytes = frame_count.div_ceil(BITS_PER_WORD) * size_of::<u64>();
    let bitmap_frames = bitmap_bytes.div_ceil(FRAME_SIZE);

    // The bitmap goes at the start of the first usable region above 1 MiB
    // that can hold it.
    let bitmap_span = (bitmap_frames * FRAME_SIZE) as u64;
    let home = usable()
        .find_map(|region| {
            let start =
                PhysAddr::new(region.start.max(RESERVED_LOW_MEMORY)).align_up(FRAME_SIZE as u64);
            (start.as_u64() + bitmap_span <= region.end).then_some(start)
        })
        .ok_or(FrameInitError::NoRoomForBitmap { bitmap_bytes })?;
    let bitmap_storage = PermanentFrames {
        start: home,
        count: bitmap_frames,
    };
    let bitmap = crate::phys::permanent_words(bitmap_storage);

    let mut allocator = FrameAllocator::new(bitmap, frame_count);
    for region in usable() {
        allocator.release_range(PhysAddr::new(region.start), PhysAddr::new(region.end));
    }
    allocator.reserve_range(PhysAddr::new(0), PhysAddr::new(RESERVED_LOW_MEMORY));
    allocator.reserve_range(home, home + bitmap_span);
    let free = allocator.free_count();
    *FRAMES.lock() = Some(allocator);
    Ok(free)
}

fn with_allocator<R>(f: impl FnOnce(&mut FrameAllocator<'static>) -> R) -> R {
    crate::cpu::without_interrupts(|| {
        f(FRAMES
            .lock()
            .as_mut()
            .expect("frames::init runs before any frame allocation"))
    })
}

/// This CPU's index, once its per-CPU block is installed (frames taken
/// before that come from the bitmap directly).
fn this_cpu() -> Option<usize> {
    crate::percpu::current_if_installed().map(|cpu| cpu.index)
}

/// Allocates one frame from the kernel's allocator: from this CPU's cache,
/// refilled from the bitmap a batch at a time (see `frames/cpu_cache.rs`).
pub fn allocate() -> Option<Frame> {
    crate::cpu::without_interrupts(|| {
        let Some(cpu) = this_cpu() else {
            return with_allocator(FrameAllocator::allocate);
        };
        let mut cache = CACHES[cpu].lock();
        if let Some(frame) = cache.pop() {
            return Some(frame);
        }
        with_allocator(|allocator| {
            for frame in core::iter::from_fn(|| allocator.allocate()).take(BATCH) {
                // The cache is empty, and a batch is half its capacity.
                let _ = cache.push(frame);
            }
        });
        let frame = cache.pop();
        drop(cache);
        frame.or_else(|| take_from_other_caches(cpu))
    })
    .map(Frame)
}

/// The bitmap is empty: a frame from another CPU's cache, if any has one.
fn take_from_other_caches(me: usize) -> Option<PhysAddr> {
    CACHES
        .iter()
        .enumerate()
        .filter(|&(cpu, _)| cpu != me)
        .find_map(|(_, cache)| cache.lock().pop())
}

/// Returns one frame to the kernel's allocator: to this CPU's cache, which
/// gives a batch back to the bitmap when it is full.
///
/// # Panics
/// On a double free that the cache or the bitmap sees (see
/// [`FrameAllocator::free`]).
pub fn free(frame: Frame) {
    crate::cpu::without_interrupts(|| {
        let Some(cpu) = this_cpu() else {
            return with_allocator(|allocator| allocator.free(frame.0));
        };
        let mut cache = CACHES[cpu].lock();
        assert!(
            !cache.contains(frame.0),
            "double free of frame {:?}",
            frame.0
        );
        if let Err(frame) = cache.push(frame.0) {
            with_allocator(|allocator| {
                allocator.free(frame);
                for _ in 0..BATCH {
                    allocator.free(cache.pop().expect("a full cache"));
                }
            });
        }
    });
}

/// Allocates one frame to back a kernel stack page.
pub fn allocate_stack_frame() -> Option<StackFrame> {
    with_allocator(FrameAllocator::allocate).map(StackFrame)
}

/// Returns a kernel stack frame, once no CPU can reach it any more.
pub fn free_stack_frame(frame: StackFrame) {
    with_allocator(|allocator| allocator.free(frame.0));
}

/// Takes `count` contiguous frames out of the allocator for good.
pub fn allocate_permanent(count: usize) -> Option<PermanentFrames> {
    with_allocator(|allocator| allocator.allocate_contiguous(count))
        .map(|start| PermanentFrames { start, count })
}

/// How many frames are free right now (the CPUs' caches included).
pub fn free_count() -> usize {
    let cached: usize = CACHES
        .iter()
        .map(|cache| crate::cpu::without_interrupts(|| cache.lock().len()))
        .sum();
    with_allocator(|allocator| allocator.free_count()) + cached
}
