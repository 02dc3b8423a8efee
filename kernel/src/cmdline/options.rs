//! The table of options: every knob of the kernel, with the values it
//! takes and how it changes [`Options`]. [`parse`](super::parse) looks each
//! word up here, and a rejected command line lists this table.

use alloc::{string::String, vec::Vec};

use super::{MAX_QUARANTINE_FRAMES, Options, Workload};
use crate::{
    profile,
    tlb_mode::{BUGS, ModeRequest},
    vm_bug::VM_BUGS,
    vm_lock::VM_LOCKS,
};

/// One known option: its name, what values it takes, and how it applies.
pub(super) struct OptionSpec {
    pub(super) name: &'static str,
    pub(super) values: &'static str,
    pub(super) apply: fn(&mut Options, &str) -> Result<(), ()>,
}

pub(super) const OPTIONS: &[OptionSpec] = &[
    OptionSpec {
        name: "run",
        values: "demo | tests | list",
        apply: apply_run,
    },
    OptionSpec {
        name: "test",
        values: "comma-separated name filters (implies run=tests)",
        apply: apply_test,
    },
    OptionSpec {
        name: "log",
        values: "off | error | warn | info | debug | trace",
        apply: apply_log,
    },
    OptionSpec {
        name: "tlb",
        values: "auto | ipi | broadcast-sw | invlpgb",
        apply: apply_tlb_mode,
    },
    OptionSpec {
        name: "tlb.promote",
        values: "CPUs an address space must run on at once to get a global ASID (2-256, default 4)",
        apply: apply_tlb_promote,
    },
    OptionSpec {
        name: "tlb.trace",
        values: "on | off: print every flush decision",
        apply: apply_tlb_trace,
    },
    OptionSpec {
        name: "tlb.timeline",
        values: "on | off | N: record each CPU's part in every shootdown and print it at the end (the runner's --timeline draws it); N events per CPU (16-1048576), on is 4096",
        apply: apply_tlb_timeline,
    },
    OptionSpec {
        name: "tlb.batch",
        values: "on | off: PAGEOUT flushes once per call (deferred batch) or once per page",
        apply: apply_tlb_batch,
    },
    OptionSpec {
        name: "tlb.switch-delay",
        values: "microseconds each switch into another address space waits after reading its generation (0-1000, default 0), to widen the window of the skip-switching and generation-before-cpuset bugs",
        apply: apply_tlb_switch_delay,
    },
    OptionSpec {
        name: "frames.quarantine",
        values: "how many freed user frames wait before reuse (0-65536, default 0), so that a stale translation keeps reading the old data",
        apply: apply_frames_quarantine,
    },
    OptionSpec {
        name: "tlb.asids",
        values: "how many global ASIDs exist (1-2000; fewer to test exhaustion)",
        apply: apply_tlb_asids,
    },
    OptionSpec {
        name: "tlb.pcid",
        values: "on | off: use PCIDs when the CPU has them (off also rules out INVLPGB)",
        apply: apply_tlb_pcid,
    },
    OptionSpec {
        name: "tlb.bug",
        values: "a deliberate bug to watch the tests catch it (see tlb::BUGS)",
        apply: apply_tlb_bug,
    },
    OptionSpec {
        name: "vm.bug",
        values: "kernel-write-skips-cow (Dirty COW, caught by cowdirty) | fill-busy-entry | \
                 racy-table-install (both caught by vmstress): a deliberately broken address-space operation",
        apply: apply_vm_bug,
    },
    OptionSpec {
        name: "vm.lock",
        values: "fine (default: shared faults and discards, flushes outside the lock, blocking waits) | \
                 coarse (one spinning lock held across every shootdown, for comparison)",
        apply: apply_vm_lock,
    },
    OptionSpec {
        name: "ipi.wait",
        values: "halt (default: a CPU waiting for cross-call answers spins briefly, then halts until \
                 the last one wakes it) | spin (it spins until answered, for comparison)",
        apply: apply_ipi_wait,
    },
    OptionSpec {
        name: "syscall.unknown",
        values: "quiet (default) | log: name each system call a program makes that this kernel \
                 does not offer, and the program, in the log (it still gets ENOSYS)",
        apply: apply_syscall_unknown,
    },
    OptionSpec {
        name: "profile",
        values: "off | on (1000 samples a second per CPU) | a rate in Hz (100-10000, a multiple of 100): \
                 sample every CPU and print where the time went",
        apply: apply_profile,
    },
    OptionSpec {
        name: "exec",
        values: "program[:arg,arg,...] from the ramdisk (commas become spaces)",
        apply: apply_exec,
    },
];

fn apply_tlb_mode(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.mode = match value {
        "auto" => ModeRequest::Auto,
        "ipi" => ModeRequest::Ipi,
        "broadcast-sw" => ModeRequest::BroadcastSoftware,
        "invlpgb" => ModeRequest::Invlpgb,
        _ => return Err(()),
    };
    Ok(())
}

