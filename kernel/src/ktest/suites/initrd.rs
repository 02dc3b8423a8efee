//! In-kernel test of the real boot ramdisk: the bootloader loaded it and
//! it holds every program. (The archive reader's checks, on archives built
//! entry by entry, are host tests: `kernel/src/initrd/tests.rs`.)

use alloc::vec::Vec;

use crate::framework::TestResult;
use crate::{check, require_some};

pub fn boot_ramdisk_has_the_programs() -> TestResult {
    let initrd = require_some!(kernel::initrd::get(), "the boot ramdisk was not set up");
    for program in ["hello", "exit_code", "threads", "fault", "syscall_errors"] {
        let contents = require_some!(initrd.find(program), "no {program} in the ramdisk");
        check!(
            contents.starts_with(b"\x7fELF"),
            "{program} is not an ELF file"
        );
    }
    let names: Vec<&str> = initrd.names().collect();
    check!(
        names.is_sorted_by(|a, b| a < b),
        "the build writes the programs sorted by name: {names:?}"
    );
    Ok(())
}
