//! The initial ramdisk: the user programs that ship in the boot image.
//!
//! `boot/build.rs` packs every program of the `user` crate into one archive
//! and the bootloader loads it next to the kernel ([`hal::ramdisk`]).
//! The format (written by `boot/build/ramdisk.rs`), little-endian and
//! 8-byte aligned throughout:
//!
//! ```text
//! offset 0    magic    b"SDRAMFS1"
//! offset 8    count    u64: number of files
//! offset 16   count entries of 48 bytes, sorted by name, names unique:
//!               name    [u8; 32]  UTF-8, padded with NUL bytes (no NUL inside)
//!               offset  u64       start of the file's bytes, from the start of
//!                                 the archive; a multiple of 8, after the table
//!               len     u64       the file's length in bytes
//! then        the files' bytes
//! ```
//!
//! The kernel trusts the bootloader, not the archive: [`Initrd::parse`]
//! checks every field once, so that lookups afterwards are plain slicing,
//! and a damaged archive is an error, never a panic or an out-of-bounds read.

use core::fmt;

use bootloader_api::BootInfo;
use spin::Once;

use hal::ramdisk::{self, RamdiskError};

/// The first eight bytes of every archive.
pub const MAGIC: &[u8; 8] = b"SDRAMFS1";

/// The size of an entry's name field.
pub const NAME_LEN: usize = 32;

const HEADER_LEN: usize = 16;
const ENTRY_LEN: usize = NAME_LEN + 16;

/// What is wrong with an archive; `index` numbers the entries from 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitrdError {
    /// Shorter than the 16-byte header.
    TooShort { len: usize },
    /// The first eight bytes are not [`MAGIC`].
    BadMagic,
    /// The table of `count` entries does not fit in the archive.
    TableOutOfBounds { count: u64 },
    /// An entry's name is empty, not UTF-8, or has bytes after a NUL.
    BadName { index: usize },
    /// An entry's name does not sort after the previous one (so names are
    /// unique and lookups can rely on the order).
    NotSorted { index: usize },
    /// An entry's data starts at an offset that is not a multiple of 8.
    MisalignedData { index: usize },
    /// An entry's data starts inside the header or the table.
    DataOverlapsTable { index: usize },
    /// An entry's data runs past the end of the archive.
    DataOutOfBounds { index: usize },
}

impl fmt::Display for InitrdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooShort { len } => write!(f, "archive of {len} bytes has no header"),
            Self::BadMagic => write!(f, "archive does not start with {MAGIC:?}"),
            Self::TableOutOfBounds { count } => {
                write!(f, "a table of {count} entries does not fit in the archive")
            }
            Self::BadName { index } => write!(f, "entry {index} has a malformed name"),
            Self::NotSorted { index } => {
                write!(
                    f,
                    "entry {index}'s name does not sort after the previous one"
                )
            }
            Self::MisalignedData { index } => {
                write!(f, "entry {index}'s data is not 8-byte aligned")
            }
            Self::DataOverlapsTable { index } => {
                write!(f, "entry {index}'s data overlaps the entry table")
            }
            Self::DataOutOfBounds { index } => {
                write!(f, "entry {index}'s data runs past the end of the archive")
            }
        }
    }
}

/// A checked archive: every entry is known to be well-formed.
#[derive(Clone, Copy, Debug)]
pub struct Initrd<'a> {
    bytes: &'a [u8],
    count: usize,
}

