//! A region (a VMA): what the program asked for over a range of addresses,
//! its protection and, for `MAP_SHARED`, where its pages are; and what a
//! protection means in page-table bits.

use alloc::sync::Arc;

use abi::{PAGE_SIZE, Prot};
use x86_64::structures::paging::PageTableFlags;

use super::{Access, SharedMemory};

/// A mapped region: `[start, end)` with protection `prot`.
#[derive(Clone)]
pub(super) struct Region {
    pub(super) end: u64,
    pub(super) prot: Prot,
    /// `Some` for a `MAP_SHARED` region; private regions are copied
    /// (copy-on-write) by `fork`.
    pub(super) shared: Option<SharedPages>,
}

/// Where a shared region's pages are: `memory`, from page `first_page` on.
#[derive(Clone)]
pub(super) struct SharedPages {
    pub(super) memory: Arc<SharedMemory>,
    pub(super) first_page: u64,
}

impl Region {
    pub(super) fn private(end: u64, prot: Prot) -> Self {
        Self {
            end,
            prot,
            shared: None,
        }
    }

    /// This region cut to end at `at`.
    pub(super) fn head(&self, at: u64) -> Self {
        Self {
            end: at,
            ..self.clone()
        }
    }

    /// This region, which starts at `start`, cut to begin at `at`: a
    /// shared one shows the same pages as before at each address.
    pub(super) fn tail(&self, start: u64, at: u64) -> Self {
        let shared = self.shared.as_ref().map(|pages| SharedPages {
            memory: Arc::clone(&pages.memory),
            first_page: pages.first_page + (at - start) / PAGE_SIZE,
        });
        Self {
            end: self.end,
            prot: self.prot,
            shared,
        }
    }
}

/// Page-table flags for `prot`. x86 cannot express write-only or
/// execute-only pages, so any access right makes the page readable; with no
/// right at all (`PROT_NONE`) the entry keeps its frame but loses the USER
/// bit, so ring 3 faults on it and the contents survive for a later
/// `mprotect`.
pub(super) fn entry_flags(prot: Prot) -> PageTableFlags {
    let mut flags = if prot == Prot::NONE {
        PageTableFlags::empty()
    } else {
        PageTableFlags::USER_ACCESSIBLE
    };
    if prot.contains(Prot::WRITE) {
        flags |= PageTableFlags::WRITABLE;
    }
    if !prot.contains(Prot::EXEC) {
        flags |= PageTableFlags::NO_EXECUTE;
    }
    flags
}

/// Whether a region with `prot` allows `access` (see [`entry_flags`] for why
/// any right implies reading).
pub(super) fn permits(prot: Prot, access: Access) -> bool {
    prot != Prot::NONE
        && (!access.write || prot.contains(Prot::WRITE))
        && (!access.execute || prot.contains(Prot::EXEC))
}
