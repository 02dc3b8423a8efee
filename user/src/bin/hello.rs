//! The smallest user program: greets, says who and where it is, exits 0.
//!
//! `hello a b` prints `hello from ring 3: args='a b'`, then its process id
//! and the CPU it runs on.

#![no_std]
#![no_main]

use user::{println, sys};

user::entry!(main);

fn main(args: &str) -> i32 {
    println!("hello from ring 3: args='{args}'");
    let pid = sys::getpid().expect("getpid");
    let cpu = sys::cpu_id().expect("cpu_id");
    println!("hello: pid {pid} on cpu {cpu}");
    0
}
