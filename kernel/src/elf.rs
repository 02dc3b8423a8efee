//! Reading user programs: a checked view of an ELF64 executable.
//!
//! The loader needs three things from a program file: that it is a static
//! x86-64 executable, where to start it (the entry point), and which bytes
//! go where in memory (the `PT_LOAD` segments, each with its protection).
//! Nothing else (sections, symbols, dynamic linking) matters to it.
//!
//! Program files come from the ramdisk, and a process may one day name any
//! of them, so they are input, not trusted: [`Elf::parse`] checks every field
//! the loader will use before handing out anything, and a malformed file is
//! an [`ElfError`], never a panic, an out-of-bounds read or a mapping in the
//! wrong place.
//!
//! The `elf` crate (no_std, no allocation, no `unsafe`) decodes the format:
//! the identification bytes (magic, class, byte order, version), the file
//! header's fields and the program headers, with bounds checks on every
//! read. The kernel calls its file-header and program-header parsers
//! directly rather than its `ElfBytes` front end, because that one also
//! locates the section-header table, which the loader never reads: a
//! program whose section headers are stripped, truncated or damaged still
//! loads. What the crate cannot know is the kernel's policy, nor which
//! machine the kernel runs on, so the kernel checks those itself, each rule
//! with its own error:
//!
//! - the file is for this machine: 64-bit, little-endian, ELF version 1 in
//!   the header too, x86-64, program headers of the ELF64 size;
//! - the file is a fixed-address executable (`ET_EXEC`), not relocatable or
//!   position-independent: segments are placed exactly at their `p_vaddr`;
//! - each segment's file bytes lie inside the file, it has no more bytes in
//!   the file than in memory, its end does not wrap around, and its
//!   alignment is 0 or a power of two;
//! - every segment lies in the user half, from [`abi::USER_IMAGE_BASE`] to
//!   [`abi::USER_END`], so a program can never map over the kernel or over
//!   the unmapped low pages that catch null pointers;
//! - segments come in address order (as the ELF specification requires) and
//!   no two share a page, because the loader maps whole pages with one
//!   protection each; no segment is both writable and executable;
//! - the entry point lies in an executable segment.

use core::fmt;

use abi::{PAGE_SIZE, USER_END, USER_IMAGE_BASE};
// `::elf` is the crate; this module is `crate::elf`.
use ::elf::abi::{EI_CLASS, EI_NIDENT, EM_X86_64, ET_EXEC, EV_CURRENT, PF_R, PF_W, PF_X, PT_LOAD};
use ::elf::endian::LittleEndian;
use ::elf::file::{self, Class, Elf64_Ehdr, FileHeader};
use ::elf::parse::ParseError;
use ::elf::segment::{Elf64_Phdr, ProgramHeader, SegmentTable};

/// The size of the ELF64 file header.
const HEADER_LEN: usize = size_of::<Elf64_Ehdr>();
/// The size of one ELF64 program header.
const PROGRAM_HEADER_LEN: usize = size_of::<Elf64_Phdr>();

/// What is wrong with a program file; `index` numbers its program headers
/// from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElfError {
    /// Shorter than the ELF header.
    TooShort { len: usize },
    /// Does not start with `\x7fELF`.
    BadMagic,
    /// Not a 64-bit ELF file.
    NotElf64 { class: u8 },
    /// Not little-endian.
    NotLittleEndian { data: u8 },
    /// An ELF version other than 1 (in the identification or the header).
    BadVersion,
    /// Not a fixed-address executable (`ET_EXEC`): `ET_DYN` (PIE or shared
    /// library), `ET_REL` and the others need a relocating loader.
    NotExecutable { elf_type: u16 },
    /// Built for another processor.
    WrongMachine { machine: u16 },
    /// Program headers of an unexpected size.
    BadProgramHeaderSize { size: u16 },
    /// The program-header table runs past the end of the file.
    ProgramHeadersOutOfBounds,
    /// There is nothing to load.
    NoLoadableSegment,
    /// A segment's file bytes run past the end of the file.
    SegmentOutOfFile { index: usize },
    /// A segment has more bytes in the file than in memory.
    FileSizeExceedsMemSize { index: usize },
    /// A segment's end address wraps around.
    SegmentWraps { index: usize },
    /// A segment lies (partly) outside `USER_IMAGE_BASE..USER_END`.
    SegmentOutsideUserSpace { index: usize },
    /// A segment's alignment is neither 0 nor a power of two.
    BadAlignment { index: usize },
    /// A segment is both writable and executable.
    WritableAndExecutable { index: usize },
    /// A segment starts before the previous one's last page ends: out of
    /// address order, overlapping, or sharing a page.
    OverlapsPrevious { index: usize },
    /// The entry point is in no executable segment.
    EntryNotExecutable { entry: u64 },
}

