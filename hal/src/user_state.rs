//! The user registers a [`TrapFrame`](crate::trap::TrapFrame) does not hold:
//! the x87/SSE state and the FS base.
//!
//! A C program compiled for Linux uses SSE (every `memcpy`, every `double`)
//! and reaches its thread-local storage through FS, whose base each thread
//! sets with `arch_prctl(ARCH_SET_FS)`. Both are per-thread state that the
//! CPU keeps outside the general registers, so a switch between two user
//! threads must save one thread's and load the other's.
//!
//! **When they are switched.** The kernel itself is built soft-float (its
//! target has no SSE) and never touches FS, so from the moment a thread
//! enters the kernel until the moment its CPU switches to another context,
//! the CPU's SSE registers and FS base still hold that thread's values.
//! Saving them in [`context::switch_to`](crate::context::switch_to), and
//! nowhere else, is therefore enough: a trap or system call needs no save.
//! Linux defers the save further (until the registers are needed by
//! someone else); the eager switch here costs one `fxsave64` and one
//! `fxrstor64` per switch between user threads, and is easy to follow.
//!
//! **What is saved.** `fxsave64` stores the x87 and SSE state in 512 bytes
//! (x87 and XMM0-15, MXCSR). AVX's upper halves would need `xsave`, which
//! this kernel does not enable: with CR4.OSXSAVE clear, CPUID reports
//! OSXSAVE as 0, so a libc never uses AVX (glibc and musl check that bit
//! before they pick an AVX `memcpy`).
//!
//! A new program starts with the state `finit` and a reset MXCSR give
//! ([`UserState::initial`]); a forked or cloned thread starts with a copy of
//! its parent's registers as they are at the call ([`UserState::copy_of_current`]).

use alloc::boxed::Box;
use core::{
    cell::UnsafeCell,
    sync::atomic::{AtomicU64, Ordering},
};

use x86_64::{
    VirtAddr,
    registers::{
        control::{Cr0, Cr0Flags, Cr4, Cr4Flags},
        model_specific::FsBase,
    },
};

/// The x87 control word after `finit`: every exception masked, 64-bit
/// precision, round to nearest.
const INITIAL_FCW: u16 = 0x037f;
/// MXCSR after reset: every SSE exception masked, round to nearest.
const INITIAL_MXCSR: u32 = 0x1f80;
/// Where `fxsave64` keeps MXCSR in its area.
const MXCSR_OFFSET: usize = 24;

/// The 512-byte area `fxsave64` writes and `fxrstor64` reads (16-aligned).
#[repr(C, align(16))]
struct FxArea([u8; 512]);

/// One user thread's x87/SSE registers and FS base, while they are not in
/// the CPU.
pub struct UserState {
    /// Written by `fxsave64` on the CPU switching away from the thread, read
    /// by `fxrstor64` on the CPU switching to it; see the `Sync` argument.
    fx: Box<UnsafeCell<FxArea>>,
    /// Loaded into `IA32_FS_BASE` when the thread is switched to.
    fs_base: AtomicU64,
}

// SAFETY: `fx` is only touched by `save` and `restore`, which the context
// switch calls for the context it is switching away from (the running
// context of this CPU) and the one it has just claimed (its `on_cpu` flag,
// taken with a compare-exchange, excludes every other CPU); a context
// belongs to at most one CPU at a time, and the flag's Release/Acquire pair
// orders one CPU's save before the next CPU's restore. Before the context
// is first switched to, no CPU has it, and nothing reads `fx` but the
// constructor. `fs_base` is atomic.
unsafe impl Sync for UserState {}

impl UserState {
    /// The state a new program starts with: x87 and SSE as after reset
    /// (registers zero, exceptions masked), FS base 0.
    pub fn initial() -> Self {
        let mut area = FxArea([0; 512]);
        area.0[..2].copy_from_slice(&INITIAL_FCW.to_le_bytes());
        area.0[MXCSR_OFFSET..MXCSR_OFFSET + 4].copy_from_slice(&INITIAL_MXCSR.to_le_bytes());
        Self {
            fx: Box::new(UnsafeCell::new(area)),
            fs_base: AtomicU64::new(0),
        }
    }

