//! The local APIC: this CPU's interrupt controller, timer and IPI sender.
//!
//! Two programming interfaces reach the same registers:
//! - **xAPIC**: registers are memory-mapped (normally at 0xFEE0_0000), one
//!   32-bit register every 16 bytes. The kernel maps the page uncached.
//!   APIC ids are 8 bits.
//! - **x2APIC**: registers are MSRs 0x800 + offset/16, the interrupt command
//!   register (ICR) becomes a single 64-bit write, and ids are 32 bits. Used
//!   when CPUID reports it (QEMU 7.2's TCG does not, so tests run xAPIC).
//!
//! Sending an IPI means writing the destination and then the command into
//! the ICR. In xAPIC mode these are two writes, so they must not be split by
//! an interrupt whose handler sends an IPI itself: [`LocalApic::send`] runs
//! with interrupts off.
//!
//! The driver is hand-written, not taken from an APIC crate: the ICR write
//! *is* the IPI a TLB shootdown costs, and this is where a reader sees it.

use spin::Once;
use x86_64::{
    PhysAddr, VirtAddr,
    registers::model_specific::{ApicBase, ApicBaseFlags, Msr},
};

use crate::cpu::without_interrupts;

/// Register offsets in the xAPIC page (AMD APM vol. 2, 16.3).
mod reg {
    pub const ID: u32 = 0x20;
    pub const TPR: u32 = 0x80;
    pub const EOI: u32 = 0xB0;
    pub const SPURIOUS: u32 = 0xF0;
    pub const ERROR_STATUS: u32 = 0x280;
    pub const ICR_LOW: u32 = 0x300;
    pub const ICR_HIGH: u32 = 0x310;
    pub const LVT_TIMER: u32 = 0x320;
    pub const LVT_LINT0: u32 = 0x350;
    pub const LVT_LINT1: u32 = 0x360;
    pub const LVT_ERROR: u32 = 0x370;
    pub const TIMER_INITIAL: u32 = 0x380;
    pub const TIMER_CURRENT: u32 = 0x390;
    pub const TIMER_DIVIDE: u32 = 0x3E0;
}

const X2APIC_MSR_BASE: u32 = 0x800;
const SPURIOUS_APIC_ENABLE: u32 = 1 << 8;
const LVT_MASKED: u32 = 1 << 16;
const LVT_TIMER_PERIODIC: u32 = 1 << 17;
const ICR_DELIVERY_PENDING: u32 = 1 << 12;
const ICR_LEVEL_ASSERT: u32 = 1 << 14;
/// Divide configuration value for "divide by 16".
const TIMER_DIVIDE_BY_16: u32 = 0b0011;

/// What an IPI asks the target to do.
#[derive(Clone, Copy, Debug)]
pub enum IpiKind {
    /// Deliver interrupt `vector`.
    Fixed(u8),
    /// Reset the target into its wait-for-SIPI state.
    Init,
    /// Start the target in real mode at physical address `page << 12`.
    Startup(u8),
    /// A non-maskable interrupt (vector 2), taken even with interrupts off.
    Nmi,
}

impl IpiKind {
    fn command(self) -> u32 {
        match self {
            Self::Fixed(vector) => u32::from(vector) | ICR_LEVEL_ASSERT,
            Self::Init => (0b101 << 8) | ICR_LEVEL_ASSERT,
            Self::Startup(page) => u32::from(page) | (0b110 << 8) | ICR_LEVEL_ASSERT,
            Self::Nmi => (0b100 << 8) | ICR_LEVEL_ASSERT,
        }
    }
}

/// How this machine's local APICs are programmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApicMode {
    XApic { base: VirtAddr },
    X2Apic,
}

/// Chosen once by the boot CPU; every CPU uses the same mode.
static MODE: Once<ApicMode> = Once::new();

/// The local APIC of the CPU that calls its methods.
#[derive(Clone, Copy, Debug)]
pub struct LocalApic {
    mode: ApicMode,
}

/// Why the local APIC could not be set up.
#[derive(Debug)]
pub enum ApicError {
    NotInitialised,
    MapFailed,
}

/// Picks the APIC mode for the whole machine: x2APIC when `x2apic` (from
/// CPUID), else xAPIC at `mmio_base` mapped uncached.
pub fn init_mode(x2apic: bool, mmio_base: PhysAddr) -> Result<ApicMode, ApicError> {
    let mode = if x2apic {
        ApicMode::X2Apic
    } else {
        let base = crate::paging::map_mmio(mmio_base, 4096).map_err(|_| ApicError::MapFailed)?;
        ApicMode::XApic { base }
    };
    Ok(*MODE.call_once(|| mode))
}

impl LocalApic {
    /// The local APIC of this CPU, once [`init_mode`] ran.
    pub fn get() -> Result<Self, ApicError> {
        MODE.get()
            .map(|&mode| Self { mode })
            .ok_or(ApicError::NotInitialised)
    }

