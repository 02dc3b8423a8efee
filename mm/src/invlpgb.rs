//! Which INVLPGB/TLBSYNC operands a flush uses, as pure functions (AMD APM vol. 3; reference §2.7, §3.1).
//!
//! INVLPGB (`0F 01 FE`) takes three registers, whose bits [`tlb_types::invlpgb`] lists;
//! this module decides which values each flush gives them.
//!
//! ASID-valid is **always** set with ASID 0: without it the invalidation would also hit
//! every guest's entries. FINAL_ONLY is never set, so cached page-walk entries are always
//! dropped too (freed page tables must not stay reachable). TLBSYNC (`0F 01 FF`) has no
//! operands and waits only for the INVLPGBs of the CPU that executes it.
//!
//! `ECX[15:0]` may not exceed CPUID `Fn8000_0008_EDX[15:0]`; [`InvlpgbLimits`] stores that
//! value plus one (pages per instruction) and is **1** before detection (Linux once started
//! at 0 and looped forever). Ranges are split by [`range_chunks`], which never lets one instruction
//! cover the non-canonical hole.

use tlb_types::{
    InvlpgbOperands, Pcid,
    invlpgb::{
        ECX_RESERVED, ECX_STRIDE_2M, FLAG_ASID, FLAG_INCLUDE_GLOBAL, FLAG_PCID, FLAG_VA,
        RAX_RESERVED,
    },
};

use crate::hardware::BroadcastOp;

/// One past the last canonical lower-half address (48-bit paging).
pub const LOWER_HALF_END: u64 = 0x0000_8000_0000_0000;
/// First canonical higher-half address.
pub const HIGHER_HALF_START: u64 = 0xffff_8000_0000_0000;

/// Builds the operands. `pages` is the total number of pages (>= 1), `stride_2m` selects
/// 2 MiB strides. ASID-valid is always added, with ASID 0.
pub fn encode(addr: u64, flags: u64, pages: u32, stride_2m: bool, pcid: Pcid) -> InvlpgbOperands {
    assert_eq!(
        addr & 0xfff,
        0,
        "INVLPGB address {addr:#x} not page aligned"
    );
    assert!(
        (1..=0x1_0000).contains(&pages),
        "INVLPGB page count {pages} out of range"
    );
    assert_eq!(flags & !0x3f, 0, "unknown INVLPGB flags {flags:#x}");
    InvlpgbOperands {
        rax: addr | flags | FLAG_ASID,
        ecx: (u32::from(stride_2m) << 31) | (pages - 1),
        edx: u32::from(pcid.get()) << 16,
    }
}

/// `pages` user pages of `pcid` from `addr` (non-global entries only).
pub fn user_range(pcid: Pcid, addr: u64, pages: u32, stride_2m: bool) -> InvlpgbOperands {
    encode(addr, FLAG_PCID | FLAG_VA, pages, stride_2m, pcid)
}

/// Every non-global entry of `pcid`.
pub fn single_pcid(pcid: Pcid) -> InvlpgbOperands {
    encode(0, FLAG_PCID, 1, false, pcid)
}

/// `pages` kernel pages from `addr`, global entries included, every PCID. The VA flag is
/// set (Linux once forgot it, turning every kernel range flush into a flush of everything).
pub fn kernel_range(addr: u64, pages: u32) -> InvlpgbOperands {
    encode(
        addr,
        FLAG_VA | FLAG_INCLUDE_GLOBAL,
        pages,
        false,
        Pcid::ZERO,
    )
}

/// Everything, global entries included.
pub fn all_including_global() -> InvlpgbOperands {
    encode(0, FLAG_INCLUDE_GLOBAL, 1, false, Pcid::ZERO)
}

/// Every non-global entry of every PCID (rollovers and reclaim batches).
pub fn all_nonglobals() -> InvlpgbOperands {
    encode(0, 0, 1, false, Pcid::ZERO)
}

/// The CPU's INVLPGB limit: pages one instruction may cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvlpgbLimits {
    max_pages: u32,
}

impl Default for InvlpgbLimits {
    /// One page per instruction: always legal, even before CPUID was read.
    fn default() -> Self {
        Self { max_pages: 1 }
    }
}

impl InvlpgbLimits {
    /// From CPUID `Fn8000_0008_EDX`: bits 15:0 are the maximum *extra* pages.
    pub fn from_cpuid_edx(edx: u32) -> Self {
        Self {
            max_pages: (edx & 0xffff) + 1,
        }
    }

    /// Pages one instruction may cover (>= 1).
    pub fn max_pages(&self) -> u32 {
        self.max_pages
    }
}

/// One INVLPGB's worth of a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// First address.
    pub addr: u64,
    /// Pages (>= 1, <= the limit).
    pub pages: u32,
    /// Whether the pages are 2 MiB.
    pub stride_2m: bool,
}

