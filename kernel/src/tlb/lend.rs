//! The guided demo's loan of the software broadcast backend to a machine
//! that booted in mode `ipi` (every machine without INVLPGB), for its
//! promotion phase: global ASIDs, promotion and the transition protocol then
//! run for real without a second boot (`kernel/src/demo.rs` says why).
//!
//! The loan is the one thing that can change the backend after boot, so it
//! is kept here, and [`super::broadcast_backend`] is the only reader: the
//! mode the kernel reports and the backend `mm` is handed both come from it.
//! `mm` allows the change only while no address space holds a global ASID
//! ([`mm::TlbSystem::global_asids_in_use`]), which both directions check.

use core::{
    fmt,
    sync::atomic::{AtomicBool, Ordering},
};

use super::{KernelBroadcast, TlbMode, state, system};

/// Set while a machine in mode `ipi` borrows the software broadcast backend
/// (see [`lend_software_broadcast`]).
static SOFTWARE_BROADCAST_LENT: AtomicBool = AtomicBool::new(false);
static SOFTWARE_BROADCAST: KernelBroadcast = KernelBroadcast::Software;

/// Why the broadcast backend cannot be switched now.
#[derive(Debug)]
pub enum LendError {
    /// The boot chose a broadcast backend already.
    NotIpiMode,
    /// Address spaces hold global ASIDs: the backend must not change under them.
    GlobalAsidsInUse(usize),
}

impl fmt::Display for LendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotIpiMode => write!(f, "the boot chose mode {} already", state().mode),
            Self::GlobalAsidsInUse(n) => write!(f, "{n} address spaces hold global ASIDs"),
        }
    }
}

/// Lends a machine that booted in mode `ipi` (every CPU without INVLPGB,
/// so every CPU under QEMU) the software broadcast backend until
/// [`return_software_broadcast`]: global ASIDs, promotion and the
/// transition protocol then run for real, as with `tlb=broadcast-sw`. The
/// guided demo does this for its promotion phase, so that `cargo run` shows
/// the mechanism the kernel exists for without a second boot. `mm` allows
/// the switch while no address space holds a global ASID, which is checked.
pub fn lend_software_broadcast() -> Result<(), LendError> {
    let in_use = system().global_asids_in_use();
    if state().mode != TlbMode::Ipi {
        return Err(LendError::NotIpiMode);
    }
    if in_use != 0 {
        return Err(LendError::GlobalAsidsInUse(in_use));
    }
    SOFTWARE_BROADCAST_LENT.store(true, Ordering::Release);
    Ok(())
}

/// Ends [`lend_software_broadcast`]; refused while a global ASID is held
/// (the processes that used them must have exited).
pub fn return_software_broadcast() -> Result<(), LendError> {
    let in_use = system().global_asids_in_use();
    if in_use != 0 {
        return Err(LendError::GlobalAsidsInUse(in_use));
    }
    SOFTWARE_BROADCAST_LENT.store(false, Ordering::Release);
    Ok(())
}

/// The software backend, while it is lent.
pub(super) fn lent_backend() -> Option<&'static KernelBroadcast> {
    SOFTWARE_BROADCAST_LENT
        .load(Ordering::Acquire)
        .then_some(&SOFTWARE_BROADCAST)
}