impl fmt::Display for ElfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TooShort { len } => write!(f, "{len} bytes are too few for an ELF header"),
            Self::BadMagic => write!(f, "not an ELF file"),
            Self::NotElf64 { class } => write!(f, "ELF class {class}, not 64-bit"),
            Self::NotLittleEndian { data } => {
                write!(f, "ELF data encoding {data}, not little-endian")
            }
            Self::BadVersion => write!(f, "unknown ELF version"),
            Self::NotExecutable { elf_type } => {
                write!(
                    f,
                    "ELF type {elf_type}, not a fixed-address executable (ET_EXEC)"
                )
            }
            Self::WrongMachine { machine } => write!(f, "machine {machine}, not x86-64"),
            Self::BadProgramHeaderSize { size } => {
                write!(
                    f,
                    "program headers of {size} bytes, not {PROGRAM_HEADER_LEN}"
                )
            }
            Self::ProgramHeadersOutOfBounds => {
                write!(f, "program headers past the end of the file")
            }
            Self::NoLoadableSegment => write!(f, "no loadable segment"),
            Self::SegmentOutOfFile { index } => {
                write!(f, "segment {index}'s bytes run past the end of the file")
            }
            Self::FileSizeExceedsMemSize { index } => {
                write!(
                    f,
                    "segment {index} has more bytes in the file than in memory"
                )
            }
            Self::SegmentWraps { index } => write!(f, "segment {index} wraps around"),
            Self::SegmentOutsideUserSpace { index } => write!(
                f,
                "segment {index} is outside user memory ({USER_IMAGE_BASE:#x}..{USER_END:#x})"
            ),
            Self::BadAlignment { index } => {
                write!(f, "segment {index}'s alignment is not a power of two")
            }
            Self::WritableAndExecutable { index } => {
                write!(f, "segment {index} is writable and executable")
            }
            Self::OverlapsPrevious { index } => write!(
                f,
                "segment {index} is out of order or shares a page with the one before"
            ),
            Self::EntryNotExecutable { entry } => {
                write!(f, "entry point {entry:#x} is in no executable segment")
            }
        }
    }
}

/// A segment's protection (`p_flags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentFlags {
    pub read: bool,
    pub write: bool,
    pub execute: bool,
}

/// A `PT_LOAD` segment: `file_size` bytes of the file, at `file_offset`, go
/// to `vaddr`; the rest, up to `mem_size`, is zero (`.bss`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    pub vaddr: u64,
    pub mem_size: u64,
    pub file_size: u64,
    pub file_offset: u64,
    pub flags: SegmentFlags,
    /// `p_align`: 0 or a power of two (the loader, which copies, needs only
    /// page alignment of the addresses, which it applies itself).
    pub align: u64,
    /// The `file_size` bytes to copy to `vaddr`.
    pub data: &'a [u8],
}

