//! Global descriptor table and task state segment.
//!
//! In long mode segmentation is mostly gone, but the CPU still needs a GDT for
//! code/data selectors (and their privilege levels, for ring 3 later) and a
//! TSS, which holds the *interrupt stack table*: known-good stacks the CPU
//! switches to for chosen exceptions. A double fault caused by a kernel stack
//! overflow would otherwise fault again while pushing its own frame onto the
//! overflowed stack and triple-fault the machine with no report.

use alloc::{boxed::Box, vec};

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

/// The selectors of one CPU's GDT.
#[derive(Clone, Copy, Debug)]
pub struct Selectors {
    pub kernel_code: SegmentSelector,
    pub kernel_data: SegmentSelector,
    pub tss: SegmentSelector,
}

/// The boot CPU's double-fault stack (`u128` elements keep it 16-byte
/// aligned, as the ABI wants of a stack). The CPU writes it; Rust code never
/// reads or writes it, which is why a `static mut` with only its address taken
/// is enough.
static mut BOOT_DOUBLE_FAULT_STACK: [u128; DOUBLE_FAULT_STACK_SIZE / 16] =
    [0; DOUBLE_FAULT_STACK_SIZE / 16];

static BOOT_TSS: Once<TaskStateSegment> = Once::new();
static BOOT_GDT: Once<(GlobalDescriptorTable, Selectors)> = Once::new();

/// Builds a TSS whose double-fault IST entry is the stack ending at `stack_top`.
fn new_tss(stack_top: VirtAddr) -> TaskStateSegment {
    let mut tss = TaskStateSegment::new();
    tss.interrupt_stack_table[usize::from(DOUBLE_FAULT_IST_INDEX)] = stack_top;
    tss
}

/// Builds a GDT with the kernel's code and data segments and the descriptor
/// of `tss`.
fn new_gdt(tss: &'static TaskStateSegment) -> (GlobalDescriptorTable, Selectors) {
    let mut gdt = GlobalDescriptorTable::new();
    let kernel_code = gdt.append(Descriptor::kernel_code_segment());
    let kernel_data = gdt.append(Descriptor::kernel_data_segment());
    let tss = gdt.append(Descriptor::tss_segment(tss));
    let selectors = Selectors {
        kernel_code,
        kernel_data,
        tss,
    };
    (gdt, selectors)
}

/// Loads `gdt` on this CPU and reloads every segment register and the task
/// register from it.
fn load(gdt: &'static GlobalDescriptorTable, selectors: &Selectors) {
    gdt.load();
    // `gdt` is 'static and was just loaded; the selectors index its
    // kernel code and data descriptors and its TSS descriptor, so every
    // reload below refers to a valid, present descriptor of the right kind.
    // The TSS is 'static too, and each CPU loads its own (the busy bit would
    // fault a second `ltr` of the same one).
    // SAFETY: every selector names a valid descriptor of the right kind.
    unsafe {
        CS::set_reg(selectors.kernel_code);
        SS::set_reg(selectors.kernel_data);
        DS::set_reg(selectors.kernel_data);
        ES::set_reg(selectors.kernel_data);
        load_tss(selectors.tss);
    }
}

/// Sets up and loads the boot CPU's TSS and GDT.
pub fn load_boot_cpu() {
    let stack_start = VirtAddr::from_ptr(&raw const BOOT_DOUBLE_FAULT_STACK);
    let tss = BOOT_TSS.call_once(|| new_tss(stack_start + DOUBLE_FAULT_STACK_SIZE as u64));
    let (gdt, selectors) = BOOT_GDT.call_once(|| new_gdt(tss));
    load(gdt, selectors);
}

/// Sets up and loads a TSS and GDT for an application processor, with its
/// own double-fault stack. They live for the rest of the run.
pub fn load_for_ap() {
    let stack: &'static mut [u128] = vec![0u128; DOUBLE_FAULT_STACK_SIZE / 16].leak();
    let stack_start = VirtAddr::from_ptr(stack.as_ptr());
    let tss: &'static TaskStateSegment = Box::leak(Box::new(new_tss(
        stack_start + DOUBLE_FAULT_STACK_SIZE as u64,
    )));
    let (gdt, selectors) = Box::leak(Box::new(new_gdt(tss)));
    load(gdt, selectors);
}
