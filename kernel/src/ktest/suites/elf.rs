//! In-kernel tests of the ELF parser on the real programs of the boot
//! ramdisk: each is valid, and damaged copies fail cleanly. (The parser's
//! rules, on hand-made files, are host tests: `kernel/src/elf/tests.rs`.)

use alloc::vec::Vec;

use abi::USER_IMAGE_BASE;
use kernel::elf::{Elf, HEADER_LEN, PROGRAM_HEADER_LEN};

use crate::framework::TestResult;
use crate::{check, require_ok, require_some};

/// Where an ELF64 file header keeps its program-header count.
const PHNUM: usize = 56;

/// Every prefix of a real program and every single-byte change to its
/// headers gives a result, not a panic; a prefix that cuts into a
/// segment's file bytes is an error.
pub fn damaged_programs_fail_cleanly() -> TestResult {
    let initrd = require_some!(kernel::initrd::get(), "the boot ramdisk was not set up");
    let hello = require_some!(initrd.find("hello"), "no hello in the ramdisk");
    let elf = require_ok!(Elf::parse(hello));
    let data_end = elf
        .segments()
        .map(|segment| segment.file_offset + segment.file_size)
        .max()
        .unwrap_or(0) as usize;
    for len in 0..hello.len() {
        let result = Elf::parse(&hello[..len]);
        check!(
            result.is_err() == (len < data_end),
            "prefix of {len} bytes: {result:?}"
        );
    }
    let header_count = usize::from(u16::from_le_bytes([hello[PHNUM], hello[PHNUM + 1]]));
    let headers_end = HEADER_LEN + header_count * PROGRAM_HEADER_LEN;
    let mut copy = Vec::from(hello);
    for at in 0..headers_end.min(copy.len()) {
        for flip in [0x01, 0x80, 0xff] {
            copy[at] ^= flip;
            // Only the absence of a panic matters here.
            let _ = Elf::parse(&copy);
            copy[at] ^= flip;
        }
    }
    Ok(())
}

pub fn boot_programs_are_valid() -> TestResult {
    let initrd = require_some!(kernel::initrd::get(), "the boot ramdisk was not set up");
    for (name, contents) in initrd.files() {
        let parsed = Elf::parse(contents);
        check!(parsed.is_ok(), "{name}: {parsed:?}");
        let elf = require_ok!(parsed);
        check!(
            elf.segments()
                .all(|segment| segment.vaddr >= USER_IMAGE_BASE),
            "{name} loads below the user image base"
        );
        let code = elf.segments().find(|segment| segment.contains(elf.entry()));
        let code = require_some!(code, "{name}'s entry is in no segment");
        check!(
            code.flags.execute,
            "{name}'s entry segment is not executable"
        );
    }
    check!(initrd.find("hello").is_some(), "no hello in the ramdisk");
    Ok(())
}