impl Segment<'_> {
    /// One past the segment's last byte in memory.
    pub fn end(&self) -> u64 {
        // Checked by `Elf::parse`: below `USER_END`.
        self.vaddr + self.mem_size
    }

    /// Whether `addr` is inside the segment in memory.
    pub fn contains(&self, addr: u64) -> bool {
        (self.vaddr..self.end()).contains(&addr)
    }

    /// The first page the segment touches.
    fn first_page(&self) -> u64 {
        self.vaddr & !(PAGE_SIZE - 1)
    }

    /// One past the last page the segment touches.
    fn pages_end(&self) -> u64 {
        // Cannot wrap: `end() <= USER_END`, a page boundary.
        self.end().next_multiple_of(PAGE_SIZE)
    }
}

/// A checked ELF64 executable.
#[derive(Clone, Copy, Debug)]
pub struct Elf<'a> {
    bytes: &'a [u8],
    entry: u64,
    program_headers: SegmentTable<'a, LittleEndian>,
}

impl<'a> Elf<'a> {
    /// Checks the file in `bytes` against every rule in the module
    /// documentation.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ElfError> {
        // The crate's identification parser indexes its input: give it the
        // whole header or nothing.
        let too_short = ElfError::TooShort { len: bytes.len() };
        let header_bytes = bytes.get(..HEADER_LEN).ok_or(too_short)?;
        let ident =
            file::parse_ident::<LittleEndian>(header_bytes).map_err(|error| match error {
                ParseError::BadMagic(_) => ElfError::BadMagic,
                ParseError::UnsupportedElfClass(class) => ElfError::NotElf64 { class },
                ParseError::UnsupportedElfEndianness(data) => ElfError::NotLittleEndian { data },
                ParseError::UnsupportedVersion(_) => ElfError::BadVersion,
                // It reports nothing else (and reads only the first 16 bytes).
                _ => too_short,
            })?;
        if ident.1 != Class::ELF64 {
            return Err(ElfError::NotElf64 {
                class: header_bytes[EI_CLASS],
            });
        }
        // The 48 bytes after the identification are exactly what it reads.
        let header =
            FileHeader::parse_tail(ident, &header_bytes[EI_NIDENT..]).map_err(|_| too_short)?;
        if header.version != u32::from(EV_CURRENT) {
            return Err(ElfError::BadVersion);
        }
        if header.e_type != ET_EXEC {
            return Err(ElfError::NotExecutable {
                elf_type: header.e_type,
            });
        }
        if header.e_machine != EM_X86_64 {
            return Err(ElfError::WrongMachine {
                machine: header.e_machine,
            });
        }
        if usize::from(header.e_phentsize) != PROGRAM_HEADER_LEN {
            return Err(ElfError::BadProgramHeaderSize {
                size: header.e_phentsize,
            });
        }
        // `e_phnum` as it is: the extended count of PN_XNUM (in section
        // header 0) is for files with 65535 or more segments, not programs.
        let table_len = usize::from(header.e_phnum) * PROGRAM_HEADER_LEN;
        let table = usize::try_from(header.e_phoff)
            .ok()
            .and_then(|start| bytes.get(start..start.checked_add(table_len)?))
            .ok_or(ElfError::ProgramHeadersOutOfBounds)?;

