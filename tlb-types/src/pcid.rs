//! The hardware's address-space tag.
//!
//! With CR4.PCIDE set, every TLB entry carries the 12-bit process-context identifier that
//! CR3's low bits held when the entry was cached; INVPCID and INVLPGB name it to flush one
//! address space's entries. Which PCID an address space gets is `mm`'s decision (its ASIDs,
//! PCID = ASID + 1, PCID 0 for the kernel and for CPUs without PCIDs).
//!
//! A type of its own, not a `u16`: `mm` counts in ASIDs and the hardware in PCIDs, one apart,
//! and a `u16` passed where the other was meant would flush the neighbouring address space's
//! entries and nothing else. With two types that mistake does not compile.

use core::fmt;

/// Width of the hardware PCID field.
pub const PCID_BITS: u32 = 12;

/// A PCID: the tag in `CR3[11:0]`, INVPCID's descriptor and INVLPGB's `EDX[27:16]`. Always
/// below `2^PCID_BITS`. The default is PCID 0, what CR3 holds at reset.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pcid(u16);

impl Pcid {
    /// PCID 0: what CR3 holds with PCIDs off, and the kernel's own tag. No user address space
    /// is given it.
    pub const ZERO: Pcid = Pcid(0);

    /// The PCID `value`. Panics if it does not fit in [`PCID_BITS`] bits.
    #[inline]
    pub const fn new(value: u16) -> Pcid {
        assert!((value as u32) < 1 << PCID_BITS, "a PCID has 12 bits");
        Pcid(value)
    }

    /// The number, as CR3, INVPCID's descriptor and INVLPGB's EDX take it.
    #[inline]
    pub const fn get(self) -> u16 {
        self.0
    }
}

impl fmt::Display for Pcid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_bits_and_no_more() {
        assert_eq!(Pcid::new(4095).get(), 4095);
        assert_eq!(Pcid::ZERO.get(), 0);
        assert!(std::panic::catch_unwind(|| Pcid::new(4096)).is_err());
    }
}
