//! In-kernel tests of threads, the scheduler and address spaces that need
//! no user program.

use alloc::vec::Vec;

use abi::{Errno, PAGE_SIZE, Prot};

use kernel::task::{
    swap,
    vm::{Access, AddressSpace, FaultError, Placement, Sharing},
};
use crate::{check_eq, framework::TestResult, require_ok};
use kernel::tlb;

fn new_space() -> Result<AddressSpace, crate::framework::TestFailure> {
    let root = tlb::system().kernel_address_space().root();
    Ok(require_ok!(
        AddressSpace::new(root).map_err(|_| "out of frames")
    ))
}

pub fn demand_zero_copy_and_discard() -> TestResult {
    let space = new_space()?;
    let free_frames = hal::frames::free_count();
    let base = require_ok!(
        space
            .map_anonymous(0, 3 * PAGE_SIZE, Prot::READ | Prot::WRITE, Placement::Anywhere, Sharing::Private)
            .map_err(|e| alloc::format!("{e:?}"))
    );
    check_eq!(
        space.copy_in(base, 16),
        Ok(alloc::vec![0u8; 16]),
        "fresh anonymous memory reads as zero"
    );
    let message = b"crosses a page boundary";
    let at = base + PAGE_SIZE - 5;
    check_eq!(space.copy_out(at, message), Ok(()));
    check_eq!(space.copy_in(at, message.len()), Ok(message.to_vec()));
    check_eq!(space.discard(base, 2 * PAGE_SIZE), Ok(()));
    check_eq!(
        space.copy_in(at, message.len()),
        Ok(alloc::vec![0u8; message.len()]),
        "after DONTNEED"
    );
    check_eq!(space.unmap(base, 3 * PAGE_SIZE), Ok(()));
    check_eq!(space.copy_in(base, 1), Err(Errno::Fault), "after munmap");
    check_eq!(
        hal::frames::free_count(),
        free_frames,
        "pages and page-table pages freed by munmap"
    );
    space.tear_down();
    Ok(())
}

pub fn faults_respect_protection() -> TestResult {
    let space = new_space()?;
    let read = Access {
        write: false,
        execute: false,
    };
    let write = Access {
        write: true,
        execute: false,
    };
    let execute = Access {
        write: false,
        execute: true,
    };
    let base = require_ok!(
        space
            .map_anonymous(0, PAGE_SIZE, Prot::READ, Placement::Anywhere, Sharing::Private)
            .map_err(|e| alloc::format!("{e:?}"))
    );
    check_eq!(space.handle_fault(base, read), Ok(()));
    check_eq!(space.handle_fault(base, write), Err(FaultError::Protection));
    check_eq!(
        space.handle_fault(base, execute),
        Err(FaultError::Protection)
    );
    check_eq!(
        space.handle_fault(base + PAGE_SIZE, read),
        Err(FaultError::Unmapped)
    );
    check_eq!(
        space.handle_fault(0xffff_8000_0000_0000, read),
        Err(FaultError::Unmapped),
        "kernel address"
    );
    check_eq!(
        space.protect(base, PAGE_SIZE, Prot::READ | Prot::WRITE),
        Ok(())
    );
    check_eq!(space.handle_fault(base, write), Ok(()));
    check_eq!(space.protect(base, PAGE_SIZE, Prot::NONE), Ok(()));
    check_eq!(
        space.handle_fault(base, read),
        Err(FaultError::Protection),
        "PROT_NONE"
    );
    space.tear_down();
    Ok(())
}

pub fn rejects_bad_ranges_and_flags() -> TestResult {
    let space = new_space()?;
    let rw = Prot::READ | Prot::WRITE;
    check_eq!(
        space.map_anonymous(0, 0, rw, Placement::Anywhere, Sharing::Private),
        Err(Errno::Inval),
        "zero length"
    );
    check_eq!(
        space.map_anonymous(0, u64::MAX, rw, Placement::Anywhere, Sharing::Private),
        Err(Errno::Inval),
        "overflowing length"
    );
    // Unknown protection bits cannot get this far: the system call refuses
    // them when it decodes `Prot` (`syscall_errors`: `mmap/unknown-prot`).
    check_eq!(
        space.map_anonymous(0x1234, PAGE_SIZE, rw, Placement::Fixed, Sharing::Private),
        Err(Errno::Inval),
        "misaligned fixed address"
    );
    check_eq!(
        space.map_anonymous(0xffff_8000_0000_0000, PAGE_SIZE, rw, Placement::Fixed, Sharing::Private),
        Err(Errno::Inval),
        "kernel address"
    );
    check_eq!(
        space.unmap(0x1001, PAGE_SIZE),
        Err(Errno::Inval),
        "misaligned munmap"
    );
    check_eq!(
        space.unmap(abi::USER_END - PAGE_SIZE, 2 * PAGE_SIZE),
        Err(Errno::Inval),
        "munmap past user space"
    );
    check_eq!(
        space.protect(0x7000_0000, PAGE_SIZE, Prot::READ),
        Err(Errno::NoMem),
        "mprotect of a hole"
    );
    check_eq!(
        space.copy_in(u64::MAX - 4, 16),
        Err(Errno::Fault),
        "overflowing pointer"
    );
    space.tear_down();
    Ok(())
}

