//! The boot banner: what kernel this is, what CPU it found, which TLB (and
//! user-page protection) features that CPU offers, and what memory it has.

use crate::{cpu_features::CpuFeatures, memory::MemorySummary, smp::SmpSummary};
use hal::println;
use hal::{apic::ApicMode, protection};

const MIB: u64 = 1 << 20;

fn yes_no(present: bool) -> &'static str {
    if present { "yes" } else { "no" }
}

/// One banner line for SMEP or SMAP: whether the CPU has it, and whether
/// the kernel turned it on.
fn protection_line(name: &str, present: bool, on: bool, access: &str) {
    match (present, on) {
        (true, true) => println!("  {name:<8} yes  on: the kernel cannot {access} user pages"),
        (true, false) => println!("  {name:<8} yes  off"),
        (false, _) => println!("  {name:<8} no   the kernel could {access} user pages by mistake"),
    }
}

/// Prints the banner: the kernel, the CPU and its TLB features, memory,
/// CPUs and the TLB mode chosen, the clocks, symbols and programs.
pub fn print(cpu: &CpuFeatures, memory: &MemorySummary, smp: &SmpSummary, symbols: Option<usize>) {
    println!("==============================================================");
    println!(
        "shootdown {} - a teaching kernel for TLB shootdown",
        env!("CARGO_PKG_VERSION")
    );
    println!("==============================================================");
    println!(
        "cpu: {} family {:#x} model {:#x} stepping {} ({})",
        cpu.vendor_str(),
        cpu.family,
        cpu.model,
        cpu.stepping,
        cpu.brand_str()
    );
    print_tlb_features(cpu);
    print_memory(memory);
    print_cpus(smp);
    match symbols {
        Some(count) => println!("symbols: {count} in the kernel's symbol table, for backtraces"),
        None => println!("symbols: none found; backtraces show bare addresses"),
    }
    if let Some(initrd) = crate::initrd::get() {
        let names: alloc::vec::Vec<&str> = initrd.names().collect();
        println!(
            "programs: {} in the ramdisk: {}",
            names.len(),
            names.join(" ")
        );
    }
}

/// The `tlb features:` block: what the CPU offers for TLB management and
/// user-page protection.
fn print_tlb_features(cpu: &CpuFeatures) {
    let invlpgb = match cpu.invlpgb {
        Some(max) if cpu.invlpgb_usable() => {
            alloc::format!("yes, up to {} pages per instruction", u32::from(max) + 1)
        }
        Some(_) => alloc::string::String::from("reported, but unusable before Zen 3"),
        None => alloc::string::String::from("no"),
    };
    println!("tlb features:");
    println!(
        "  PCID     {:<4} tagged TLB entries, CR3 loads need not flush",
        yes_no(cpu.pcid)
    );
    println!(
        "  INVPCID  {:<4} invalidate by PCID without a CR3 load",
        yes_no(cpu.invpcid)
    );
    println!(
        "  PGE      {:<4} global pages survive CR3 loads",
        yes_no(cpu.global_pages)
    );
    println!("  INVLPGB  {invlpgb}");
    println!("  x2APIC   {:<4} IPIs through MSRs", yes_no(cpu.x2apic));
    println!(
        "  TCE      {:<4} translation cache extension",
        yes_no(cpu.tce)
    );
    protection_line("SMEP", cpu.smep, protection::smep_enabled(), "execute");
    protection_line(
        "SMAP",
        cpu.smap,
        protection::smap_enabled(),
        "read or write",
    );
}

/// The `memory:` lines: what the firmware reported and what the kernel kept.
fn print_memory(memory: &MemorySummary) {
    println!(
        "memory: {} MiB usable in {} of {} regions, RAM ends at {:#x}, bootloader uses {} KiB",
        memory.usable_bytes / MIB,
        memory.usable_regions,
        memory.regions,
        memory.end_of_ram,
        memory.bootloader_bytes / 1024
    );
    println!(
        "        kernel heap {} MiB, {} frames ({} MiB) free",
        memory.heap_bytes as u64 / MIB,
        memory.free_frames_after_init,
        memory.free_frames_after_init as u64 * 4096 / MIB
    );
}

/// The `cpus:`, `tlb:` and `clock:` lines: what came up, the TLB mode and
/// why, and the clocks.
fn print_cpus(smp: &SmpSummary) {
    let apic = match smp.apic_mode {
        ApicMode::XApic { .. } => "xAPIC (MMIO, uncached)",
        ApicMode::X2Apic => "x2APIC (MSRs)",
    };
    println!(
        "cpus: {}/{} CPUs online (bring-up {:.1} ms), local APIC {apic}",
        smp.online,
        smp.listed,
        smp.bring_up.as_secs_f64() * 1000.0
    );
    println!("tlb: mode {}: {}", smp.tlb.mode, smp.tlb.mode_reason);
    println!("tlb: PCIDs {}", smp.tlb.pcid_reason);
    println!(
        "clock: TSC {} MHz, APIC timer {} MHz, tick {} Hz{}",
        smp.tsc_hz / 1_000_000,
        smp.apic_timer_hz / 1_000_000,
        hal::timer::TICK_HZ,
        crate::profiler::rate().map_or(alloc::string::String::new(), |hz| alloc::format!(
            ", sampling profiler at {hz} Hz per CPU"
        ))
    );
}
