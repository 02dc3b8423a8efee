//! The hardware's address-space tag.
//!
//! With CR4.PCIDE set, every TLB entry carries the 12-bit process-context identifier that
//! CR3's low bits held when the entry was cached; INVPCID and INVLPGB name it to flush one
//! address space's entries. Which PCID an address space gets is `mm`'s decision (its ASIDs,
//! PCID = ASID + 1, PCID 0 for the kernel and for CPUs without PCIDs).

/// A PCID: the tag in `CR3[11:0]`, INVPCID's descriptor and INVLPGB's `EDX[27:16]`.
pub type Pcid = u16;

/// Width of the hardware PCID field.
pub const PCID_BITS: u32 = 12;