pub fn fixed_mapping_replaces_atomically() -> TestResult {
    let space = new_space()?;
    let rw = Prot::READ | Prot::WRITE;
    let base = require_ok!(
        space
            .map_anonymous(0, 2 * PAGE_SIZE, rw, Placement::Anywhere, Sharing::Private)
            .map_err(|e| alloc::format!("{e:?}"))
    );
    check_eq!(space.copy_out(base, &[7; 16]), Ok(()));
    check_eq!(
        space.map_anonymous(base, PAGE_SIZE, Prot::READ, Placement::Fixed, Sharing::Private),
        Ok(base)
    );
    check_eq!(
        space.copy_in(base, 16),
        Ok(alloc::vec![0u8; 16]),
        "the replacement is a fresh zero page"
    );
    check_eq!(
        space.copy_out(base, &[1]),
        Err(Errno::Fault),
        "the replacement has the new protection"
    );
    check_eq!(
        space.copy_out(base + PAGE_SIZE, &[1]),
        Ok(()),
        "the rest of the old region stays"
    );
    space.tear_down();
    Ok(())
}

pub fn page_out_and_back() -> TestResult {
    let space = new_space()?;
    let pages = 4;
    let base = require_ok!(
        space
            .map_anonymous(0, pages * PAGE_SIZE, Prot::READ | Prot::WRITE, Placement::Anywhere, Sharing::Private)
            .map_err(|e| alloc::format!("{e:?}"))
    );
    let pattern: Vec<u8> = (0..pages * PAGE_SIZE).map(|i| (i % 251) as u8).collect();
    check_eq!(space.copy_out(base, &pattern), Ok(()));
    let slots_before = swap::used();
    check_eq!(space.page_out(base, pages * PAGE_SIZE), Ok(()));
    check_eq!(
        swap::used(),
        slots_before + pages as usize,
        "slots after PAGEOUT"
    );
    check_eq!(
        space.copy_in(base, pattern.len()),
        Ok(pattern),
        "contents after swapping back in"
    );
    check_eq!(
        swap::used(),
        slots_before,
        "slots after every page came back"
    );
    check_eq!(space.page_out(base, 2 * PAGE_SIZE), Ok(()));
    check_eq!(space.unmap(base, pages * PAGE_SIZE), Ok(()));
    check_eq!(
        swap::used(),
        slots_before,
        "munmap frees the slots of swapped pages"
    );
    check_eq!(
        space.page_out(base, PAGE_SIZE),
        Err(Errno::NoMem),
        "PAGEOUT of a hole"
    );
    check_eq!(
        space.discard(base, PAGE_SIZE),
        Err(Errno::NoMem),
        "DONTNEED of a hole"
    );
    space.tear_down();
    Ok(())
}

/// At `abi::MAX_REGIONS` regions, calls that would add one fail with
/// `NoMem` and change nothing; calls that do not add one still work.
pub fn region_limit_refuses_only_growth() -> TestResult {
    let space = new_space()?;
    let rw = Prot::READ | Prot::WRITE;
    let wide = require_ok!(
        space
            .map_anonymous(0, 3 * PAGE_SIZE, rw, Placement::Anywhere, Sharing::Private)
            .map_err(|e| alloc::format!("{e:?}"))
    );
    let mut last = 0;
    for _ in 1..abi::MAX_REGIONS {
        last = require_ok!(
            space
                .map_anonymous(0, PAGE_SIZE, rw, Placement::Anywhere, Sharing::Private)
                .map_err(|e| alloc::format!("{e:?}"))
        );
    }
    check_eq!(
        space.map_anonymous(0, PAGE_SIZE, rw, Placement::Anywhere, Sharing::Private),
        Err(Errno::NoMem),
        "one region more than the limit"
    );
    check_eq!(
        space.unmap(wide + PAGE_SIZE, PAGE_SIZE),
        Err(Errno::NoMem),
        "munmap of a middle page needs one more region"
    );
    check_eq!(
        space.protect(wide, PAGE_SIZE, Prot::READ),
        Err(Errno::NoMem),
        "mprotect of part of a region needs one more region"
    );
    check_eq!(
        space.copy_out(wide + PAGE_SIZE, &[1]),
        Ok(()),
        "the refused calls changed nothing"
    );
    check_eq!(
        space.map_anonymous(last, PAGE_SIZE, Prot::READ, Placement::Fixed, Sharing::Private),
        Ok(last),
        "a fixed mapping over a whole region"
    );
    check_eq!(
        space.unmap(last, PAGE_SIZE),
        Ok(()),
        "munmap of a whole region"
    );
    check_eq!(
        space.unmap(wide + PAGE_SIZE, PAGE_SIZE),
        Ok(()),
        "with room again, the middle page goes"
    );
    space.tear_down();
    Ok(())
}