fn apply_tlb_promote(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.promotion_threshold = value
        .parse()
        .ok()
        .filter(|cpus| (2..=mm::MAX_CPUS).contains(cpus))
        .ok_or(())?;
    Ok(())
}

fn on_off(value: &str) -> Result<bool, ()> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(()),
    }
}

fn apply_tlb_trace(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.trace = on_off(value)?;
    Ok(())
}

fn apply_tlb_timeline(options: &mut Options, value: &str) -> Result<(), ()> {
    use crate::timeline::{CAPACITIES, DEFAULT_CAPACITY};
    options.tlb.timeline = match value {
        "on" => Some(DEFAULT_CAPACITY),
        "off" => None,
        _ => Some(
            value
                .parse()
                .ok()
                .filter(|events| CAPACITIES.contains(events))
                .ok_or(())?,
        ),
    };
    Ok(())
}

fn apply_tlb_batch(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.batch_reclaim = on_off(value)?;
    Ok(())
}

fn apply_tlb_pcid(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.pcid = on_off(value)?;
    Ok(())
}

fn apply_tlb_asids(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.global_asids = Some(
        value
            .parse()
            .ok()
            .filter(|count| (1..=2000).contains(count))
            .ok_or(())?,
    );
    Ok(())
}

fn apply_tlb_switch_delay(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.switch_delay_us = value.parse().ok().filter(|&us| us <= 1000).ok_or(())?;
    Ok(())
}

fn apply_frames_quarantine(options: &mut Options, value: &str) -> Result<(), ()> {
    options.quarantine_frames = value
        .parse()
        .ok()
        .filter(|&count| count <= MAX_QUARANTINE_FRAMES)
        .ok_or(())?;
    Ok(())
}

/// The entry named `value` of a table of names (`tlb.bug=`, `vm.bug=`,
/// `vm.lock=`).
fn entry_named<Entry: Copy>(table: &[(&str, Entry)], value: &str) -> Result<Entry, ()> {
    table
        .iter()
        .find(|(name, _)| *name == value)
        .map(|&(_, entry)| entry)
        .ok_or(())
}

fn apply_tlb_bug(options: &mut Options, value: &str) -> Result<(), ()> {
    options.tlb.bug = Some(entry_named(BUGS, value)?);
    Ok(())
}

fn apply_vm_bug(options: &mut Options, value: &str) -> Result<(), ()> {
    options.vm_bug = Some(entry_named(VM_BUGS, value)?);
    Ok(())
}

fn apply_vm_lock(options: &mut Options, value: &str) -> Result<(), ()> {
    options.vm_lock = entry_named(VM_LOCKS, value)?;
    Ok(())
}

fn apply_ipi_wait(options: &mut Options, value: &str) -> Result<(), ()> {
    options.ipi_halt = match value {
        "halt" => true,
        "spin" => false,
        _ => return Err(()),
    };
    Ok(())
}

fn apply_syscall_unknown(options: &mut Options, value: &str) -> Result<(), ()> {
    options.log_unknown_syscalls = match value {
        "log" => true,
        "quiet" => false,
        _ => return Err(()),
    };
    Ok(())
}

fn apply_profile(options: &mut Options, value: &str) -> Result<(), ()> {
    options.profile_hz = match value {
        "off" => None,
        "on" => Some(profile::DEFAULT_HZ),
        rate => Some(
            rate.parse()
                .ok()
                .filter(|hz| (profile::MIN_HZ..=profile::MAX_HZ).contains(hz))
                .filter(|hz| hz % profile::MIN_HZ == 0)
                .ok_or(())?,
        ),
    };
    Ok(())
}

fn apply_exec(options: &mut Options, value: &str) -> Result<(), ()> {
    let (name, args) = value.split_once(':').unwrap_or((value, ""));
    if name.is_empty() {
        return Err(());
    }
    options.workload = Workload::Program;
    options.program = Some((String::from(name), args.replace(',', " ")));
    Ok(())
}

fn apply_run(options: &mut Options, value: &str) -> Result<(), ()> {
    options.workload = match value {
        "demo" => Workload::Demo,
        "tests" => Workload::Tests,
        "list" => Workload::ListTests,
        _ => return Err(()),
    };
    Ok(())
}

fn apply_test(options: &mut Options, value: &str) -> Result<(), ()> {
    let filters: Vec<String> = value.split(',').map(String::from).collect();
    if filters.iter().any(String::is_empty) {
        return Err(());
    }
    options.workload = Workload::Tests;
    options.test_filters = filters;
    Ok(())
}

fn apply_log(options: &mut Options, value: &str) -> Result<(), ()> {
    options.log_level = value.parse().map_err(|_| ())?;
    Ok(())
}