/// Splits `start..end` (units of `1 << stride_shift` bytes) into INVLPGB chunks.
///
/// 4 KiB and 2 MiB strides map to INVLPGB's two strides; any larger stride (1 GiB pages) is
/// one 4 KiB-stride single-page invalidation at the start of each unit, which drops the whole
/// 1 GiB entry. No chunk contains a non-canonical address; a range that overlaps the hole
/// continues at [`HIGHER_HALF_START`].
pub fn range_chunks(start: u64, end: u64, stride_shift: u8, limits: InvlpgbLimits) -> RangeChunks {
    let (unit_shift, stride_2m, max) = match stride_shift {
        12 => (12, false, limits.max_pages),
        21 => (21, true, limits.max_pages),
        s if s > 21 => (s, false, 1),
        s => panic!("unsupported INVLPGB stride shift {s}"),
    };
    RangeChunks {
        addr: start,
        end,
        unit_shift,
        stride_2m,
        max,
    }
}

/// Iterator returned by [`range_chunks`].
pub struct RangeChunks {
    addr: u64,
    end: u64,
    unit_shift: u8,
    stride_2m: bool,
    max: u32,
}

impl Iterator for RangeChunks {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        if (LOWER_HALF_END..HIGHER_HALF_START).contains(&self.addr) {
            self.addr = HIGHER_HALF_START;
        }
        if self.addr >= self.end {
            return None;
        }
        let limit = if self.addr < LOWER_HALF_END {
            self.end.min(LOWER_HALF_END)
        } else {
            self.end
        };
        let units = (limit - self.addr).div_ceil(1 << self.unit_shift);
        let pages = units.min(u64::from(self.max)) as u32;
        let chunk = Chunk {
            addr: self.addr,
            pages,
            stride_2m: self.stride_2m,
        };
        self.addr = self
            .addr
            .saturating_add(u64::from(pages) << self.unit_shift);
        Some(chunk)
    }
}

/// Calls `issue` with each INVLPGB that carries out the broadcast `op` on a
/// CPU that accepts `limits`: ranges are split into chunks the CPU accepts
/// and that never cross the non-canonical hole. Which instructions carry
/// out an operation is a decision, so it is made here, where the host tests
/// check it; the kernel only executes what `issue` receives.
pub fn sequence(op: &BroadcastOp, limits: InvlpgbLimits, mut issue: impl FnMut(InvlpgbOperands)) {
    match *op {
        BroadcastOp::PcidRange {
            pcid,
            start,
            end,
            stride_shift,
        } => {
            for chunk in range_chunks(start, end, stride_shift, limits) {
                issue(user_range(pcid, chunk.addr, chunk.pages, chunk.stride_2m));
            }
        }
        BroadcastOp::Pcid(pcid) => issue(single_pcid(pcid)),
        BroadcastOp::AllNonGlobal => issue(all_nonglobals()),
        BroadcastOp::KernelRange { start, end } => {
            for chunk in range_chunks(start, end, crate::PAGE_SHIFT, limits) {
                issue(kernel_range(chunk.addr, chunk.pages));
            }
        }
        BroadcastOp::AllIncludingGlobal => issue(all_including_global()),
    }
}

/// Why a CPU with `limits` (and PCIDs on or off) refuses `operands` with
/// #GP, by the AMD manual's rules: the reason a kernel's fault report
/// gives. `None`: the operands are legal.
pub fn refusal(
    operands: &InvlpgbOperands,
    limits: InvlpgbLimits,
    pcids_enabled: bool,
) -> Option<&'static str> {
    let extra = operands.ecx & 0xffff;
    if extra >= limits.max_pages {
        Some("the page count exceeds the CPU's limit (CPUID Fn8000_0008_EDX[15:0])")
    } else if operands.rax & FLAG_PCID != 0 && operands.edx >> 16 != 0 && !pcids_enabled {
        Some("it names a PCID while CR4.PCIDE is clear")
    } else if operands.rax & RAX_RESERVED != 0 || operands.ecx & ECX_RESERVED != 0 {
        Some("reserved bits are set")
    } else if operands.rax & FLAG_VA != 0 && !range_is_canonical(operands) {
        Some("the range leaves the canonical address space")
    } else {
        None
    }
}

fn range_is_canonical(operands: &InvlpgbOperands) -> bool {
    let canonical = |addr: u64| !(LOWER_HALF_END..HIGHER_HALF_START).contains(&addr);
    let first = operands.rax & !0xfff;
    let stride: u64 = if operands.ecx & ECX_STRIDE_2M != 0 {
        1 << 21
    } else {
        1 << 12
    };
    let last = u64::from(operands.ecx & 0xffff)
        .checked_mul(stride)
        .and_then(|span| first.checked_add(span));
    canonical(first)
        && last.is_some_and(canonical)
        && (first < LOWER_HALF_END) == last.is_some_and(|l| l < LOWER_HALF_END)
}

#[cfg(test)]
mod tests;
