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
pub const HEADER_LEN: usize = size_of::<Elf64_Ehdr>();
/// The size of one ELF64 program header.
pub const PROGRAM_HEADER_LEN: usize = size_of::<Elf64_Phdr>();

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
    program_headers_offset: u64,
    program_header_count: u16,
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
            program_headers_offset: header.e_phoff,
            program_header_count: header.e_phnum,
            program_headers: SegmentTable::new(LittleEndian, Class::ELF64, table),
        };
        elf.check_segments()?;
        Ok(elf)
    }

    /// The segment rules of the module documentation: each loadable segment
    /// valid on its own, in ascending order without overlap, at least one
    /// of them, and the entry point in an executable one.
    fn check_segments(&self) -> Result<(), ElfError> {
        let mut previous: Option<Segment<'a>> = None;
        let mut entry_is_executable = false;
        for (index, program_header) in self.program_headers.iter().enumerate() {
            let Some(segment) = self.load_segment(index, &program_header)? else {
                continue;
            };
            if previous.is_some_and(|previous| segment.first_page() < previous.pages_end()) {
                return Err(ElfError::OverlapsPrevious { index });
            }
            entry_is_executable |= segment.flags.execute && segment.contains(self.entry);
            previous = Some(segment);
        }
        if previous.is_none() {
            return Err(ElfError::NoLoadableSegment);
        }
        if !entry_is_executable {
            return Err(ElfError::EntryNotExecutable { entry: self.entry });
        }
        Ok(())
    }

    /// Where the program starts.
    pub fn entry(&self) -> u64 {
        self.entry
    }

    /// How many program headers there are (every kind, not just `PT_LOAD`).
    pub fn program_header_count(&self) -> u16 {
        self.program_header_count
    }

    /// Where the program-header table is in memory once the segments are
    /// loaded (`AT_PHDR`): inside the segment whose file bytes hold it;
    /// `None` if no segment loads it.
    pub fn program_headers_address(&self) -> Option<u64> {
        let table_len = u64::from(self.program_header_count) * PROGRAM_HEADER_LEN as u64;
        let start = self.program_headers_offset;
        self.segments().find_map(|segment| {
            let inside = start >= segment.file_offset
                && start + table_len <= segment.file_offset + segment.file_size;
            inside.then(|| segment.vaddr + (start - segment.file_offset))
        })
    }

    /// The first page above every segment: where the heap `brk` moves can
    /// start.
    pub fn image_end(&self) -> u64 {
        self.segments()
            .map(|segment| segment.pages_end())
            .max()
            .unwrap_or(USER_IMAGE_BASE)
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

#[cfg(test)]
mod tests;