        let elf = Self {
            bytes,
            entry: header.e_entry,
            program_headers: SegmentTable::new(LittleEndian, Class::ELF64, table),
        };
        let mut previous: Option<Segment<'a>> = None;
        let mut entry_is_executable = false;
        for (index, program_header) in elf.program_headers.iter().enumerate() {
            let Some(segment) = elf.load_segment(index, &program_header)? else {
                continue;
            };
            if previous.is_some_and(|previous| segment.first_page() < previous.pages_end()) {
                return Err(ElfError::OverlapsPrevious { index });
            }
            entry_is_executable |= segment.flags.execute && segment.contains(elf.entry);
            previous = Some(segment);
        }
        if previous.is_none() {
            return Err(ElfError::NoLoadableSegment);
        }
        if !entry_is_executable {
            return Err(ElfError::EntryNotExecutable { entry: elf.entry });
        }
        Ok(elf)
    }

    /// Where the program starts.
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// The `PT_LOAD` segments, in address order.
    pub fn segments(&self) -> impl Iterator<Item = Segment<'a>> + '_ {
        // `parse` checked every one, so none is dropped here; the table is a
        // whole number of headers, so the crate's iterator yields them all.
        self.program_headers
            .iter()
            .enumerate()
            .filter_map(|(index, header)| self.load_segment(index, &header).ok().flatten())
    }

    /// Checks program header `index`, as the crate decoded it: `None` if it
    /// is not a `PT_LOAD` segment (the loader ignores the other kinds).
    fn load_segment(
        &self,
        index: usize,
        header: &ProgramHeader,
    ) -> Result<Option<Segment<'a>>, ElfError> {
        if header.p_type != PT_LOAD {
            return Ok(None);
        }
        let flags = SegmentFlags {
            read: header.p_flags & PF_R != 0,
            write: header.p_flags & PF_W != 0,
            execute: header.p_flags & PF_X != 0,
        };
        let (file_offset, vaddr) = (header.p_offset, header.p_vaddr);
        let (file_size, mem_size, align) = (header.p_filesz, header.p_memsz, header.p_align);

        let data = file_offset
            .checked_add(file_size)
            .and_then(|end| {
                self.bytes
                    .get(usize::try_from(file_offset).ok()?..usize::try_from(end).ok()?)
            })
            .ok_or(ElfError::SegmentOutOfFile { index })?;
        if file_size > mem_size {
            return Err(ElfError::FileSizeExceedsMemSize { index });
        }
        let end = vaddr
            .checked_add(mem_size)
            .ok_or(ElfError::SegmentWraps { index })?;
        if vaddr < USER_IMAGE_BASE || end > USER_END {
            return Err(ElfError::SegmentOutsideUserSpace { index });
        }
        if align != 0 && !align.is_power_of_two() {
            return Err(ElfError::BadAlignment { index });
        }
        if flags.write && flags.execute {
            return Err(ElfError::WritableAndExecutable { index });
        }
        Ok(Some(Segment {
            vaddr,
            mem_size,
            file_size,
            file_offset,
            flags,
            align,
            data,
        }))
    }
}

pub mod tests {
    //! In-kernel tests of the ELF parser: hand-made files broken one field at
    //! a time, damaged copies of a real program, and the real programs of
    //! the boot ramdisk.

    use alloc::vec::Vec;

    use abi::{USER_END, USER_IMAGE_BASE};

