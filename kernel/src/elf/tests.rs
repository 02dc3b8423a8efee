//! Host tests of the ELF parser: hand-made files broken one field at a
//! time. (The real programs of the boot ramdisk, and damaged copies of one,
//! are checked in the kernel: `src/ktest/suites/elf.rs`.)

use std::vec::Vec;

use abi::{USER_END, USER_IMAGE_BASE};

use super::{Elf, ElfError, HEADER_LEN, PF_R, PF_W, PF_X, PROGRAM_HEADER_LEN, PT_LOAD};

/// A program header, as the tests write it.
#[derive(Clone, Copy)]
struct Header {
    kind: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    file_size: u64,
    mem_size: u64,
    align: u64,
}

const TEXT: Header = Header {
    kind: PT_LOAD,
    flags: PF_R | PF_X,
    offset: 0x1000,
    vaddr: 0x40_0000,
    file_size: 0x100,
    mem_size: 0x100,
    align: 0x1000,
};

const DATA: Header = Header {
    flags: PF_R | PF_W,
    offset: 0x1100,
    vaddr: 0x40_1100,
    file_size: 0x10,
    mem_size: 0x2000,
    ..TEXT
};

/// `PT_GNU_STACK`: not loaded, must be skipped.
const STACK: Header = Header {
    kind: 0x6474_e551,
    flags: PF_R | PF_W,
    offset: 0,
    vaddr: 0,
    file_size: 0,
    mem_size: 0,
    align: 16,
};

const ENTRY: u64 = 0x40_0010;

const FILE_LEN: usize = 0x1200;

/// Byte offsets of header fields the tests break.
const TYPE: usize = 16;

const MACHINE: usize = 18;

const PHOFF: usize = 32;

const PHENTSIZE: usize = 54;

const PHNUM: usize = 56;

/// A file with an x86-64 ELF header, `headers` right after it and
/// distinct bytes everywhere else.
fn file(entry: u64, headers: &[Header]) -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..FILE_LEN).map(|i| i as u8).collect();
    bytes[..HEADER_LEN].fill(0);
    bytes[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
    put(&mut bytes, TYPE, &2u16.to_le_bytes());
    put(&mut bytes, MACHINE, &62u16.to_le_bytes());
    put(&mut bytes, 20, &1u32.to_le_bytes());
    put(&mut bytes, 24, &entry.to_le_bytes());
    put(&mut bytes, PHOFF, &(HEADER_LEN as u64).to_le_bytes());
    put(&mut bytes, 52, &(HEADER_LEN as u16).to_le_bytes());
    put(
        &mut bytes,
        PHENTSIZE,
        &(PROGRAM_HEADER_LEN as u16).to_le_bytes(),
    );
    put(&mut bytes, PHNUM, &(headers.len() as u16).to_le_bytes());
    for (index, header) in headers.iter().enumerate() {
        let at = HEADER_LEN + index * PROGRAM_HEADER_LEN;
        put(&mut bytes, at, &header.kind.to_le_bytes());
        put(&mut bytes, at + 4, &header.flags.to_le_bytes());
        put(&mut bytes, at + 8, &header.offset.to_le_bytes());
        put(&mut bytes, at + 16, &header.vaddr.to_le_bytes());
        put(&mut bytes, at + 24, &header.vaddr.to_le_bytes());
        put(&mut bytes, at + 32, &header.file_size.to_le_bytes());
        put(&mut bytes, at + 40, &header.mem_size.to_le_bytes());
        put(&mut bytes, at + 48, &header.align.to_le_bytes());
    }
    bytes
}

fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
    bytes[at..at + value.len()].copy_from_slice(value);
}

fn good() -> Vec<u8> {
    file(ENTRY, &[TEXT, STACK, DATA])
}

#[test]
fn parses_a_small_program() {
    let bytes = good();
    let elf =
        Elf::parse(&bytes).unwrap_or_else(|error| panic!("Elf::parse(&bytes) failed: {error}"));
    assert_eq!(elf.entry(), ENTRY);
    let segments: Vec<_> = elf.segments().collect();
    assert_eq!(segments.len(), 2, "PT_GNU_STACK is not loaded");
    let (text, data) = (segments[0], segments[1]);
    assert_eq!(
        (text.vaddr, text.mem_size, text.file_size),
        (0x40_0000, 0x100, 0x100)
    );
    assert_eq!((text.file_offset, text.align), (0x1000, 0x1000));
    assert!(text.flags.read && text.flags.execute && !text.flags.write);
    assert_eq!(text.data, &bytes[0x1000..0x1100]);
    assert_eq!(
        (data.vaddr, data.end(), data.file_size),
        (0x40_1100, 0x40_3100, 0x10)
    );
    assert!(data.flags.read && data.flags.write && !data.flags.execute);
    assert_eq!(data.data, &bytes[0x1100..0x1110]);
}

