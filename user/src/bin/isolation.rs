//! Processes cannot hurt each other: faults kill only the faulting process,
//! and two processes see different memory at the same address.
//!
//! `isolation` (no argument) starts two copies of itself in `guard` mode,
//! each writing its own pattern at the same fixed address and checking, for
//! a while, that it stays there; then, while the guards run, one `fault`
//! program per forbidden access: reading, writing and calling kernel memory,
//! writing a read-only page, executing a data page, and reading the guards'
//! address, where this process has nothing. It exits 0 only if every
//! faulting child was killed (exit code 139) and both guards finished intact.

#![no_std]
#![no_main]

use user::{
    abi::{MapFlags, PAGE_SIZE, Prot},
    println, sys,
};

user::entry!(main);

/// The address both guards map, in their own address spaces.
const SHARED_ADDRESS: u64 = 0x2000_0000_0000;
/// Exit code of a process the kernel killed for a fault.
const KILLED: i32 = 139;

fn main(args: &str) -> i32 {
    match args.split_once(' ') {
        Some(("guard", value)) => guard(value.parse().unwrap_or(0)),
        _ => supervise(),
    }
}

/// Writes `value` over a page at [`SHARED_ADDRESS`], lets the others run,
/// and checks the page still holds it.
fn guard(value: u8) -> i32 {
    // SAFETY: a fixed mapping in this process's own, otherwise unused range.
    let page = match unsafe {
        sys::mmap(
            SHARED_ADDRESS,
            PAGE_SIZE as usize,
            Prot::READ | Prot::WRITE,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED,
        )
    } {
        Ok(page) => page,
        Err(error) => {
            println!("guard {value}: mmap failed: {error:?}");
            return 2;
        }
    };
    // SAFETY: `page` is a fresh read-write page of PAGE_SIZE bytes.
    let bytes = unsafe { core::slice::from_raw_parts_mut(page, PAGE_SIZE as usize) };
    bytes.fill(value);
    for _ in 0..100 {
        let _ = sys::sleep(2_000_000);
        if bytes.iter().any(|&byte| byte != value) {
            println!("guard {value}: another process's data appeared at {SHARED_ADDRESS:#x}");
            return 1;
        }
    }
    0
}

fn supervise() -> i32 {
    let children = [
        ("isolation", "guard 170", 0),
        ("isolation", "guard 85", 0),
        ("fault", "kernel-read", KILLED),
        ("fault", "kernel-write", KILLED),
        ("fault", "kernel-exec", KILLED),
        ("fault", "write-ro", KILLED),
        ("fault", "exec-data", KILLED),
        ("fault", "peek", KILLED),
    ];
    let mut pids = [0u64; 8];
    for (pid, (program, args, _)) in pids.iter_mut().zip(children) {
        match sys::spawn(program, args) {
            Ok(child) => *pid = child,
            Err(error) => {
                println!("isolation: cannot spawn {program} {args}: {error:?}");
                return 1;
            }
        }
    }
    let mut failures = 0;
    for (pid, (program, args, expected)) in pids.into_iter().zip(children) {
        match sys::wait(pid) {
            Ok(code) if code == expected => {
                println!("isolation: {program} {args} exited with {code}, as expected")
            }
            outcome => {
                println!("isolation: {program} {args}: {outcome:?}, expected exit code {expected}");
                failures += 1;
            }
        }
    }
    println!("isolation: {failures} unexpected outcomes");
    failures
}
