//! Two basic costs, measured from ring 3: a system-call round trip and a
//! context switch. Numbers under QEMU's TCG are emulator times, useful to
//! compare with each other, not with hardware.
//!
//! - syscall: `getpid` in a loop, each call timed with `clock`.
//! - context switch: two threads pinned to the same CPU `yield` to each
//!   other; one round trip (A yields, B runs and yields, A runs) is two
//!   switches.
//!
//! `latency [samples]` prints the median and p99 of each, in nanoseconds.

#![no_std]
#![no_main]

use user::{println, sys, thread};

user::entry!(main);

const MAX_SAMPLES: usize = 4096;

fn main(args: &str) -> i32 {
    let samples = args
        .trim()
        .parse::<usize>()
        .unwrap_or(2000)
        .clamp(16, MAX_SAMPLES);
    let mut times = [0u64; MAX_SAMPLES];

    for time in &mut times[..samples] {
        let start = sys::clock().unwrap_or(0);
        let _ = sys::getpid();
        *time = sys::clock().unwrap_or(0) - start;
    }
    report("syscall round trip (getpid)", &mut times[..samples], 1);

    if sys::set_affinity(0).is_err() {
        println!("latency: cannot pin to CPU 0");
        return 1;
    }
    let partner = thread::spawn(move || {
        let _ = sys::set_affinity(0);
        for _ in 0..samples + 1 {
            let _ = sys::yield_now();
        }
        0
    });
    let Ok(partner) = partner else {
        println!("latency: cannot start the partner thread");
        return 1;
    };
    for time in &mut times[..samples] {
        let start = sys::clock().unwrap_or(0);
        let _ = sys::yield_now();
        *time = sys::clock().unwrap_or(0) - start;
    }
    let _ = partner.join();
    report(
        "context switch (yield ping-pong, per switch)",
        &mut times[..samples],
        2,
    );
    0
}

/// Prints the median and p99 of `times`, each divided by `per`.
fn report(what: &str, times: &mut [u64], per: u64) {
    times.sort_unstable();
    let median = times[times.len() / 2] / per;
    let p99 = times[times.len() * 99 / 100] / per;
    println!(
        "latency: {what}: median {median} ns, p99 {p99} ns over {} samples",
        times.len()
    );
}
