//! # `tlb-types`: the words the hardware layer and the TLB protocol share
//!
//! `mm` decides (whom to flush, with which instruction, with which operands) and `hal`
//! executes; neither may know the other, so that every decision runs unchanged on the host,
//! in the exact TLB model and under loom. What they must both name lives here, once:
//!
//! | module | what | who makes it | who consumes it |
//! |---|---|---|---|
//! | [`cpu_set`] | [`CpuId`], [`CpuSet`], [`MAX_CPUS`] | `mm` (flush targets), `hal` (the online CPUs) | `hal::ipi::call_on`, every TLB decision |
//! | [`pcid`] | [`Pcid`], [`PCID_BITS`] | `mm` (PCID = ASID + 1) | CR3 loads, INVPCID, INVLPGB |
//! | [`instruction`] | [`Instruction`], a local flush | `mm::instructions::select` | `hal::tlb::execute` |
//! | [`invlpgb`] | [`InvlpgbOperands`] and their bits | `mm::invlpgb` | `hal::tlb::invlpgb` |
//! | [`page_table_root`] | [`PageTableRoot`] | `hal::page_table` | `mm`'s address spaces, CR3 loads |
//!
//! So a local flush crosses each line once: `mm` picks an [`Instruction`], the kernel's
//! `TlbHardware` implementation hands it to `hal`, `hal` runs it. No kernel code translates
//! one layer's type into the other's.
//!
//! The ASID is not here: it is `mm`'s bookkeeping (`mm::Asid`, a type of its own too), and
//! `hal` only ever sees the PCID that `mm` derives from it.
//!
//! Only plain values are here: no atomics (the shared CPU sets of the protocol are `mm`'s,
//! built on its loom-switchable atomics), no instructions, no policy, no dependencies.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod cpu_set;
pub mod instruction;
pub mod invlpgb;
pub mod page_table_root;
pub mod pcid;

pub use cpu_set::{CpuId, CpuSet, CpuSetIter, MAX_CPUS};
pub use instruction::Instruction;
pub use invlpgb::InvlpgbOperands;
pub use page_table_root::PageTableRoot;
pub use pcid::{PCID_BITS, Pcid};