    use super::{Elf, ElfError, HEADER_LEN, PF_R, PF_W, PF_X, PROGRAM_HEADER_LEN, PT_LOAD};
    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq, require_ok, require_some};

    pub const TESTS: &[Test] = &[
        Test::new("elf::parses_a_small_program", parses_a_small_program),
        Test::new("elf::rejects_bad_headers", rejects_bad_headers),
        Test::new("elf::rejects_bad_segments", rejects_bad_segments),
        Test::new("elf::rejects_bad_layouts", rejects_bad_layouts),
        Test::new(
            "elf::damaged_programs_fail_cleanly",
            damaged_programs_fail_cleanly,
        ),
        Test::new("elf::boot_programs_are_valid", boot_programs_are_valid),
    ];

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

    fn parses_a_small_program() -> TestResult {
        let bytes = good();
        let elf = require_ok!(Elf::parse(&bytes));
        check_eq!(elf.entry(), ENTRY);
        let segments: Vec<_> = elf.segments().collect();
        check_eq!(segments.len(), 2, "PT_GNU_STACK is not loaded");
        let (text, data) = (segments[0], segments[1]);
        check_eq!(
            (text.vaddr, text.mem_size, text.file_size),
            (0x40_0000, 0x100, 0x100)
        );
        check_eq!((text.file_offset, text.align), (0x1000, 0x1000));
        check!(text.flags.read && text.flags.execute && !text.flags.write);
        check_eq!(text.data, &bytes[0x1000..0x1100]);
        check_eq!(
            (data.vaddr, data.end(), data.file_size),
            (0x40_1100, 0x40_3100, 0x10)
        );
        check!(data.flags.read && data.flags.write && !data.flags.execute);
        check_eq!(data.data, &bytes[0x1100..0x1110]);
        Ok(())
    }

    fn rejects_bad_headers() -> TestResult {
        check_eq!(Elf::parse(&[]).err(), Some(ElfError::TooShort { len: 0 }));
        check_eq!(
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
            check_eq!(
                Elf::parse(&bytes).err(),
                Some(expected),
                "{value:x?} at byte {at}"
            );
        }
        Ok(())
    }

    /// `DATA` changed by `change` is rejected with `expected` (it is
    /// program header 2).
    fn check_data(change: impl FnOnce(&mut Header), expected: ElfError) -> TestResult {
        let mut data = DATA;
        change(&mut data);
        check_eq!(
            Elf::parse(&file(ENTRY, &[TEXT, STACK, data])).err(),
            Some(expected)
        );
        Ok(())
    }

    fn rejects_bad_segments() -> TestResult {
        let index = 2;
        check_data(
            |h| h.file_size = 0x101,
            ElfError::SegmentOutOfFile { index },
        )?;
        check_data(
            |h| h.offset = u64::MAX,
            ElfError::SegmentOutOfFile { index },
        )?;
        check_data(
            |h| h.mem_size = 8,
            ElfError::FileSizeExceedsMemSize { index },
        )?;
        check_data(|h| h.mem_size = u64::MAX, ElfError::SegmentWraps { index })?;
        check_data(|h| h.vaddr = u64::MAX - 8, ElfError::SegmentWraps { index })?;
        let outside = ElfError::SegmentOutsideUserSpace { index };
        check_data(|h| h.vaddr = USER_IMAGE_BASE - 0x1000, outside)?;
        check_data(|h| h.vaddr = USER_END - 0x1000, outside)?;
        check_data(|h| h.vaddr = 0xffff_ffff_8000_0000, outside)?;
        check_data(|h| h.align = 0x1001, ElfError::BadAlignment { index })?;
        check_data(
            |h| h.flags |= PF_X,
            ElfError::WritableAndExecutable { index },
        )?;
        // A non-executable entry point, or one outside every segment.
        check_eq!(
            Elf::parse(&file(0x40_1100, &[TEXT, DATA])).err(),
            Some(ElfError::EntryNotExecutable { entry: 0x40_1100 })
        );
        check_eq!(
            Elf::parse(&file(0x40_0100, &[TEXT, DATA])).err(),
            Some(ElfError::EntryNotExecutable { entry: 0x40_0100 })
        );
        Ok(())
    }

    fn rejects_bad_layouts() -> TestResult {
        let index = 2;
        // Overlapping, sharing the text's page, and out of order.
        check_data(
            |h| h.vaddr = 0x40_0080,
            ElfError::OverlapsPrevious { index },
        )?;
        check_data(
            |h| h.vaddr = 0x40_0800,
            ElfError::OverlapsPrevious { index },
        )?;
        check_eq!(
            Elf::parse(&file(ENTRY, &[DATA, TEXT])).err(),
            Some(ElfError::OverlapsPrevious { index: 1 })
        );
        // The next page is fine.
        check!(
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
        check_eq!(
            Elf::parse(&file(ENTRY, &[STACK])).err(),
            Some(ElfError::NoLoadableSegment)
        );
        Ok(())
    }

    /// Every prefix of a real program and every single-byte change to its
    /// headers gives a result, not a panic; a prefix that cuts into a
    /// segment's file bytes is an error.
    fn damaged_programs_fail_cleanly() -> TestResult {
        let initrd = require_some!(crate::initrd::get(), "the boot ramdisk was not set up");
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

    fn boot_programs_are_valid() -> TestResult {
        let initrd = require_some!(crate::initrd::get(), "the boot ramdisk was not set up");
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
}
