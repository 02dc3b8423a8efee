//! In-kernel tests of the bitmap allocator, on private bitmaps.

use x86_64::PhysAddr;

use crate::framework::TestResult;
use crate::{check, check_eq, require_some};
use hal::frames::{self, FRAME_SIZE, FrameAllocator, RESERVED_LOW_MEMORY};

fn address(frame: usize) -> PhysAddr {
    PhysAddr::new((frame * FRAME_SIZE) as u64)
}

pub fn allocates_only_released_frames() -> TestResult {
    let mut bitmap = [0; 2];
    let mut frames = FrameAllocator::new(&mut bitmap, 100);
    frames.release_range(address(10), address(13));
    check_eq!(frames.free_count(), 3);
    for expected in 10..13 {
        check_eq!(frames.allocate(), Some(address(expected)));
    }
    check_eq!(frames.allocate(), None);
    check_eq!(frames.free_count(), 0);
    Ok(())
}

pub fn free_makes_frame_reusable() -> TestResult {
    let mut bitmap = [0; 1];
    let mut frames = FrameAllocator::new(&mut bitmap, 64);
    frames.release_range(address(0), address(2));
    let first = require_some!(frames.allocate(), "first of two free frames");
    let second = require_some!(frames.allocate(), "second of two free frames");
    check!(first != second, "the same frame was handed out twice");
    check_eq!(frames.allocate(), None);
    frames.free(second);
    check_eq!(frames.free_count(), 1);
    check_eq!(frames.allocate(), Some(second));
    Ok(())
}

/// First fit: the lowest free frame goes first, so a workload that takes
/// and gives back frames in turn keeps reusing the same few instead of
/// walking through all of memory.
pub fn reuses_the_lowest_free_frames() -> TestResult {
    let mut bitmap = [0; 2];
    let mut frames = FrameAllocator::new(&mut bitmap, 128);
    frames.release_range(address(0), address(128));
    let taken: [PhysAddr; 8] = core::array::from_fn(|_| frames.allocate().unwrap_or(address(0)));
    check_eq!(taken, core::array::from_fn(address));
    frames.free(taken[6]);
    frames.free(taken[2]);
    check_eq!(frames.allocate(), Some(taken[2]));
    check_eq!(frames.allocate(), Some(taken[6]));
    check_eq!(frames.allocate(), Some(address(8)));
    for round in 0..4 {
        for &frame in &taken {
            frames.free(frame);
        }
        for (index, &frame) in taken.iter().enumerate() {
            check!(
                frames.allocate() == Some(frame),
                "round {round}: frame {index} was not the one given back"
            );
        }
    }
    Ok(())
}

pub fn contiguous_runs_skip_holes() -> TestResult {
    let mut bitmap = [0; 2];
    let mut frames = FrameAllocator::new(&mut bitmap, 128);
    frames.release_range(address(0), address(128));
    frames.reserve_range(address(3), address(4));
    check_eq!(frames.allocate_contiguous(4), Some(address(4)));
    check_eq!(frames.allocate_contiguous(3), Some(address(0)));
    check_eq!(frames.free_count(), 128 - 1 - 4 - 3);
    check_eq!(frames.allocate_contiguous(200), None);
    Ok(())
}

pub fn kernel_allocator_round_trip() -> TestResult {
    let before = frames::free_count();
    let frame = require_some!(frames::allocate(), "the kernel allocator has no free frame");
    check!(
        frame.address().as_u64() >= RESERVED_LOW_MEMORY,
        "allocated {frame:?} below 1 MiB"
    );
    check_eq!(frames::free_count(), before - 1);
    frames::free(frame);
    check_eq!(frames::free_count(), before);
    Ok(())
}
