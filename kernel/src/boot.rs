//! The boot order: everything the kernel sets up, in the order it must
//! happen, for the boot CPU ([`kernel_main`]) and for every other CPU
//! (`ap_main`).
//!
//! Each step needs the ones before it: the descriptor tables before anything
//! can fault usefully, the trap handlers before the first interrupt, memory
//! before the heap is used, the command line before the TLB mode is chosen,
//! the TLB state of a CPU before it is marked online (from then on every
//! shootdown waits for it), and the scheduler before interrupts are enabled.
//! The hardware layer provides the steps; only this file says in which order
//! they run.

use alloc::{
    string::{String, ToString},
    vec,
};
use core::{fmt, time::Duration};

use bootloader_api::{BootInfo, BootloaderConfig, config::Mapping};
use hal::{
    apic::{self, LocalApic},
    fw_cfg::FwCfgError,
    println,
    qemu_exit::{QemuExitCode, exit_qemu},
    smp::BringUpStop,
    trap::TrapHandlers,
    vectors,
};
use log::{info, warn};
use spin::Once;

use crate::{
    acpi, banner,
    cmdline::{self, Workload},
    cpu_features::CpuFeatures,
    demo, exceptions, fatal, initrd, interrupts, logger, memory, profile, profiler,
    smp::{self, SmpSummary},
    symbols, task, tlb,
};

/// Where the kernel image is mapped: the top 2 GiB of the address space.
const KERNEL_BASE: u64 = 0xffff_ffff_8000_0000;

/// Asks the bootloader to put everything it maps for the kernel (the image,
/// its stack, the boot information and the window onto all physical memory)
/// in the upper half, leaving the lower half free for user address spaces,
/// and to give the kernel a roomy stack.
pub const BOOTLOADER_CONFIG: BootloaderConfig = {
    let mut config = BootloaderConfig::new_default();
    config.mappings.kernel_base = Mapping::FixedAddress(KERNEL_BASE);
    config.mappings.dynamic_range_start = Some(hal::paging::UPPER_HALF_START);
    config.mappings.physical_memory = Some(Mapping::Dynamic);
    config.kernel_stack_size = 256 * 1024;
    config
};

/// How many functions the profile's table at the end of a run shows.
const PROFILE_TABLE_ROWS: usize = 15;

/// What CPU bring-up found, for the banner and the tests.
pub static SMP_SUMMARY: Once<SmpSummary> = Once::new();

