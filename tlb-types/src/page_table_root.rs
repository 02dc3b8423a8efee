//! The page-table root: the physical address of a top-level page table, what CR3 holds
//! besides its PCID and flag bits.
//!
//! `hal` allocates page tables and loads CR3; `mm` keeps each address space's root so that
//! a switch can name it in the [`crate::Instruction::LoadCr3`] it chooses. A plain `u64`
//! would let any number pass for a root (and did: the kernel wrapped `mm`'s `u64` back into
//! a physical address in five places); this type says what the number is and that it is
//! page-aligned, which the CR3 format requires (bits 11:0 are the PCID).

use core::fmt;

/// The physical address of a 4 KiB-aligned top-level page table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PageTableRoot(u64);

impl PageTableRoot {
    /// The root at physical address `address`. Panics unless it is 4 KiB-aligned: a root
    /// comes from a page-table frame, so anything else is a bug where it was made.
    #[inline]
    pub const fn new(address: u64) -> Self {
        assert!(
            address.is_multiple_of(4096),
            "a page-table root is 4 KiB-aligned"
        );
        Self(address)
    }

    /// The physical address.
    #[inline]
    pub const fn address(self) -> u64 {
        self.0
    }
}

impl fmt::Display for PageTableRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::PageTableRoot;

    #[test]
    fn a_root_keeps_its_address() {
        assert_eq!(PageTableRoot::new(0x1234_5000).address(), 0x1234_5000);
        assert_eq!(std::format!("{}", PageTableRoot::new(0xa000)), "0xa000");
    }

    #[test]
    #[should_panic(expected = "4 KiB-aligned")]
    fn an_unaligned_root_is_refused() {
        let _ = PageTableRoot::new(0x1234);
    }
}