    fn read(&self, register: u32) -> u32 {
        match self.mode {
            ApicMode::XApic { base } => {
                let address = (base + u64::from(register)).as_ptr::<u32>();
                // `base` maps this CPU's xAPIC register page uncached
                // (see `init_mode`) and `register` is one of the aligned
                // 32-bit register offsets in `reg`; volatile because the
                // device, not memory, answers.
                // SAFETY: an aligned read of a mapped, uncached APIC register.
                unsafe { core::ptr::read_volatile(address) }
            }
            ApicMode::X2Apic => {
                let msr = Msr::new(X2APIC_MSR_BASE + register / 16);
                // X2APIC mode is enabled (see `enable`) and the MSR is
                // the x2APIC alias of a readable APIC register.
                // SAFETY: a readable x2APIC MSR in x2APIC mode.
                unsafe { msr.read() as u32 }
            }
        }
    }

    fn write(&self, register: u32, value: u32) {
        match self.mode {
            ApicMode::XApic { base } => {
                let address = (base + u64::from(register)).as_mut_ptr::<u32>();
                // As in `read`; the register is writable and the value
                // is one the caller built for it.
                // SAFETY: an aligned write of a mapped, uncached, writable APIC register.
                unsafe { core::ptr::write_volatile(address, value) }
            }
            ApicMode::X2Apic => {
                let mut msr = Msr::new(X2APIC_MSR_BASE + register / 16);
                // SAFETY: as in `read`; the register is writable.
                unsafe { msr.write(u64::from(value)) }
            }
        }
    }

    /// Enables this CPU's local APIC: global enable in IA32_APIC_BASE (plus
    /// x2APIC mode if chosen), LINT0/LINT1 and the error LVT masked, task
    /// priority 0, and software enable with `spurious_vector`.
    pub fn enable(&self, spurious_vector: u8) {
        let (base_frame, mut flags) = ApicBase::read();
        flags |= ApicBaseFlags::LAPIC_ENABLE;
        if self.mode == ApicMode::X2Apic {
            flags |= ApicBaseFlags::X2APIC_ENABLE;
        }
        // Keeps the APIC's physical base and only sets the enable
        // bits; x2APIC is set only when CPUID reported it.
        // SAFETY: only the enable bits change.
        unsafe { ApicBase::write(base_frame, flags) };
        self.write(reg::LVT_LINT0, LVT_MASKED);
        self.write(reg::LVT_LINT1, LVT_MASKED);
        self.write(reg::LVT_ERROR, LVT_MASKED);
        self.write(reg::TPR, 0);
        self.write(
            reg::SPURIOUS,
            SPURIOUS_APIC_ENABLE | u32::from(spurious_vector),
        );
        // Writing the error status register latches and clears old errors.
        self.write(reg::ERROR_STATUS, 0);
    }

    /// This CPU's APIC id.
    pub fn id(&self) -> u32 {
        match self.mode {
            ApicMode::XApic { .. } => self.read(reg::ID) >> 24,
            ApicMode::X2Apic => self.read(reg::ID),
        }
    }

    /// Signals the end of the interrupt being handled.
    pub fn end_of_interrupt(&self) {
        self.write(reg::EOI, 0);
    }

    /// Sends `kind` to the CPU with APIC id `destination` and waits until the
    /// APIC has accepted it for delivery.
    pub fn send(&self, destination: u32, kind: IpiKind) {
        without_interrupts(|| match self.mode {
            ApicMode::XApic { .. } => {
                self.write(reg::ICR_HIGH, destination << 24);
                self.write(reg::ICR_LOW, kind.command());
                while self.read(reg::ICR_LOW) & ICR_DELIVERY_PENDING != 0 {
                    core::hint::spin_loop();
                }
            }
            ApicMode::X2Apic => {
                let mut icr = Msr::new(X2APIC_MSR_BASE + reg::ICR_LOW / 16);
                // In x2APIC mode the ICR is one 64-bit MSR, with the
                // destination in the high half; there is no pending bit.
                // SAFETY: a well-formed ICR write in x2APIC mode.
                unsafe { icr.write((u64::from(destination) << 32) | u64::from(kind.command())) };
            }
        });
    }

    /// Starts the timer counting down from `initial` (divided by 16), firing
    /// `vector` once or periodically.
    pub fn start_timer(&self, vector: u8, initial: u32, periodic: bool) {
        self.write(reg::TIMER_DIVIDE, TIMER_DIVIDE_BY_16);
        let mode = if periodic { LVT_TIMER_PERIODIC } else { 0 };
        self.write(reg::LVT_TIMER, u32::from(vector) | mode);
        self.write(reg::TIMER_INITIAL, initial);
    }

    /// Starts the timer counting down from `u32::MAX` with its interrupt
    /// masked, for calibration.
    pub fn start_masked_countdown(&self) {
        self.write(reg::TIMER_DIVIDE, TIMER_DIVIDE_BY_16);
        self.write(reg::LVT_TIMER, LVT_MASKED);
        self.write(reg::TIMER_INITIAL, u32::MAX);
    }

    /// The timer's current count.
    pub fn timer_count(&self) -> u32 {
        self.read(reg::TIMER_CURRENT)
    }
}
