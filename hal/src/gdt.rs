//! Global descriptor table and task state segment.
//!
//! In long mode segmentation is mostly gone, but the CPU still needs a GDT
//! for the code and data selectors of ring 0 and ring 3, and a TSS, which
//! holds two kinds of stack pointers the CPU loads by itself:
//! - `RSP0`: the kernel stack to switch to when an interrupt or exception
//!   arrives while ring 3 runs. Every thread has its own kernel stack, so the
//!   scheduler rewrites RSP0 at every context switch ([`Tss::set_kernel_stack`]).
//! - the *interrupt stack table*: known-good stacks for chosen exceptions. A
//!   double fault caused by a kernel stack overflow would otherwise fault
//!   again while pushing its frame onto the overflowed stack and triple-fault
//!   the machine with no report.
//!
//! Every CPU has its own TSS (and so its own GDT, which holds the TSS
//! descriptor).

use alloc::{boxed::Box, vec};
use core::cell::UnsafeCell;

use spin::Once;
use x86_64::{
    VirtAddr,
    instructions::{
        segmentation::{CS, DS, ES, SS, Segment},
        tables::load_tss,
    },
    structures::{
        gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector},
        tss::TaskStateSegment,
    },
};

/// Index in the TSS interrupt stack table of the double-fault stack. The IDT
/// entry names it as `DOUBLE_FAULT_IST_INDEX + 1` (0 there means "no switch").
pub const DOUBLE_FAULT_IST_INDEX: u8 = 0;

const DOUBLE_FAULT_STACK_SIZE: usize = 16 * 1024;

/// Selectors, identical on every CPU. The order of the descriptors (kernel
/// code, kernel data, user data, user code) is what `syscall` and `sysret`
/// derive their selectors from (see [`crate::syscall`]).
pub const KERNEL_CODE: SegmentSelector = SegmentSelector(0x08);
pub const KERNEL_DATA: SegmentSelector = SegmentSelector(0x10);
pub const USER_DATA: SegmentSelector = SegmentSelector(0x18 | 3);
pub const USER_CODE: SegmentSelector = SegmentSelector(0x20 | 3);
const TSS_SELECTOR: SegmentSelector = SegmentSelector(0x28);

/// One CPU's TSS, which the kernel changes after loading it.
pub struct Tss(UnsafeCell<TaskStateSegment>);

// SAFETY: only the owning CPU writes its TSS (`set_kernel_stack`, with
// interrupts off during a context switch); other CPUs never touch it.
unsafe impl Sync for Tss {}

impl Tss {
    /// Sets RSP0: the stack the CPU switches to on an interrupt from ring 3.
    pub fn set_kernel_stack(&self, top: VirtAddr) {
        // No Rust reference to the TSS exists after `load` (the GDT
        // descriptor holds only its address), and only this CPU writes it.
        // SAFETY: an unaliased write by the TSS's only writer.
        unsafe { (*self.0.get()).privilege_stack_table[0] = top };
    }
}

/// The boot CPU's double-fault stack (`u128` elements keep it 16-byte
/// aligned, as the ABI wants of a stack). The CPU writes it; Rust code never
/// reads or writes it, which is why a `static mut` with only its address taken
/// is enough. (The boot CPU sets up its tables before the heap exists.)
static mut BOOT_DOUBLE_FAULT_STACK: [u128; DOUBLE_FAULT_STACK_SIZE / 16] =
    [0; DOUBLE_FAULT_STACK_SIZE / 16];

static BOOT_TSS: Once<Tss> = Once::new();
static BOOT_GDT: Once<GlobalDescriptorTable> = Once::new();

fn new_tss(double_fault_stack_top: VirtAddr) -> Tss {
    let mut tss = TaskStateSegment::new();
    tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST_INDEX)] = double_fault_stack_top;
    Tss(UnsafeCell::new(tss))
}

fn new_gdt(tss: &'static Tss) -> GlobalDescriptorTable {
    let mut gdt = GlobalDescriptorTable::new();
    let selectors = [
        gdt.append(Descriptor::kernel_code_segment()),
        gdt.append(Descriptor::kernel_data_segment()),
        gdt.append(Descriptor::user_data_segment()),
        gdt.append(Descriptor::user_code_segment()),
        // SAFETY: the TSS is 'static and stays at this address for good.
        gdt.append(unsafe { Descriptor::tss_segment_unchecked(tss.0.get()) }),
    ];
    assert_eq!(
        selectors,
        [KERNEL_CODE, KERNEL_DATA, USER_DATA, USER_CODE, TSS_SELECTOR]
    );
    gdt
}

/// Loads `gdt` on this CPU and reloads every segment register and the task
/// register from it.
fn load(gdt: &'static GlobalDescriptorTable) {
    gdt.load();
    // `gdt` is 'static and was just loaded; the selectors index its kernel
    // code and data descriptors and its TSS descriptor, so every reload below
    // refers to a valid, present descriptor of the right kind. The TSS is
    // 'static too, and each CPU loads its own (the busy bit would fault a
    // second `ltr` of the same one).
    // SAFETY: every selector names a valid descriptor of the right kind.
    unsafe {
        CS::set_reg(KERNEL_CODE);
        SS::set_reg(KERNEL_DATA);
        DS::set_reg(KERNEL_DATA);
        ES::set_reg(KERNEL_DATA);
        load_tss(TSS_SELECTOR);
    }
}

/// Sets up and loads the boot CPU's TSS and GDT; returns the TSS.
pub fn load_boot_cpu() -> &'static Tss {
    let stack_start = VirtAddr::from_ptr(&raw const BOOT_DOUBLE_FAULT_STACK);
    let tss = BOOT_TSS.call_once(|| new_tss(stack_start + DOUBLE_FAULT_STACK_SIZE as u64));
    load(BOOT_GDT.call_once(|| new_gdt(tss)));
    tss
}

/// The boot CPU's TSS, once [`load_boot_cpu`] ran.
pub fn boot_cpu_tss() -> &'static Tss {
    BOOT_TSS.get().expect("gdt::load_boot_cpu runs first")
}

/// Sets up and loads a TSS and GDT for an application processor, with its
/// own double-fault stack; returns the TSS. They live for the rest of the run.
pub fn load_for_ap() -> &'static Tss {
    let stack: &'static mut [u128] = vec![0u128; DOUBLE_FAULT_STACK_SIZE / 16].leak();
    let stack_start = VirtAddr::from_ptr(stack.as_ptr());
    let tss: &'static Tss = Box::leak(Box::new(new_tss(
        stack_start + DOUBLE_FAULT_STACK_SIZE as u64,
    )));
    load(Box::leak(Box::new(new_gdt(tss))));
    tss
}
