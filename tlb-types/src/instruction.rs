//! One local TLB instruction, as the protocol chose it and the hardware layer executes it.
//!
//! `mm::instructions::select` turns an operation (drop a page, a PCID, everything; load an
//! address space) into the one instruction that does it on this CPU's state (CR4.PCIDE,
//! CR4.PGE, INVPCID); `hal::tlb::execute` runs it. Each variant says what the manuals
//! promise it drops, which is what the host model of `mm` checks the choice against.

use crate::{PageTableRoot, Pcid};

/// One local flush instruction (see the Intel SDM vol. 3, 4.10.4, and the AMD APM vol. 2,
/// 5.5.3 for what each drops).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// INVLPG: the current PCID's entry for `va`, any global entry for it, and the
    /// paging-structure caches of the current PCID.
    Invlpg {
        /// An address in the page.
        va: u64,
    },
    /// INVPCID type 0: the non-global entry for `va` tagged `pcid`.
    InvpcidAddress {
        /// The tag.
        pcid: Pcid,
        /// An address in the page.
        va: u64,
    },
    /// INVPCID type 1: every non-global entry tagged `pcid`.
    InvpcidSingle {
        /// The tag.
        pcid: Pcid,
    },
    /// INVPCID type 2: every entry, global ones included, of every PCID.
    InvpcidAll,
    /// INVPCID type 3: every non-global entry of every PCID.
    InvpcidAllNonGlobal,
    /// MOV to CR3 with `root` and `pcid`; `keep` sets bit 63 (with PCIDE only): the PCID's
    /// entries survive. Without `keep` the new PCID's non-global entries go (without PCIDE:
    /// every non-global entry).
    LoadCr3 {
        /// The page-table root.
        root: PageTableRoot,
        /// CR3 bits 11:0 (0 without PCIDE).
        pcid: Pcid,
        /// Bit 63: keep the PCID's entries.
        keep: bool,
    },
    /// MOV to CR3 of the value it holds, bit 63 clear: as `LoadCr3` of the current root and
    /// PCID without `keep`.
    ReloadCr3,
    /// Two MOVs to CR4 that flip PGE and flip it back: every entry of every PCID goes.
    TogglePge,
}
