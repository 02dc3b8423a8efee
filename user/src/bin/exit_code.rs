//! Exits with the code given as its argument: `exit_code 42` exits 42.
//! Checks that exit codes (negative ones too) reach whoever waits.

#![no_std]
#![no_main]

use user::println;

user::entry!(main);

/// The exit code for a missing or malformed argument.
const USAGE: i32 = 2;

fn main(args: &str) -> i32 {
    match args.trim().parse::<i32>() {
        Ok(code) => code,
        Err(_) => {
            println!("usage: exit_code <integer>, got '{args}'");
            USAGE
        }
    }
}
