//! Host tests of the parser.

use alloc::{string::String, vec};

use super::{CmdlineError, Options, Workload, parse};
use crate::tlb_mode::{ModeRequest, TlbOptions};

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
        })
    );
    let tlb =
        parse("tlb=broadcast-sw tlb.promote=3 tlb.trace=on tlb.batch=off tlb.asids=2 tlb.pcid=off")
            .map(|o| o.tlb);
    assert_eq!(
        tlb,
        Ok(TlbOptions {
            mode: ModeRequest::BroadcastSoftware,
            promotion_threshold: 3,
            trace: true,
            batch_reclaim: false,
            global_asids: Some(2),
            pcid: false,
            bug: None,
        })
    );
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