impl<'a> Initrd<'a> {
    /// Checks the whole archive in `bytes`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, InitrdError> {
        if bytes.len() < HEADER_LEN {
            return Err(InitrdError::TooShort { len: bytes.len() });
        }
        if &bytes[..MAGIC.len()] != MAGIC {
            return Err(InitrdError::BadMagic);
        }
        let count =
            read_u64(bytes, MAGIC.len()).ok_or(InitrdError::TooShort { len: bytes.len() })?;
        let table_end = usize::try_from(count)
            .ok()
            .and_then(|count| count.checked_mul(ENTRY_LEN))
            .and_then(|table| table.checked_add(HEADER_LEN))
            .filter(|&end| end <= bytes.len())
            .ok_or(InitrdError::TableOutOfBounds { count })?;
        let initrd = Self {
            bytes,
            // Fits: the table fits in memory.
            count: (table_end - HEADER_LEN) / ENTRY_LEN,
        };
        let mut previous: Option<&str> = None;
        for index in 0..initrd.count {
            let (name, _) = initrd.entry(index)?;
            if previous.is_some_and(|previous| previous >= name) {
                return Err(InitrdError::NotSorted { index });
            }
            previous = Some(name);
        }
        Ok(initrd)
    }

    /// The number of files.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the archive holds no file.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Every file as (name, contents), sorted by name.
    pub fn files(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + '_ {
        // `parse` checked every entry, so none is skipped.
        (0..self.count).filter_map(|index| self.entry(index).ok())
    }

    /// The names of the files, sorted.
    pub fn names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.files().map(|(name, _)| name)
    }

    /// The contents of the file called `name`.
    pub fn find(&self, name: &str) -> Option<&'a [u8]> {
        self.files()
            .find(|(file, _)| *file == name)
            .map(|(_, contents)| contents)
    }

    /// Decodes and checks entry `index` (which must be below `count`).
    fn entry(&self, index: usize) -> Result<(&'a str, &'a [u8]), InitrdError> {
        let bytes = self.bytes;
        let at = HEADER_LEN + index * ENTRY_LEN;
        let name_field = bytes
            .get(at..at + NAME_LEN)
            .ok_or(InitrdError::TableOutOfBounds {
                count: self.count as u64,
            })?;
        let name_len = name_field
            .iter()
            .position(|&byte| byte == 0)
            .unwrap_or(NAME_LEN);
        let name = core::str::from_utf8(&name_field[..name_len])
            .ok()
            .filter(|name| !name.is_empty())
            .filter(|_| name_field[name_len..].iter().all(|&byte| byte == 0))
            .ok_or(InitrdError::BadName { index })?;

        let out_of_bounds = InitrdError::DataOutOfBounds { index };
        let offset = read_u64(bytes, at + NAME_LEN).ok_or(out_of_bounds)?;
        let len = read_u64(bytes, at + NAME_LEN + 8).ok_or(out_of_bounds)?;
        if offset % 8 != 0 {
            return Err(InitrdError::MisalignedData { index });
        }
        if offset < (HEADER_LEN + self.count * ENTRY_LEN) as u64 {
            return Err(InitrdError::DataOverlapsTable { index });
        }
        let data = offset
            .checked_add(len)
            .and_then(|end| bytes.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?))
            .ok_or(out_of_bounds)?;
        Ok((name, data))
    }
}

/// The little-endian `u64` at `offset`, if it is inside `bytes`.
fn read_u64(bytes: &[u8], offset: usize) -> Option<u64> {
    let field = bytes.get(offset..offset.checked_add(8)?)?;
    Some(u64::from_le_bytes(field.try_into().ok()?))
}

/// The boot ramdisk, checked once at boot.
static INITRD: Once<Initrd<'static>> = Once::new();

/// Why the boot ramdisk is unusable.
#[derive(Debug)]
pub enum InitError {
    Ramdisk(RamdiskError),
    Archive(InitrdError),
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ramdisk(error) => write!(f, "{error}"),
            Self::Archive(error) => write!(f, "bad ramdisk archive: {error}"),
        }
    }
}

/// Finds and checks the ramdisk the bootloader loaded. Called once at boot,
/// after memory is set up.
pub fn init(boot_info: &BootInfo) -> Result<&'static Initrd<'static>, InitError> {
    let bytes = ramdisk::bytes(boot_info).map_err(InitError::Ramdisk)?;
    let initrd = Initrd::parse(bytes).map_err(InitError::Archive)?;
    Ok(INITRD.call_once(|| initrd))
}

/// The boot ramdisk, once [`init`] has checked it.
pub fn get() -> Option<&'static Initrd<'static>> {
    INITRD.get()
}

