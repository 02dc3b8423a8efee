//! The address-space calls: `mmap`, `mprotect`, `madvise` (`munmap` and
//! `brk` are one line each in the dispatcher).

use abi::{Errno, MapFlags, Prot};

use super::SyscallResult;
use crate::task::vm::{AddressSpace, Placement, Sharing};

/// `mmap(addr, len, prot, flags, fd, offset)`: anonymous memory, private
/// or shared, anywhere or at `addr`. Returns where. There are no files: a
/// mapping without `MAP_ANONYMOUS` names no file there is. Flags the
/// kernel does not know are ignored, as Linux ignores them, except under
/// `MAP_SHARED_VALIDATE`.
pub(super) fn mmap(
    space: &AddressSpace,
    addr: u64,
    len: u64,
    prot: u64,
    flags: u64,
    offset: u64,
) -> SyscallResult {
    let known = MapFlags::from_bits_truncate(flags);
    let sharing = match (known & MapFlags::SHARED_VALIDATE).bits() {
        0x01 => Sharing::Shared,
        0x02 => Sharing::Private,
        0x03 if known.bits() == flags => Sharing::Shared,
        0x03 => return Err(Errno::OpNotSupp),
        _ => return Err(Errno::Inval),
    };
    if !known.contains(MapFlags::ANONYMOUS) {
        return Err(Errno::BadF);
    }
    if !offset.is_multiple_of(abi::PAGE_SIZE) {
        return Err(Errno::Inval);
    }
    let protection = Prot::from_bits(prot).ok_or(Errno::Inval)?;
    let placement = if known.contains(MapFlags::FIXED) {
        Placement::Fixed
    } else if known.contains(MapFlags::FIXED_NOREPLACE) {
        Placement::FixedNoReplace
    } else {
        Placement::Anywhere
    };
    space.map_anonymous(addr, len, protection, placement, sharing)
}

/// `mprotect(addr, len, prot)`.
pub(super) fn mprotect(space: &AddressSpace, addr: u64, len: u64, prot: u64) -> SyscallResult {
    let protection = Prot::from_bits(prot).ok_or(Errno::Inval)?;
    space.protect(addr, len, protection).map(|()| 0)
}

/// `madvise(addr, len, advice)`: `MADV_DONTNEED` and `MADV_PAGEOUT`.
pub(super) fn madvise(space: &AddressSpace, addr: u64, len: u64, advice: u64) -> SyscallResult {
    match advice {
        abi::advice::DONTNEED => space.discard(addr, len).map(|()| 0),
        abi::advice::PAGEOUT => space.page_out(addr, len).map(|()| 0),
        _ => Err(Errno::Inval),
    }
}
