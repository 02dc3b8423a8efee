//! The kernel's TLB counters, as `tlb_stats` returns them: totals over all
//! CPUs since boot, named by [`abi::TLB_COUNTER_NAMES`].
//!
//! Programs measure what their own work cost by taking a snapshot before
//! and after and looking at the difference ([`TlbCounters::since`]).

use abi::{Errno, TLB_COUNTER_NAMES};

use crate::sys;

/// One snapshot of every counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbCounters {
    values: [u64; TLB_COUNTER_NAMES.len()],
}

impl TlbCounters {
    /// Reads the counters now.
    pub fn read() -> Result<Self, Errno> {
        let mut bytes = [0u8; TLB_COUNTER_NAMES.len() * 8];
        sys::tlb_stats(&mut bytes)?;
        let mut values = [0u64; TLB_COUNTER_NAMES.len()];
        for (value, chunk) in values.iter_mut().zip(bytes.as_chunks::<8>().0) {
            *value = u64::from_le_bytes(*chunk);
        }
        Ok(Self { values })
    }

    /// Every counter, in the order of [`TLB_COUNTER_NAMES`].
    pub fn values(&self) -> [u64; TLB_COUNTER_NAMES.len()] {
        self.values
    }

    /// A snapshot made of values saved with [`TlbCounters::values`].
    pub fn from_values(values: [u64; TLB_COUNTER_NAMES.len()]) -> Self {
        Self { values }
    }

    /// The counter called `name` (0 for an unknown name).
    pub fn get(&self, name: &str) -> u64 {
        TLB_COUNTER_NAMES
            .iter()
            .position(|known| *known == name)
            .map_or(0, |index| self.values[index])
    }

    /// What happened between `earlier` and this snapshot.
    pub fn since(&self, earlier: &Self) -> Self {
        let mut values = self.values;
        for (value, before) in values.iter_mut().zip(earlier.values) {
            *value = value.saturating_sub(before);
        }
        Self { values }
    }
}