pub mod tests {
    //! In-kernel tests of the archive parser, on hand-made archives and on
    //! the real boot ramdisk.

    use alloc::vec::Vec;

    use super::{ENTRY_LEN, HEADER_LEN, Initrd, InitrdError, MAGIC, NAME_LEN};
    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq, require_ok, require_some};

    pub const TESTS: &[Test] = &[
        Test::new("initrd::finds_files_by_name", finds_files_by_name),
        Test::new("initrd::empty_archive_is_valid", empty_archive_is_valid),
        Test::new("initrd::rejects_bad_headers", rejects_bad_headers),
        Test::new("initrd::rejects_bad_tables", rejects_bad_tables),
        Test::new("initrd::rejects_bad_names", rejects_bad_names),
        Test::new("initrd::rejects_bad_data_ranges", rejects_bad_data_ranges),
        Test::new(
            "initrd::truncated_archives_fail_cleanly",
            truncated_archives_fail_cleanly,
        ),
        Test::new(
            "initrd::boot_ramdisk_has_the_programs",
            boot_ramdisk_has_the_programs,
        ),
    ];

    /// An archive of `files` laid out as `boot/build/ramdisk.rs` writes it
    /// (the caller sorts them).
    fn archive(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(MAGIC);
        bytes.extend_from_slice(&(files.len() as u64).to_le_bytes());
        let mut offset = HEADER_LEN + files.len() * ENTRY_LEN;
        for (name, contents) in files {
            let mut field = [0u8; NAME_LEN];
            field[..name.len()].copy_from_slice(name.as_bytes());
            bytes.extend_from_slice(&field);
            bytes.extend_from_slice(&(offset as u64).to_le_bytes());
            bytes.extend_from_slice(&(contents.len() as u64).to_le_bytes());
            offset += contents.len().next_multiple_of(8);
        }
        for (_, contents) in files {
            bytes.extend_from_slice(contents);
            bytes.resize(bytes.len().next_multiple_of(8), 0);
        }
        bytes
    }

    /// Where entry `index`'s fields start.
    const fn name_at(index: usize) -> usize {
        HEADER_LEN + index * ENTRY_LEN
    }
    const fn offset_at(index: usize) -> usize {
        name_at(index) + NAME_LEN
    }
    const fn len_at(index: usize) -> usize {
        offset_at(index) + 8
    }

    fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
        bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
    }

    fn two_files() -> Vec<u8> {
        archive(&[("alpha", b"first file"), ("beta", b"2nd")])
    }

    fn finds_files_by_name() -> TestResult {
        let bytes = two_files();
        let initrd = require_ok!(Initrd::parse(&bytes));
        check_eq!(initrd.len(), 2);
        check_eq!(initrd.find("alpha"), Some(&b"first file"[..]));
        check_eq!(initrd.find("beta"), Some(&b"2nd"[..]));
        check_eq!(initrd.find("gamma"), None);
        check_eq!(initrd.find("alph"), None);
        check!(initrd.names().eq(["alpha", "beta"]));
        // A 32-byte name fills its field with no NUL at all.
        let long = "a_name_of_exactly_thirty_two_byt";
        check_eq!(long.len(), NAME_LEN);
        let bytes = archive(&[(long, b"x")]);
        check_eq!(
            require_ok!(Initrd::parse(&bytes)).find(long),
            Some(&b"x"[..])
        );
        Ok(())
    }

    fn empty_archive_is_valid() -> TestResult {
        let bytes = archive(&[]);
        let initrd = require_ok!(Initrd::parse(&bytes));
        check!(initrd.is_empty());
        check_eq!(initrd.names().count(), 0);
        check_eq!(initrd.find("hello"), None);
        Ok(())
    }

    fn rejects_bad_headers() -> TestResult {
        check_eq!(
            Initrd::parse(&[]).err(),
            Some(InitrdError::TooShort { len: 0 })
        );
        check_eq!(
            Initrd::parse(MAGIC).err(),
            Some(InitrdError::TooShort { len: 8 })
        );
        let mut bytes = two_files();
        bytes[0] = b'X';
        check_eq!(Initrd::parse(&bytes).err(), Some(InitrdError::BadMagic));
        Ok(())
    }

    fn rejects_bad_tables() -> TestResult {
        for count in [3, 1 << 40, u64::MAX / ENTRY_LEN as u64 + 1, u64::MAX] {
            let mut bytes = two_files();
            put_u64(&mut bytes, MAGIC.len(), count);
            check_eq!(
                Initrd::parse(&bytes).err(),
                Some(InitrdError::TableOutOfBounds { count }),
                "count {count}"
            );
        }
        let bytes = archive(&[("beta", b"1"), ("alpha", b"2")]);
        check_eq!(
            Initrd::parse(&bytes).err(),
            Some(InitrdError::NotSorted { index: 1 })
        );
        let bytes = archive(&[("same", b"1"), ("same", b"2")]);
        check_eq!(
            Initrd::parse(&bytes).err(),
            Some(InitrdError::NotSorted { index: 1 })
        );
        Ok(())
    }

    fn rejects_bad_names() -> TestResult {
        let bad_name = Some(InitrdError::BadName { index: 1 });
        let mut bytes = two_files();
        bytes[name_at(1)..name_at(1) + NAME_LEN].fill(0);
        check_eq!(Initrd::parse(&bytes).err(), bad_name, "empty name");
        let mut bytes = two_files();
        bytes[name_at(1) + 6] = b'x'; // "beta\0\0x"
        check_eq!(Initrd::parse(&bytes).err(), bad_name, "bytes after the NUL");
        let mut bytes = two_files();
        bytes[name_at(1) + 1] = 0xff;
        check_eq!(Initrd::parse(&bytes).err(), bad_name, "not UTF-8");
        Ok(())
    }

    fn rejects_bad_data_ranges() -> TestResult {
        let table_end = (HEADER_LEN + 2 * ENTRY_LEN) as u64;
        let cases = [
            (
                offset_at(1),
                table_end + 4,
                InitrdError::MisalignedData { index: 1 },
            ),
            (offset_at(1), 8, InitrdError::DataOverlapsTable { index: 1 }),
            (offset_at(0), 0, InitrdError::DataOverlapsTable { index: 0 }),
            (
                offset_at(1),
                1 << 20,
                InitrdError::DataOutOfBounds { index: 1 },
            ),
            (
                offset_at(1),
                u64::MAX - 7,
                InitrdError::DataOutOfBounds { index: 1 },
            ),
            (
                len_at(0),
                1 << 20,
                InitrdError::DataOutOfBounds { index: 0 },
            ),
            (
                len_at(1),
                u64::MAX,
                InitrdError::DataOutOfBounds { index: 1 },
            ),
        ];
        for (at, value, expected) in cases {
            let mut bytes = two_files();
            put_u64(&mut bytes, at, value);
            check_eq!(
                Initrd::parse(&bytes).err(),
                Some(expected),
                "{value:#x} at byte {at}"
            );
        }
        Ok(())
    }

    /// Every prefix of an archive either parses or gives an error; cutting
    /// into the table or into file data is always an error.
    fn truncated_archives_fail_cleanly() -> TestResult {
        let bytes = two_files();
        let data_end = HEADER_LEN + 2 * ENTRY_LEN + 16 + 3;
        for len in 0..bytes.len() {
            let result = Initrd::parse(&bytes[..len]);
            check!(
                result.is_err() == (len < data_end),
                "prefix of {len} bytes: {result:?}"
            );
        }
        Ok(())
    }

    fn boot_ramdisk_has_the_programs() -> TestResult {
        let initrd = require_some!(super::get(), "the boot ramdisk was not set up");
        for program in ["hello", "exit_code", "threads", "fault", "syscall_errors"] {
            let contents = require_some!(initrd.find(program), "no {program} in the ramdisk");
            check!(
                contents.starts_with(b"\x7fELF"),
                "{program} is not an ELF file"
            );
        }
        Ok(())
    }
}