#[test]
fn rejects_bad_headers() {
    assert_eq!(Elf::parse(&[]).err(), Some(ElfError::TooShort { len: 0 }));
    assert_eq!(
        Elf::parse(&good()[..HEADER_LEN - 1]).err(),
        Some(ElfError::TooShort {
            len: HEADER_LEN - 1
        })
    );
    let cases: [(usize, &[u8], ElfError); 12] = [
        (0, b"\x7fELV", ElfError::BadMagic),
        (4, &[1], ElfError::NotElf64 { class: 1 }),
        (5, &[2], ElfError::NotLittleEndian { data: 2 }),
        (6, &[0], ElfError::BadVersion),
        (20, &[2, 0, 0, 0], ElfError::BadVersion),
        (TYPE, &[3, 0], ElfError::NotExecutable { elf_type: 3 }),
        (TYPE, &[1, 0], ElfError::NotExecutable { elf_type: 1 }),
        (MACHINE, &[3, 0], ElfError::WrongMachine { machine: 3 }),
        (
            PHENTSIZE,
            &[32, 0],
            ElfError::BadProgramHeaderSize { size: 32 },
        ),
        (
            PHOFF,
            &(FILE_LEN as u64).to_le_bytes(),
            ElfError::ProgramHeadersOutOfBounds,
        ),
        (
            PHOFF,
            &u64::MAX.to_le_bytes(),
            ElfError::ProgramHeadersOutOfBounds,
        ),
        (
            PHNUM,
            &u16::MAX.to_le_bytes(),
            ElfError::ProgramHeadersOutOfBounds,
        ),
    ];
    for (at, value, expected) in cases {
        let mut bytes = good();
        put(&mut bytes, at, value);
        assert_eq!(
            Elf::parse(&bytes).err(),
            Some(expected),
            "{value:x?} at byte {at}"
        );
    }
}

/// `DATA` changed by `change` is rejected with `expected` (it is
/// program header 2).
fn check_data(change: impl FnOnce(&mut Header), expected: ElfError) {
    let mut data = DATA;
    change(&mut data);
    assert_eq!(
        Elf::parse(&file(ENTRY, &[TEXT, STACK, data])).err(),
        Some(expected)
    );
}

#[test]
fn rejects_bad_segments() {
    let index = 2;
    check_data(
        |h| h.file_size = 0x101,
        ElfError::SegmentOutOfFile { index },
    );
    check_data(
        |h| h.offset = u64::MAX,
        ElfError::SegmentOutOfFile { index },
    );
    check_data(
        |h| h.mem_size = 8,
        ElfError::FileSizeExceedsMemSize { index },
    );
    check_data(|h| h.mem_size = u64::MAX, ElfError::SegmentWraps { index });
    check_data(|h| h.vaddr = u64::MAX - 8, ElfError::SegmentWraps { index });
    let outside = ElfError::SegmentOutsideUserSpace { index };
    check_data(|h| h.vaddr = USER_IMAGE_BASE - 0x1000, outside);
    check_data(|h| h.vaddr = USER_END - 0x1000, outside);
    check_data(|h| h.vaddr = 0xffff_ffff_8000_0000, outside);
    check_data(|h| h.align = 0x1001, ElfError::BadAlignment { index });
    check_data(
        |h| h.flags |= PF_X,
        ElfError::WritableAndExecutable { index },
    );
    // A non-executable entry point, or one outside every segment.
    assert_eq!(
        Elf::parse(&file(0x40_1100, &[TEXT, DATA])).err(),
        Some(ElfError::EntryNotExecutable { entry: 0x40_1100 })
    );
    assert_eq!(
        Elf::parse(&file(0x40_0100, &[TEXT, DATA])).err(),
        Some(ElfError::EntryNotExecutable { entry: 0x40_0100 })
    );
}

#[test]
fn rejects_bad_layouts() {
    let index = 2;
    // Overlapping, sharing the text's page, and out of order.
    check_data(
        |h| h.vaddr = 0x40_0080,
        ElfError::OverlapsPrevious { index },
    );
    check_data(
        |h| h.vaddr = 0x40_0800,
        ElfError::OverlapsPrevious { index },
    );
    assert_eq!(
        Elf::parse(&file(ENTRY, &[DATA, TEXT])).err(),
        Some(ElfError::OverlapsPrevious { index: 1 })
    );
    // The next page is fine.
    assert!(
        Elf::parse(&file(
            ENTRY,
            &[
                TEXT,
                Header {
                    vaddr: 0x40_1000,
                    ..DATA
                }
            ]
        ))
        .is_ok()
    );
    assert_eq!(
        Elf::parse(&file(ENTRY, &[STACK])).err(),
        Some(ElfError::NoLoadableSegment)
    );
}
