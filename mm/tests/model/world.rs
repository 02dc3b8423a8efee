//! The memory the simulated CPUs translate: per-address-space page tables (leaf entries and
//! the page-table pages that hold them), the kernel's global mappings, and the **oracle**.
//!
//! Every mapping and every page-table page has a unique id and a state. The workload marks a
//! mapping or table `Dead` only once the flush that removed it has *returned to its caller*;
//! from then on any use of it (a TLB hit on the mapping, or a page walk through the table by
//! way of a cached paging-structure entry) is a violation. Translations that are merely
//! unmapped but whose flush is still in flight may be used: that is allowed by the protocol.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Life {
    Live,
    Dead,
}

/// Leaf entries and table pages of one user address space.
#[derive(Default)]
pub struct Tables {
    /// vpn -> mapping id
    pub ptes: BTreeMap<u64, u64>,
    /// region (vpn >> 9) -> table id
    pub tables: BTreeMap<u64, u64>,
}

pub struct PageTable {
    pub ctx: u64,
    pub inner: Mutex<Tables>,
}

pub struct Oracle {
    mappings: Mutex<Vec<Life>>,
    tables: Mutex<Vec<Life>>,
    violations: Mutex<Vec<String>>,
    stop: AtomicBool,
    pub checks: AtomicU64,
}

impl Oracle {
    pub fn new() -> Self {
        Self {
            mappings: Mutex::new(Vec::new()),
            tables: Mutex::new(Vec::new()),
            violations: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            checks: AtomicU64::new(0),
        }
    }

    pub fn new_mapping(&self) -> u64 {
        let mut m = self.mappings.lock().unwrap();
        m.push(Life::Live);
        m.len() as u64 - 1
    }

    pub fn new_table(&self) -> u64 {
        let mut t = self.tables.lock().unwrap();
        t.push(Life::Live);
        t.len() as u64 - 1
    }

    pub fn kill_mappings(&self, ids: &[u64]) {
        let mut m = self.mappings.lock().unwrap();
        for &id in ids {
            m[id as usize] = Life::Dead;
        }
    }

    pub fn kill_tables(&self, ids: &[u64]) {
        let mut t = self.tables.lock().unwrap();
        for &id in ids {
            t[id as usize] = Life::Dead;
        }
    }

    pub fn mapping(&self, id: u64) -> Life {
        self.checks.fetch_add(1, Ordering::Relaxed);
        self.mappings.lock().unwrap()[id as usize]
    }

    pub fn table(&self, id: u64) -> Life {
        self.tables.lock().unwrap()[id as usize]
    }

    pub fn violation(&self, what: String) {
        self.violations.lock().unwrap().push(what);
        self.stop.store(true, Ordering::SeqCst);
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    pub fn violations(&self) -> Vec<String> {
        self.violations.lock().unwrap().clone()
    }
}

/// Everything translatable: page tables by root, and the kernel's global mappings.
pub struct World {
    pub roots: Mutex<BTreeMap<u64, std::sync::Arc<PageTable>>>,
    /// kernel vpn -> mapping id (global entries)
    pub kernel: Mutex<BTreeMap<u64, u64>>,
    pub oracle: Oracle,
}

impl World {
    pub fn new() -> Self {
        Self {
            roots: Mutex::new(BTreeMap::new()),
            kernel: Mutex::new(BTreeMap::new()),
            oracle: Oracle::new(),
        }
    }

    pub fn table_for_root(&self, root: u64) -> std::sync::Arc<PageTable> {
        self.roots.lock().unwrap()[&root].clone()
    }
}
