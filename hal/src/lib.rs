//! # hal: the hardware layer of the shootdown kernel
//!
//! Every privileged instruction, I/O port, MMIO access, inline assembly and
//! trusted physical-memory token of the kernel lives in this crate, and
//! nowhere else: it is the only crate of the project that contains `unsafe`.
//! Each `unsafe` block says in a `// SAFETY:` comment why it holds; each
//! `unsafe fn` says in `# Safety` what its caller must promise (the
//! workspace denies `clippy::undocumented_unsafe_blocks` and
//! `clippy::missing_safety_doc`). What this
//! crate exports is safe to call with any argument: an operation that is
//! sound only for the right argument takes a token that only a safe
//! constructor here makes (a [`frames::Frame`], a [`context::ThreadContext`],
//! a [`page_table::PageTable`]).
//!
//! ## The layers
//!
//! ```text
//!   user programs ──► abi ◄──────────┐
//!                                    │
//!   kernel  (boot order, memory, tasks, system calls, the TLB glue)
//!      │  asks                       │ tells
//!      ▼                             ▼
//!     mm  (every TLB decision)      hal  (every instruction)
//! ```
//!
//! `kernel` may call `mm`, `hal` and `abi`; `mm`, `hal` and `abi` call no
//! crate of the project. This crate knows nothing above it: no scheduler,
//! threads, system calls, tests or TLB policy. Where it must reach the
//! kernel (a trap arrives, an AP has started) it calls what the kernel
//! registered at boot: [`trap::set_handlers`],
//! [`smp::start_application_processors`]'s AP function.
//!
//! ## What is here
//!
//! - CPU state: [`cpu`], [`cpuid`], [`gdt`], [`idt`], [`protection`] (SMEP,
//!   SMAP), [`tlb`] (the TLB instructions), [`probe`] (accesses that may
//!   fault, for tests);
//! - traps: [`trap`] (entry stubs, the frame), [`syscall`], [`vectors`];
//! - CPUs: [`apic`], [`smp`] (the CPU table, the online set, AP start-up
//!   with [`trampoline`]), [`percpu`], [`ipi`] (cross-CPU calls),
//!   `atomic_cpus` (its own shared CPU sets), [`timer`], [`tsc`] and [`time`];
//! - memory: [`phys`] (the physical-memory window), [`frames`] (the frame
//!   allocator and its tokens), [`page_table`] (user page tables),
//!   [`paging`] (the kernel's own mappings), [`kernel_stack`] (guarded
//!   stacks), [`global_alloc`] (the heap's allocator), [`context`]
//!   (switching stacks) and [`user_state`] (the user registers a switch
//!   carries besides them), [`stack_walk`];
//! - what the boot loader hands over: [`kernel_image`], [`ramdisk`];
//! - devices: [`serial`] and [`console`], [`fw_cfg`], [`pic`],
//!   [`qemu_exit`].

#![no_std]

extern crate alloc;

mod atomic_cpus;

pub mod apic;
pub mod console;
pub mod context;
pub mod cpu;
pub mod cpuid;
pub mod frames;
pub mod fw_cfg;
pub mod gdt;
pub mod global_alloc;
pub mod idt;
pub mod ipi;
pub mod kernel_image;
pub mod kernel_stack;
pub mod page_table;
pub mod paging;
pub mod percpu;
pub mod phys;
pub mod pic;
pub mod probe;
pub mod protection;
pub mod qemu_exit;
pub mod ramdisk;
pub mod serial;
pub mod smp;
pub mod stack_walk;
pub mod syscall;
pub mod time;
pub mod timer;
pub mod tlb;
pub mod trampoline;
pub mod trap;
pub mod tsc;
pub mod user_state;
pub mod vectors;

/// Loads the boot CPU's descriptor tables: GDT and TSS (with the double-fault
/// stack) and the IDT. After this, every CPU exception reaches the trap
/// handlers (once the kernel registered them).
pub fn init_boot_cpu() {
    gdt::load_boot_cpu();
    idt::load();
}
