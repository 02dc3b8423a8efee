//! Host tests of the parser.

use alloc::{string::String, vec, vec::Vec};

use super::{
    CmdlineError, Options, SLOT_CAPACITY, SLOT_END, SLOT_START, Workload, find_in_slot, parse,
};
use crate::{
    tlb_mode::{ModeRequest, TlbOptions},
    vm_bug::VmBug,
    vm_lock::VmLock,
};

#[test]
fn empty_means_defaults() {
    assert_eq!(parse(""), Ok(Options::default()));
    assert_eq!(parse("   "), Ok(Options::default()));
}

#[test]
fn parses_every_option() {
    let options = parse("log=debug  test=frames::,heap");
    assert_eq!(
        options,
        Ok(Options {
            workload: Workload::Tests,
            test_filters: vec![String::from("frames::"), String::from("heap")],
            log_level: log::LevelFilter::Debug,
            program: None,
            tlb: TlbOptions::default(),
            profile_hz: None,
            quarantine_frames: 0,
            vm_bug: None,
            vm_lock: VmLock::Fine,
            ipi_halt: true,
            log_unknown_syscalls: false,
        })
    );
    let quarantine = |line| parse(line).map(|options| options.quarantine_frames);
    assert_eq!(quarantine("frames.quarantine=4096"), Ok(4096));
    assert_eq!(quarantine("frames.quarantine=0"), Ok(0));
    assert!(quarantine("frames.quarantine=65537").is_err());
    assert!(quarantine("frames.quarantine=-1").is_err());
    let vm_bug = |line| parse(line).map(|options| options.vm_bug);
    assert_eq!(
        vm_bug("vm.bug=kernel-write-skips-cow"),
        Ok(Some(VmBug::KernelWriteSkipsCopyOnWrite))
    );
    assert_eq!(
        vm_bug("vm.bug=racy-table-install"),
        Ok(Some(VmBug::RacyTableInstall))
    );
    assert_eq!(
        vm_bug("vm.bug=fill-busy-entry"),
        Ok(Some(VmBug::FillBusyEntry))
    );
    assert!(vm_bug("vm.bug=no-such-bug").is_err());
    let vm_lock = |line| parse(line).map(|options| options.vm_lock);
    assert_eq!(vm_lock("vm.lock=coarse"), Ok(VmLock::Coarse));
    assert_eq!(vm_lock("vm.lock=fine"), Ok(VmLock::Fine));
    assert!(vm_lock("vm.lock=medium").is_err());
    let ipi_halt = |line| parse(line).map(|options| options.ipi_halt);
    assert_eq!(ipi_halt(""), Ok(true));
    assert_eq!(ipi_halt("ipi.wait=spin"), Ok(false));
    assert_eq!(ipi_halt("ipi.wait=halt"), Ok(true));
    assert!(ipi_halt("ipi.wait=doze").is_err());
    let log_unknown = |line| parse(line).map(|options| options.log_unknown_syscalls);
    assert_eq!(log_unknown(""), Ok(false));
    assert_eq!(log_unknown("syscall.unknown=log"), Ok(true));
    assert_eq!(log_unknown("syscall.unknown=quiet"), Ok(false));
    assert!(log_unknown("syscall.unknown=loud").is_err());
    let profile = |line| parse(line).map(|options| options.profile_hz);
    assert_eq!(profile("profile=on"), Ok(Some(1000)));
    assert_eq!(profile("profile=4000"), Ok(Some(4000)));
    assert_eq!(profile("profile=off"), Ok(None));
    let tlb =
        parse("tlb=broadcast-sw tlb.promote=3 tlb.trace=on tlb.timeline=on tlb.batch=off tlb.asids=2 tlb.pcid=off")
            .map(|o| o.tlb);
    assert_eq!(
        tlb,
        Ok(TlbOptions {
            mode: ModeRequest::BroadcastSoftware,
            promotion_threshold: 3,
            trace: true,
            timeline: Some(4096),
            batch_reclaim: false,
            global_asids: Some(2),
            pcid: false,
            bug: None,
            switch_delay_us: 0,
        })
    );
    let timeline = |line| parse(line).map(|options| options.tlb.timeline);
    assert_eq!(timeline("tlb.timeline=off"), Ok(None));
    assert_eq!(timeline(""), Ok(None));
    assert_eq!(timeline("tlb.timeline=100000"), Ok(Some(100_000)));
    assert_eq!(timeline("tlb.timeline=16"), Ok(Some(16)));
    for refused in ["yes", "15", "1048577", "-1", "0x100"] {
        let line = alloc::format!("tlb.timeline={refused}");
        assert!(parse(&line).is_err(), "{line}");
    }
    let delay = |line| parse(line).map(|options| options.tlb.switch_delay_us);
    assert_eq!(delay("tlb.switch-delay=50"), Ok(50));
    assert!(delay("tlb.switch-delay=1001").is_err());
    assert!(delay("tlb.switch-delay=x").is_err());
    let exec = parse("exec=threads:4,2").map(|options| (options.workload, options.program));
    assert_eq!(
        exec,
        Ok((
            Workload::Program,
            Some((String::from("threads"), String::from("4 2")))
        ))
    );
    assert_eq!(
        parse("run=list").map(|options| options.workload),
        Ok(Workload::ListTests)
    );
}