    /// A copy of the registers of the user thread running on this CPU, as
    /// they are now (it is inside a system call): what a `fork` or `clone`
    /// child starts with.
    pub fn copy_of_current() -> Self {
        let fx = Box::new(UnsafeCell::new(FxArea([0; 512])));
        // `fx` is a fresh, exclusive, 16-aligned 512-byte area: exactly
        // what `fxsave64` writes.
        // SAFETY: the store stays inside the area, which nothing else sees.
        unsafe {
            core::arch::asm!("fxsave64 [{}]", in(reg) fx.get(), options(nostack));
        }
        Self {
            fx,
            fs_base: AtomicU64::new(FsBase::read().as_u64()),
        }
    }

    /// Makes `base` the FS base this thread starts with; `None` if it is
    /// not a canonical address (the CPU would refuse it).
    pub fn with_fs_base(self, base: u64) -> Option<Self> {
        VirtAddr::try_new(base).ok()?;
        self.fs_base.store(base, Ordering::Relaxed);
        Some(self)
    }

    /// Sets the FS base of the thread that owns this state, which must be
    /// the one running on this CPU (its system call asks for it), in the
    /// saved copy and in the CPU. `None` if `base` is not canonical.
    pub fn set_fs_base_of_current(&self, base: u64) -> Option<()> {
        let base = VirtAddr::try_new(base).ok()?;
        crate::cpu::without_interrupts(|| {
            // The saved copy first: a switch between the two lines would
            // load it back, so the CPU never keeps an older value.
            self.fs_base.store(base.as_u64(), Ordering::Relaxed);
            FsBase::write(base);
        });
        Some(())
    }

    /// The FS base the thread has.
    pub fn fs_base(&self) -> u64 {
        self.fs_base.load(Ordering::Relaxed)
    }

    /// Saves this CPU's x87/SSE registers into the state of the context it
    /// is switching away from. The FS base needs no save: it changes only
    /// through [`set_fs_base_of_current`](Self::set_fs_base_of_current),
    /// which records it.
    pub(crate) fn save(&self) {
        // The caller (the context switch) owns the context this state
        // belongs to on this CPU, so no other CPU reads or writes the area
        // (see the `Sync` argument); the area is 16-aligned and 512 bytes.
        // SAFETY: an exclusive, valid `fxsave64` destination.
        unsafe {
            core::arch::asm!("fxsave64 [{}]", in(reg) self.fx.get(), options(nostack));
        }
    }

    /// Loads the state of the context this CPU is switching to.
    pub(crate) fn restore(&self) {
        // As in `save`: the switch has claimed the context. The area holds
        // either `initial`'s image or what `fxsave64` stored, so its MXCSR
        // has no reserved bit set and `fxrstor64` cannot fault.
        // SAFETY: an exclusive, valid `fxrstor64` source.
        unsafe {
            core::arch::asm!("fxrstor64 [{}]", in(reg) self.fx.get(), options(nostack, readonly));
        }
        // Only `with_fs_base` and `set_fs_base_of_current` store a base,
        // both after checking that it is canonical.
        FsBase::write(VirtAddr::new_truncate(self.fs_base.load(Ordering::Relaxed)));
    }
}

/// Lets ring 3 use SSE on this CPU: CR4.OSFXSR (the OS saves the state
/// with `fxsave`) and OSXMMEXCPT (SIMD exceptions raise #XM), CR0.MP set
/// and EM and TS clear (x87 instructions run, `wait` checks TS). Every CPU
/// calls it once.
pub fn init_this_cpu() {
    // x86-64 CPUs all have SSE2 and FXSR, so the bits exist. The kernel
    // never executes SSE or x87 instructions itself (soft-float target), so
    // enabling them changes nothing for it.
    // SAFETY: architecturally defined bits that only permit user SSE.
    unsafe {
        Cr0::update(|cr0| {
            cr0.remove(Cr0Flags::EMULATE_COPROCESSOR | Cr0Flags::TASK_SWITCHED);
            cr0.insert(Cr0Flags::MONITOR_COPROCESSOR);
        });
        Cr4::update(|cr4| cr4.insert(Cr4Flags::OSFXSR | Cr4Flags::OSXMMEXCPT_ENABLE));
    }
}