/// The in-kernel tests, which only the `kernel-tests` image links: the
/// `kernel` image that `cargo run` boots passes `None` to [`kernel_main`].
pub struct TestImage {
    /// Runs the tests `filters` select (all ordinary ones when empty) and
    /// returns whether all passed; `Err` names a filter that selects none.
    pub run: fn(&[String]) -> Result<bool, String>,
    /// Prints every test's name.
    pub list: fn(),
    /// On the fatal path: fails the running test with the reason.
    pub report_abort: fn(fmt::Arguments<'_>),
}

/// The boot CPU's path from the bootloader to the selected workload.
pub fn kernel_main(boot_info: &'static mut BootInfo, tests: Option<&'static TestImage>) -> ! {
    hal::serial::init();
    // The host runner times the boot up to this line.
    println!("shootdown: kernel entered");
    logger::init();
    hal::init_boot_cpu();
    hal::trap::set_handlers(TrapHandlers {
        exception: exceptions::handle,
        system_call: task::syscall::dispatch,
        interrupt: interrupts::dispatch,
    });
    fatal::set_reporters(fatal::Reporters {
        bug_details: task::syscall::print_last_calls,
        run_ends: tests.map_or(ignore_fatal_end, |tests| tests.report_abort),
    });

    let memory = memory::init(boot_info)
        .unwrap_or_else(|error| fatal::reject(format_args!("memory: {error}")));
    hal::paging::init()
        .unwrap_or_else(|error| fatal::reject(format_args!("kernel page tables: {error}")));
    let symbol_count = hal::kernel_image::file(boot_info)
        .and_then(|file| symbols::init(file, boot_info.kernel_image_offset));
    load_ramdisk(boot_info);
    let options = read_command_line(hal::kernel_image::file(boot_info)).unwrap_or_else(|error| {
        fatal::reject(format_args!("rejected kernel command line: {error}"))
    });
    logger::set_level(options.log_level);
    crate::memory::quarantine::init(options.quarantine_frames);
    if let Some(bug) = options.vm_bug {
        crate::vm_bug::switch_on(bug);
        if bug == crate::vm_bug::VmBug::RacyTableInstall {
            hal::page_table::install_tables_racily();
        }
    }
    crate::vm_lock::choose(options.vm_lock);
    hal::ipi::set_halting(options.ipi_halt);
    crate::task::syscall::log_unknown_calls(options.log_unknown_syscalls);

    let cpu = detect_cpu_features();
    let topology = acpi::discover(boot_info.rsdp_addr.into_option(), hal::phys::read_bytes)
        .unwrap_or_else(|error| fatal::reject(format_args!("cannot find the CPUs: {error}")));
    let smp = start_cpus(&topology, &cpu, &options.tlb, options.profile_hz)
        .unwrap_or_else(|error| fatal::reject(format_args!("smp: {error}")));
    let smp = SMP_SUMMARY.call_once(|| smp);
    banner::print(&cpu, &memory, smp, symbol_count);

    profiler::start();
    let outcome = run_workload(&options, tests);
    print_run_totals();
    exit_qemu(outcome)
}

/// Finds the ramdisk the bootloader loaded and reads its archive; a boot
/// without one, or with a broken one, is refused with the reason.
fn load_ramdisk(boot_info: &BootInfo) {
    hal::ramdisk::bytes(boot_info)
        .map_err(|error| error.to_string())
        .and_then(|bytes| {
            initrd::init(bytes)
                .map(|_| ())
                .map_err(|error| alloc::format!("bad ramdisk archive: {error}"))
        })
        .unwrap_or_else(|error| fatal::reject(format_args!("ramdisk: {error}")));
}

/// Runs what `run=` (or `exec=`) asked for and says how it ended.
fn run_workload(options: &cmdline::Options, tests: Option<&'static TestImage>) -> QemuExitCode {
    match options.workload {
        Workload::Demo => {
            if demo::run() {
                QemuExitCode::Success
            } else {
                QemuExitCode::Failure
            }
        }
        Workload::ListTests => {
            (tests.unwrap_or_else(no_tests).list)();
            QemuExitCode::Success
        }
        Workload::Program => {
            let (name, args) = options.program.as_ref().expect("exec= sets the program");
            run_program(name, args)
        }
        Workload::Tests => match (tests.unwrap_or_else(no_tests).run)(&options.test_filters) {
            Ok(true) => QemuExitCode::Success,
            Ok(false) => QemuExitCode::Failure,
            Err(unmatched) => fatal::reject(format_args!("{unmatched}")),
        },
    }
}

/// The lines every run ends with: the profile (with `profile=`), the TLB
/// counters, the shootdown latencies and their breakdown, and the timeline
/// (with `tlb.timeline=on`).
fn print_run_totals() {
    if let Some(profile) = profiler::finish() {
        println!("{}", profile.table(PROFILE_TABLE_ROWS));
        println!("{}", profile.line(profile::LINE_ROWS));
    }
    println!("{}", tlb::counters_line());
    println!("{}", tlb::latency::line());
    println!("{}", tlb::breakdown::line());
    tlb::recorder::print_all();
}

/// What this CPU can do, from the CPUID instruction.
pub fn detect_cpu_features() -> CpuFeatures {
    CpuFeatures::from_cpuid(|leaf, subleaf| {
        let registers = hal::cpuid::cpuid(leaf, subleaf);
        [registers.eax, registers.ebx, registers.ecx, registers.edx]
    })
}

/// Reads the command line from QEMU's fw_cfg; a machine without fw_cfg
/// (Bochs) reads the command-line slot of the kernel's file `kernel_file`
/// instead ([`cmdline::SLOT`]). No file, or an empty slot, means the
/// defaults.
fn read_command_line(
    kernel_file: Option<&[u8]>,
) -> Result<cmdline::Options, cmdline::CmdlineError> {
    let mut buffer = vec![0; cmdline::MAX_LENGTH];
    let length = match hal::fw_cfg::read_file(cmdline::FW_CFG_FILE, &mut buffer) {
        Ok(length) => length,
        Err(FwCfgError::NotFound) => 0,
        Err(FwCfgError::NoDevice) => {
            let line = kernel_file
                .and_then(cmdline::find_in_slot)
                .unwrap_or_default();
            if !line.is_empty() {
                println!(
                    "cmdline: no fw_cfg; from the kernel image's slot: {}",
                    String::from_utf8_lossy(line)
                );
            }
            return cmdline::parse_bytes(line);
        }
        Err(FwCfgError::TooLarge { size, .. }) => {
            return Err(cmdline::CmdlineError::TooLong { size });
        }
    };
    cmdline::parse_bytes(&buffer[..length])
}

/// `run=tests` or `run=list` on the image without tests.
fn no_tests() -> &'static TestImage {
    fatal::reject(format_args!(
        "this image has no in-kernel tests: they are in the kernel-tests image, \
         which the runner boots for run=tests, run=list and test="
    ))
}

/// What the fatal path adds for the image without tests: nothing.
fn ignore_fatal_end(_: fmt::Arguments<'_>) {}

/// Why the CPUs could not be started.
#[derive(Debug)]
enum SmpError {
    Apic(apic::ApicError),
    Clock,
    Tlb(crate::tlb_mode::ModeUnavailable),
}

impl fmt::Display for SmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Apic(error) => write!(f, "cannot set up the local APIC: {error:?}"),
            Self::Clock => write!(
                f,
                "cannot measure the TSC rate: no PIT, or the TSC does not count"
            ),
            Self::Tlb(error) => write!(f, "{error}"),
        }
    }
}