#[test]
fn rejects_bad_input() {
    assert_eq!(
        parse("bogus=1"),
        Err(CmdlineError::UnknownOption(String::from("bogus=1")))
    );
    assert_eq!(parse("run"), Err(CmdlineError::MissingValue("run")));
    assert_eq!(parse("run="), Err(CmdlineError::MissingValue("run")));
    assert_eq!(
        parse("run=fast"),
        Err(CmdlineError::BadValue {
            option: "run",
            value: String::from("fast")
        })
    );
    assert_eq!(
        parse("test=a,,b"),
        Err(CmdlineError::BadValue {
            option: "test",
            value: String::from("a,,b")
        })
    );
    for rate in ["0", "50", "150", "20000", "fast", "-100"] {
        assert_eq!(
            parse(&alloc::format!("profile={rate}")),
            Err(CmdlineError::BadValue {
                option: "profile",
                value: String::from(rate)
            }),
            "profile={rate}"
        );
    }
    assert_eq!(
        parse("log=info log=debug"),
        Err(CmdlineError::Repeated("log"))
    );
}

#[test]
fn error_lists_known_options() {
    let message = alloc::format!("{}", CmdlineError::UnknownOption(String::from("tlb=magic")));
    assert!(
        message.contains("unknown option 'tlb=magic'"),
        "message was: {message}"
    );
    assert!(message.contains("run=<") && message.contains("test=<") && message.contains("log=<"));
}

/// A file with `junk` bytes, then a slot holding `line`, then more junk.
fn file_with_slot(junk: usize, line: &[u8]) -> Vec<u8> {
    let mut file = vec![0xcc; junk];
    file.extend_from_slice(&SLOT_START);
    let mut field = vec![0; SLOT_CAPACITY];
    field[..line.len()].copy_from_slice(line);
    file.extend_from_slice(&field);
    file.extend_from_slice(&SLOT_END);
    file.extend_from_slice(&[0xcc; 7]);
    file
}

#[test]
fn the_slot_holds_the_command_line_up_to_the_first_nul() {
    assert_eq!(
        find_in_slot(&file_with_slot(33, b"exec=coherence:50,2")),
        Some(&b"exec=coherence:50,2"[..])
    );
    assert_eq!(find_in_slot(&file_with_slot(0, b"")), Some(&b""[..]));
    let full = vec![b'x'; SLOT_CAPACITY];
    assert_eq!(find_in_slot(&file_with_slot(1, &full)), Some(&full[..]));
}

#[test]
fn a_marker_without_its_partner_is_no_slot() {
    assert_eq!(find_in_slot(b"no slot here"), None);
    // The start marker alone, or the end marker in the wrong place.
    let mut file = file_with_slot(5, b"log=debug");
    file.truncate(file.len() - 8);
    assert_eq!(find_in_slot(&file), None);
    let mut file = SLOT_START.to_vec();
    file.extend_from_slice(&SLOT_END);
    assert_eq!(find_in_slot(&file), None);
    // The runner's copy is the first complete slot; a stray start marker
    // before it does not hide it.
    let mut file = SLOT_START.to_vec();
    file.extend_from_slice(&file_with_slot(3, b"run=list"));
    assert_eq!(find_in_slot(&file), Some(&b"run=list"[..]));
}
