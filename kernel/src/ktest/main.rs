//! The `kernel-tests` image: the kernel with its in-kernel test suites, as
//! `cargo test` boots it (and `cargo run` does for `run=tests`, `run=list`
//! and `test=`). The kernel itself is the same library the `kernel` image
//! runs; only this binary links the tests, so that image has none.
//!
//! - [`framework`]: registration, selection, and the line-based report the
//!   host parses;
//! - `macros`: `check!`, `check_eq!`, `require_ok!` and `require_some!`;
//! - `suites/`: one file per area; every `pub fn name() -> TestResult` in
//!   `suites/area.rs` is the test `area::name` (collected by `build.rs`).

#![no_std]
#![no_main]
#![forbid(unsafe_code)]

extern crate alloc;

mod framework;
mod macros;

/// The suites, one module per file of `src/ktest/suites/`, and their tests.
mod suites {
    include!(concat!(env!("OUT_DIR"), "/suites.rs"));
}

use alloc::string::{String, ToString};

use kernel::boot::TestImage;

static TESTS: TestImage = TestImage {
    run: run_tests,
    list: framework::list,
    report_abort: framework::report_abort,
};

fn run_tests(filters: &[String]) -> Result<bool, String> {
    framework::run(filters).map_err(|unmatched| unmatched.to_string())
}

fn main(boot_info: &'static mut bootloader_api::BootInfo) -> ! {
    kernel::boot::kernel_main(boot_info, Some(&TESTS))
}

// As in the `kernel` image: the macro's exported `_start` symbol is the
// bootloader crate's code, not this crate's.
bootloader_api::entry_point!(main, config = &kernel::boot::BOOTLOADER_CONFIG);