/// Sets up the boot CPU's interrupts, clock, TLB mode and scheduler, then
/// starts every other enabled CPU.
fn start_cpus(
    topology: &acpi::CpuTopology,
    cpu: &CpuFeatures,
    tlb_options: &crate::tlb_mode::TlbOptions,
    profile_hz: Option<u32>,
) -> Result<SmpSummary, SmpError> {
    hal::pic::disable();
    let tsc_hz = hal::time::init().map_err(|_| SmpError::Clock)?;
    let apic_mode = apic::init_mode(
        cpu.x2apic,
        x86_64::PhysAddr::new(topology.local_apic_address),
    )
    .map_err(SmpError::Apic)?;
    let apic = LocalApic::get().map_err(SmpError::Apic)?;
    // Enabling the APIC is also what switches it into x2APIC mode: no APIC
    // register is read before.
    apic.enable(vectors::SPURIOUS);
    hal::smp::init_boot_cpu(apic.id());

    let listed = topology.enabled_apic_ids().count();
    let cpu_count = listed.clamp(1, mm::MAX_CPUS);
    let tlb_choice = tlb::init(cpu_count, hal::cpu::page_table_root(), tlb_options, cpu)
        .map_err(SmpError::Tlb)?;
    tlb::init_this_cpu();
    hal::syscall::init_this_cpu();
    hal::user_state::init_this_cpu();
    hal::protection::init(cpu.smep, cpu.smap);
    task::sched::init_boot_cpu();
    let apic_timer_hz = hal::timer::calibrate(&apic);
    if let Some(hz) = profile_hz {
        profiler::init(hz, cpu_count);
    }
    hal::timer::start(&apic);
    hal::smp::mark_this_cpu_online();
    hal::cpu::enable_interrupts();

    let bring_up = start_other_cpus(&apic, topology);
    let online = smp::online().count();
    info!(
        "smp: {online}/{listed} CPUs online, bring-up took {:.1} ms",
        bring_up.as_secs_f64() * 1000.0
    );
    Ok(SmpSummary {
        online,
        listed,
        bring_up,
        apic_mode,
        tsc_hz,
        apic_timer_hz,
        tlb: tlb_choice,
    })
}

/// Starts every other enabled CPU of `topology`, one at a time, and
/// returns how long it took. A CPU that does not answer, or one more than
/// [`mm::MAX_CPUS`], ends the bring-up with a warning; the CPUs started
/// until then run.
fn start_other_cpus(apic: &LocalApic, topology: &acpi::CpuTopology) -> Duration {
    let started = hal::time::now_ns();
    match hal::smp::start_application_processors(apic, topology.enabled_apic_ids(), ap_main) {
        BringUpStop::Complete => {}
        BringUpStop::TooMany => {
            warn!(
                "smp: more than {} CPUs listed; the rest stay offline",
                mm::MAX_CPUS
            );
        }
        BringUpStop::NoAnswer { apic_id, waited } => warn!(
            "smp: CPU with APIC id {apic_id} did not start within {waited:?}; \
             not starting any further CPUs"
        ),
    }
    Duration::from_nanos(hal::time::now_ns() - started)
}

/// Every other CPU's path, once the hardware layer has given it the kernel's
/// page table, its descriptor tables and its per-CPU block: the same set-up
/// as the boot CPU's, then its idle thread.
fn ap_main() -> ! {
    let apic = LocalApic::get().expect("the boot CPU set up the APIC mode");
    // First: an x2APIC must be switched into x2APIC mode before any of its
    // registers is touched.
    apic.enable(vectors::SPURIOUS);
    tlb::init_this_cpu();
    hal::syscall::init_this_cpu();
    hal::user_state::init_this_cpu();
    hal::protection::enable_this_cpu();
    hal::timer::start(&apic);
    hal::smp::mark_this_cpu_online();
    task::sched::run_idle_on_ap()
}

/// Runs one user program to completion; success if it exits with 0.
///
/// Then says how many frames the program and its children did not give
/// back, and how many frames are still recorded as shared: both are 0 unless
/// the kernel leaked (the fork tests check).
fn run_program(name: &str, args: &str) -> QemuExitCode {
    // Free frames and those only waiting in the quarantine to be free.
    let given_back = || hal::frames::free_count() + crate::memory::quarantine::held();
    let given_back_before = given_back();
    match task::loader::spawn(name, args, None) {
        Ok(process) => {
            let code = process.wait().unwrap_or(-1);
            let pid = process.pid;
            drop(process);
            println!("exec: {name} (pid {pid}) exited with {code}");
            println!(
                "exec: frames not given back: {}, frames still shared: {}",
                given_back_before as isize - given_back() as isize,
                crate::memory::shared_frames::shared_count()
            );
            if code == 0 {
                QemuExitCode::Success
            } else {
                QemuExitCode::Failure
            }
        }
        Err(errno) => {
            println!("exec: cannot start {name}: {errno:?}");
            QemuExitCode::Failure
        }
    }
}
