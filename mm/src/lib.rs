//! # `mm`: every decision about TLBs, none of the instructions
//!
//! This crate is the heart of a teaching kernel about **TLB shootdown**: making sure that once
//! a page is unmapped (or its protection reduced), no CPU can still use a cached translation
//! of it. The kernel owns the instructions (INVLPG, CR3 loads, IPIs, INVLPGB); this crate owns
//! the *protocol* and runs unchanged in the kernel and in host tests.
//!
//! //! This first layer holds the building blocks: CPU sets, ASID/PCID numbering, the global
//! ASID allocator, INVLPGB operand encoding and the counters. The protocol itself (switching,
//! flushing, promotion, batching) builds on them.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

mod asid;
mod asid_alloc;
mod counters;
mod cpu_set;
pub mod invlpgb;
mod sync;

pub use asid::{
    Asid, DYN_ASIDS, FIRST_GLOBAL_ASID, GLOBAL_ASID_COUNT, MAX_ASID_AVAILABLE, PCID_BITS, Pcid,
    is_dynamic_asid, is_global_asid, pcid_of,
};
pub use asid_alloc::GlobalAsidAllocator;
pub use counters::{CounterSnapshot, Counters, TraceEvent, TraceReason};
pub use cpu_set::{AtomicCpuSet, CpuId, CpuSet, CpuSetIter, MAX_CPUS};
