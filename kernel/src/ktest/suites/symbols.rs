//! In-kernel tests of the kernel's own symbol table: a function of this
//! image is named from its address, and user addresses are not. (The
//! table reader, on a hand-made file, is a host test:
//! `kernel/src/symbols/tests.rs`.)

use alloc::format;

use kernel::symbols::lookup;

use crate::framework::TestResult;
use crate::{check, require_some};

pub fn names_a_function_from_its_address() -> TestResult {
    let function = names_a_function_from_its_address as *const () as u64;
    let symbol = require_some!(lookup(function + 3), "no symbol for {function:#x}");
    let shown = format!("{symbol}");
    check!(
        shown == "kernel_tests::suites::symbols::names_a_function_from_its_address+0x3",
        "{function:#x} + 3 was shown as '{shown}'"
    );
    Ok(())
}

pub fn addresses_outside_the_kernel_have_no_name() -> TestResult {
    for address in [0, 0x1000, 0x0000_7fff_ffff_f000] {
        check!(
            lookup(address).is_none(),
            "user address {address:#x} was given a kernel symbol"
        );
    }
    Ok(())
}
