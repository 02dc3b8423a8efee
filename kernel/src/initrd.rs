//! The initial ramdisk: the user programs that ship in the boot image.
//!
//! `boot/build.rs` packs every program of the `user` crate into one archive
//! and the bootloader loads it next to the kernel ([`hal::ramdisk`]).
//! The archive is a cpio "newc" archive, the format of Linux's initramfs, so
//! ordinary tools list it (`cpio -itv < ramdisk.cpio`). It is a sequence of
//! entries, each one 4-byte aligned from the start of the archive:
//!
//! ```text
//! offset 0    c_magic     "070701"
//! offset 6    13 fields of exactly 8 ASCII hex digits (upper or lower case):
//!               c_ino c_mode c_uid c_gid c_nlink c_mtime c_filesize
//!               c_devmajor c_devminor c_rdevmajor c_rdevminor
//!               c_namesize c_check
//! offset 110  the name: c_namesize bytes, the last of them the only NUL
//! then        padding to a multiple of 4, the c_filesize bytes of data,
//!             and padding to a multiple of 4 again
//! ```
//!
//! An entry named `TRAILER!!!` closes the archive; only zero bytes may
//! follow it (GNU cpio pads its output to a 512-byte block).
//!
//! The reader is hand-written, though crates for cpio exist, because it is
//! the kernel's first contact with input it did not make: the kernel trusts
//! the bootloader (to load the file where it says), not the archive (whose
//! bytes come from a build, a disk, or a student's hex editor). So
//! [`Initrd::parse`] checks every field once, in one place that can be read
//! in a sitting, with no allocation and no `std`; lookups afterwards walk
//! entries already known to be good; and a damaged archive is an
//! [`InitrdError`] that says what and where, never a panic or an
//! out-of-bounds read. What it accepts:
//!
//! - only the `070701` magic: not the `070702` variant with checksums, nor
//!   the older binary and `070707` formats;
//! - every numeric field must be 8 hex digits, even the ones the kernel does
//!   not use (a bad one means the archive is not what it claims to be); of
//!   their values only `c_mode`, `c_nlink`, `c_filesize` and `c_namesize`
//!   matter (`c_check` is 0 in newc and not looked at);
//! - names are non-empty UTF-8 with one NUL, at the end; lookups compare
//!   them byte for byte (`hello`, not `./hello`);
//! - only regular files with one link: the ramdisk is a flat list of
//!   programs, not a file tree, so a directory, symbolic link or device
//!   entry is an error rather than silently skipped, and so is a hard link
//!   (in newc, a set of hard links stores its data with only one of them);
//! - names are unique, and there are at most [`MAX_FILES`] files, which
//!   keeps the duplicate check (each name against the earlier ones) short;
//! - the order is the archive's: the build writes the programs sorted by
//!   name, and the boot banner lists them in that order.

use core::fmt;

use bootloader_api::BootInfo;
use spin::Once;

use hal::ramdisk::{self, RamdiskError};

/// The first six bytes of every entry.
pub const MAGIC: &[u8; 6] = b"070701";

/// The name of the entry that ends every archive.
pub const TRAILER: &str = "TRAILER!!!";

/// The most files an archive may hold.
pub const MAX_FILES: usize = 256;

/// The size of an entry's header, up to its name.
const HEADER_LEN: usize = 110;

/// The header's numeric fields, in order, each 8 hex digits after the magic.
const FIELDS: [&str; 13] = [
    "c_ino",
    "c_mode",
    "c_uid",
    "c_gid",
    "c_nlink",
    "c_mtime",
    "c_filesize",
    "c_devmajor",
    "c_devminor",
    "c_rdevmajor",
    "c_rdevminor",
    "c_namesize",
    "c_check",
];
const FIELD_LEN: usize = 8;
const MODE: usize = 1;
const NLINK: usize = 4;
const FILESIZE: usize = 6;
const NAMESIZE: usize = 11;

/// The file-type bits of `c_mode`, and their value for a regular file.
const MODE_TYPE_MASK: u32 = 0o170_000;
const MODE_REGULAR: u32 = 0o100_000;

/// What is wrong with an entry's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameError {
    /// The last byte of the `c_namesize` bytes is not NUL (or there are none).
    Unterminated,
    /// The name is only the NUL.
    Empty,
    /// A NUL before the last byte.
    NulInside,
    /// Not valid UTF-8.
    NotUtf8,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unterminated => "does not end with a NUL byte",
            Self::Empty => "is empty",
            Self::NulInside => "has a NUL byte inside",
            Self::NotUtf8 => "is not UTF-8",
        })
    }
}

/// What is wrong with an archive; `index` numbers its entries from 0 (the
/// trailer included) and `offset` is a byte offset in the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InitrdError {
    /// The archive ends inside an entry's 110-byte header.
    TruncatedHeader { index: usize, offset: usize },
    /// An entry does not start with [`MAGIC`].
    BadMagic { index: usize, offset: usize },
    /// A header field is not 8 hex digits.
    BadHexField { index: usize, field: &'static str },
    /// An entry's name runs past the end of the archive.
    NameOutOfBounds { index: usize },
    /// An entry's name is malformed.
    BadName { index: usize, problem: NameError },
    /// The padding after an entry's name or data runs past the end.
    PaddingOutOfBounds { index: usize },
    /// An entry's data runs past the end of the archive.
    DataOutOfBounds { index: usize },
    /// An entry is not a regular file (`mode` is its `c_mode`).
    NotARegularFile { index: usize, mode: u32 },
    /// A regular file with more than one link.
    HardLink { index: usize, nlink: u32 },
    /// An entry has the name of entry `first`.
    DuplicateName { index: usize, first: usize },
    /// More than [`MAX_FILES`] files.
    TooManyFiles,
    /// The archive ends after `files` files without a [`TRAILER`] entry.
    MissingTrailer { files: usize },
    /// A byte other than zero after the trailer.
    BytesAfterTrailer { offset: usize },
}

impl fmt::Display for InitrdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::TruncatedHeader { index, offset } => write!(
                f,
                "entry {index} at byte {offset:#x}: the archive ends inside its header"
            ),
            Self::BadMagic { index, offset } => write!(
                f,
                "entry {index} at byte {offset:#x} does not start with the newc magic \"070701\""
            ),
            Self::BadHexField { index, field } => {
                write!(f, "entry {index}'s {field} is not 8 hex digits")
            }
            Self::NameOutOfBounds { index } => {
                write!(f, "entry {index}'s name runs past the end of the archive")
            }
            Self::BadName { index, problem } => write!(f, "entry {index}'s name {problem}"),
            Self::PaddingOutOfBounds { index } => write!(
                f,
                "entry {index}'s padding to 4 bytes runs past the end of the archive"
            ),
            Self::DataOutOfBounds { index } => {
                write!(f, "entry {index}'s data runs past the end of the archive")
            }
            Self::NotARegularFile { index, mode } => write!(
                f,
                "entry {index} (mode {mode:#o}) is not a regular file: the ramdisk holds only programs"
            ),
            Self::HardLink { index, nlink } => write!(
                f,
                "entry {index} has {nlink} links: hard links are not supported"
            ),
            Self::DuplicateName { index, first } => {
                write!(f, "entry {index} has the same name as entry {first}")
            }
            Self::TooManyFiles => write!(f, "more than {MAX_FILES} files"),
            Self::MissingTrailer { files } => write!(
                f,
                "the archive ends after {files} files without a {TRAILER} entry"
            ),
            Self::BytesAfterTrailer { offset } => {
                write!(
                    f,
                    "a non-zero byte at {offset:#x}, after the {TRAILER} entry"
                )
            }
        }
    }
}

/// One decoded entry, each field checked on its own (not yet against the
/// other entries).
struct Entry<'a> {
    name: &'a str,
    mode: u32,
    nlink: u32,
    data: &'a [u8],
    /// Where the next entry starts: past the data and its padding.
    next: usize,
}

/// Decodes and checks the entry at `at` (a multiple of 4, at most
/// `bytes.len()`), number `index`.
fn decode(bytes: &[u8], at: usize, index: usize) -> Result<Entry<'_>, InitrdError> {
    let header = at
        .checked_add(HEADER_LEN)
        .and_then(|end| bytes.get(at..end))
        .ok_or(InitrdError::TruncatedHeader { index, offset: at })?;
    let (magic, digits) = header.split_at(MAGIC.len());
    if magic != MAGIC {
        return Err(InitrdError::BadMagic { index, offset: at });
    }
    // 104 bytes: exactly the 13 fields.
    let (digits, _) = digits.as_chunks::<FIELD_LEN>();
    let mut fields = [0u32; FIELDS.len()];
    for ((value, digits), field) in fields.iter_mut().zip(digits).zip(FIELDS) {
        *value = hex(digits).ok_or(InitrdError::BadHexField { index, field })?;
    }

    // Fields are 32-bit, `usize` 64: no conversion or sum below overflows
    // (and the `checked_add`s say so anyway). Every range is bounds-checked
    // against the archive before it is sliced.
    let name_start = at + HEADER_LEN;
    let name_field = name_start
        .checked_add(fields[NAMESIZE] as usize)
        .and_then(|end| bytes.get(name_start..end))
        .ok_or(InitrdError::NameOutOfBounds { index })?;
    let name = check_name(name_field).map_err(|problem| InitrdError::BadName { index, problem })?;
    let data_start = (name_start + name_field.len()).next_multiple_of(4);
    if data_start > bytes.len() {
        return Err(InitrdError::PaddingOutOfBounds { index });
    }
    let data = data_start
        .checked_add(fields[FILESIZE] as usize)
        .and_then(|end| bytes.get(data_start..end))
        .ok_or(InitrdError::DataOutOfBounds { index })?;
    let next = (data_start + data.len()).next_multiple_of(4);
    if next > bytes.len() {
        return Err(InitrdError::PaddingOutOfBounds { index });
    }
    Ok(Entry {
        name,
        mode: fields[MODE],
        nlink: fields[NLINK],
        data,
        next,
    })
}

/// The value of 8 hex digits (`str::from_str_radix` would also take a
/// leading `+`).
fn hex(digits: &[u8; FIELD_LEN]) -> Option<u32> {
    digits.iter().try_fold(0u32, |value, &digit| {
        let nibble = char::from(digit).to_digit(16)?;
        // Eight nibbles fill the 32 bits exactly.
        Some((value << 4) | nibble)
    })
}

/// The name in a `c_namesize`-byte name field.
fn check_name(field: &[u8]) -> Result<&str, NameError> {
    let Some((&0, name)) = field.split_last() else {
        return Err(NameError::Unterminated);
    };
    if name.is_empty() {
        return Err(NameError::Empty);
    }
    if name.contains(&0) {
        return Err(NameError::NulInside);
    }
    core::str::from_utf8(name).map_err(|_| NameError::NotUtf8)
}

/// A checked archive: every entry is known to be a well-formed regular file
/// with a unique name.
#[derive(Clone, Copy, Debug)]
pub struct Initrd<'a> {
    /// The archive, from its first entry to its trailer (excluded).
    bytes: &'a [u8],
    count: usize,
}

impl<'a> Initrd<'a> {
    /// Checks the whole archive in `bytes` against every rule in the module
    /// documentation.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, InitrdError> {
        let mut at = 0;
        let mut index = 0;
        loop {
            if at == bytes.len() {
                return Err(InitrdError::MissingTrailer { files: index });
            }
            let entry = decode(bytes, at, index)?;
            if entry.name == TRAILER {
                // `decode` checked that `entry.next` is inside the archive.
                if let Some(offset) = bytes[entry.next..].iter().position(|&byte| byte != 0) {
                    return Err(InitrdError::BytesAfterTrailer {
                        offset: entry.next + offset,
                    });
                }
                return Ok(Self {
                    bytes: &bytes[..at],
                    count: index,
                });
            }
            if index == MAX_FILES {
                return Err(InitrdError::TooManyFiles);
            }
            if entry.mode & MODE_TYPE_MASK != MODE_REGULAR {
                return Err(InitrdError::NotARegularFile {
                    index,
                    mode: entry.mode,
                });
            }
            if entry.nlink > 1 {
                return Err(InitrdError::HardLink {
                    index,
                    nlink: entry.nlink,
                });
            }
            // The entries before this one are checked: walk them.
            let earlier = Self {
                bytes: &bytes[..at],
                count: index,
            };
            if let Some(first) = earlier.names().position(|name| name == entry.name) {
                return Err(InitrdError::DuplicateName { index, first });
            }
            at = entry.next;
            index += 1;
        }
    }

    /// The number of files.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the archive holds no file.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Every file as (name, contents), in the archive's order (sorted by
    /// name in the boot ramdisk).
    pub fn files(&self) -> impl Iterator<Item = (&'a str, &'a [u8])> + '_ {
        let bytes = self.bytes;
        let mut at = 0;
        // `parse` checked every entry, so none is cut short here.
        (0..self.count).map_while(move |index| {
            let entry = decode(bytes, at, index).ok()?;
            at = entry.next;
            Some((entry.name, entry.data))
        })
    }

    /// The names of the files, in the archive's order.
    pub fn names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.files().map(|(name, _)| name)
    }

    /// The contents of the file called `name`.
    pub fn find(&self, name: &str) -> Option<&'a [u8]> {
        self.files()
            .find(|(file, _)| *file == name)
            .map(|(_, contents)| contents)
    }
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
    //! In-kernel tests of the archive reader, on archives built here entry
    //! by entry and broken one field at a time, and on the real boot
    //! ramdisk.

    use alloc::{format, string::String, vec::Vec};

    use super::{
        FIELD_LEN, FIELDS, FILESIZE, HEADER_LEN, Initrd, InitrdError, MAGIC, MAX_FILES, MODE,
        NAMESIZE, NLINK, NameError, TRAILER,
    };
    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq, require_ok, require_some};

    pub const TESTS: &[Test] = &[
        Test::new("initrd::finds_files_by_name", finds_files_by_name),
        Test::new("initrd::empty_archive_is_valid", empty_archive_is_valid),
        Test::new("initrd::rejects_bad_headers", rejects_bad_headers),
        Test::new("initrd::rejects_bad_hex_fields", rejects_bad_hex_fields),
        Test::new("initrd::rejects_bad_names", rejects_bad_names),
        Test::new("initrd::rejects_duplicate_names", rejects_duplicate_names),
        Test::new("initrd::rejects_other_file_types", rejects_other_file_types),
        Test::new("initrd::rejects_bad_data_ranges", rejects_bad_data_ranges),
        Test::new(
            "initrd::rejects_padding_past_the_end",
            rejects_padding_past_the_end,
        ),
        Test::new("initrd::requires_a_trailer", requires_a_trailer),
        Test::new("initrd::limits_the_file_count", limits_the_file_count),
        Test::new(
            "initrd::truncated_archives_fail_cleanly",
            truncated_archives_fail_cleanly,
        ),
        Test::new(
            "initrd::boot_ramdisk_has_the_programs",
            boot_ramdisk_has_the_programs,
        ),
    ];

    /// The mode the build gives every program: a regular file, `rwxr-xr-x`.
    const REGULAR: u32 = 0o100_755;
    /// `c_mtime`'s place among the fields.
    const MTIME: usize = 5;
    /// `c_check`'s place among the fields.
    const CHECK: usize = 12;

    fn pad(bytes: &mut Vec<u8>) {
        bytes.resize(bytes.len().next_multiple_of(4), 0);
    }

    /// Appends one entry: the magic, `fields` as 8 hex digits each, then
    /// `name_field` as it is (with whatever NUL the caller gives) and
    /// `data`, each padded to 4 bytes.
    fn push_raw(bytes: &mut Vec<u8>, fields: [u32; FIELDS.len()], name_field: &[u8], data: &[u8]) {
        bytes.extend_from_slice(MAGIC);
        for value in fields {
            bytes.extend_from_slice(format!("{value:08x}").as_bytes());
        }
        bytes.extend_from_slice(name_field);
        pad(bytes);
        bytes.extend_from_slice(data);
        pad(bytes);
    }

    /// The header fields of an entry called `name` holding `data`.
    fn fields(ino: u32, mode: u32, name: &[u8], data: &[u8]) -> [u32; FIELDS.len()] {
        let mut fields = [0; FIELDS.len()];
        fields[0] = ino;
        fields[MODE] = mode;
        fields[NLINK] = 1;
        fields[FILESIZE] = data.len() as u32;
        fields[NAMESIZE] = name.len() as u32 + 1;
        fields
    }

    /// Appends a well-formed entry called `name`.
    fn push_entry(bytes: &mut Vec<u8>, ino: u32, mode: u32, name: &[u8], data: &[u8]) {
        let mut name_field = Vec::from(name);
        name_field.push(0);
        push_raw(bytes, fields(ino, mode, name, data), &name_field, data);
    }

    /// Appends the trailer as the `cpio` crate writes it (inode and mode 0).
    fn push_trailer(bytes: &mut Vec<u8>) {
        push_entry(bytes, 0, 0, TRAILER.as_bytes(), &[]);
    }

    /// An archive of `files` laid out as `boot/build/ramdisk.rs` writes it
    /// (inode numbers from 1, the trailer last), and where each entry
    /// starts, the trailer's last.
    fn archive(files: &[(&str, &[u8])]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = Vec::new();
        let mut starts = Vec::new();
        for (index, (name, data)) in files.iter().enumerate() {
            starts.push(bytes.len());
            push_entry(&mut bytes, index as u32 + 1, REGULAR, name.as_bytes(), data);
        }
        starts.push(bytes.len());
        push_trailer(&mut bytes);
        (bytes, starts)
    }

    fn two_files() -> (Vec<u8>, Vec<usize>) {
        archive(&[("alpha", b"first file"), ("beta", b"2nd")])
    }

    /// Where header field `field` of the entry starting at `entry` is.
    const fn field_at(entry: usize, field: usize) -> usize {
        entry + MAGIC.len() + field * FIELD_LEN
    }

    /// Where the data of the entry at `entry`, with a name of `name_len`
    /// bytes (without the NUL), starts.
    const fn data_at(entry: usize, name_len: usize) -> usize {
        (entry + HEADER_LEN + name_len + 1).next_multiple_of(4)
    }

    /// Writes `value` into a header field, as 8 hex digits.
    fn put_field(bytes: &mut [u8], entry: usize, field: usize, value: u32) {
        let at = field_at(entry, field);
        bytes[at..at + FIELD_LEN].copy_from_slice(format!("{value:08x}").as_bytes());
    }

    fn finds_files_by_name() -> TestResult {
        let (bytes, _) = two_files();
        let initrd = require_ok!(Initrd::parse(&bytes));
        check_eq!(initrd.len(), 2);
        check_eq!(initrd.find("alpha"), Some(&b"first file"[..]));
        check_eq!(initrd.find("beta"), Some(&b"2nd"[..]));
        check_eq!(initrd.find("gamma"), None);
        check_eq!(initrd.find("alph"), None);
        check_eq!(initrd.find("alpha\0"), None);
        check_eq!(initrd.find(TRAILER), None);
        check!(initrd.names().eq(["alpha", "beta"]));

        // Names and contents of every length modulo 4 (every amount of
        // padding), an empty file, and a name far longer than 32 bytes.
        let files: [(&str, &[u8]); 6] = [
            ("a", b""),
            ("bb", b"1"),
            ("ccc", b"22"),
            ("dddd", b"333"),
            ("eeeee", b"4444"),
            (
                "a_name_much_longer_than_the_32_bytes_of_the_old_format",
                b"55555",
            ),
        ];
        let (bytes, _) = archive(&files);
        let initrd = require_ok!(Initrd::parse(&bytes));
        check_eq!(initrd.len(), files.len());
        for (name, contents) in files {
            check_eq!(initrd.find(name), Some(contents), "{name}");
        }
        check!(initrd.files().eq(files));

        // Upper-case hex digits are hex digits too.
        let (mut bytes, starts) = two_files();
        let at = field_at(starts[1], MTIME);
        bytes[at..at + FIELD_LEN].copy_from_slice(b"DEADBEEF");
        check!(Initrd::parse(&bytes).is_ok(), "c_mtime DEADBEEF");
        Ok(())
    }

    fn empty_archive_is_valid() -> TestResult {
        let (bytes, _) = archive(&[]);
        check_eq!(bytes.len(), 124, "a trailer entry alone");
        let initrd = require_ok!(Initrd::parse(&bytes));
        check!(initrd.is_empty());
        check_eq!(initrd.names().count(), 0);
        check_eq!(initrd.find("hello"), None);
        // GNU cpio pads its archives with zeros to a 512-byte block.
        let (mut bytes, _) = two_files();
        bytes.resize(512, 0);
        check_eq!(require_ok!(Initrd::parse(&bytes)).len(), 2);
        Ok(())
    }

    fn rejects_bad_headers() -> TestResult {
        let (bytes, starts) = two_files();
        // Other cpio formats' magics (crc, odc), and none, at every entry.
        let magics: [&[u8; 6]; 5] = [b"070702", b"070707", b"070700", b"170701", &[0; 6]];
        for magic in magics {
            for (index, &offset) in starts.iter().enumerate() {
                let mut copy = bytes.clone();
                copy[offset..offset + MAGIC.len()].copy_from_slice(magic);
                check_eq!(
                    Initrd::parse(&copy).err(),
                    Some(InitrdError::BadMagic { index, offset }),
                    "{magic:?} at entry {index}"
                );
            }
        }
        // The archive ends inside a header.
        check_eq!(
            Initrd::parse(&bytes[..5]).err(),
            Some(InitrdError::TruncatedHeader {
                index: 0,
                offset: 0
            })
        );
        check_eq!(
            Initrd::parse(&bytes[..starts[1] + HEADER_LEN - 1]).err(),
            Some(InitrdError::TruncatedHeader {
                index: 1,
                offset: starts[1]
            })
        );
        Ok(())
    }

    fn rejects_bad_hex_fields() -> TestResult {
        let (bytes, starts) = two_files();
        // Not hex digits: a letter past f, a space (an `strtoul` would stop
        // there), a sign (`from_str_radix` would take it), a NUL.
        let bad_digits = [(0, b'g'), (3, b' '), (7, b'x'), (0, b'+'), (7, 0)];
        for (field, name) in FIELDS.into_iter().enumerate() {
            for (digit, bad) in bad_digits {
                let mut copy = bytes.clone();
                copy[field_at(starts[1], field) + digit] = bad;
                check_eq!(
                    Initrd::parse(&copy).err(),
                    Some(InitrdError::BadHexField {
                        index: 1,
                        field: name
                    }),
                    "{:?} as digit {digit} of {name}",
                    char::from(bad)
                );
            }
        }
        // The trailer's fields are checked too, even unused ones.
        let mut copy = bytes.clone();
        copy[field_at(starts[2], CHECK)] = b'z';
        check_eq!(
            Initrd::parse(&copy).err(),
            Some(InitrdError::BadHexField {
                index: 2,
                field: "c_check"
            })
        );
        Ok(())
    }

    /// `alpha`, then an entry 1 with this name field and `c_namesize`, then
    /// the trailer.
    fn with_name(name_field: &[u8], namesize: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        push_entry(&mut bytes, 1, REGULAR, b"alpha", b"first file");
        let mut header = fields(2, REGULAR, b"", b"2nd");
        header[NAMESIZE] = namesize;
        push_raw(&mut bytes, header, name_field, b"2nd");
        push_trailer(&mut bytes);
        bytes
    }

    fn rejects_bad_names() -> TestResult {
        check!(Initrd::parse(&with_name(b"beta\0", 5)).is_ok());
        let cases: [(&[u8], NameError); 7] = [
            (b"", NameError::Unterminated),
            (b"beta", NameError::Unterminated),
            (b"beta\0x", NameError::Unterminated),
            (b"\0", NameError::Empty),
            (b"be\0ta\0", NameError::NulInside),
            (b"beta\0\0", NameError::NulInside),
            (b"b\xffta\0", NameError::NotUtf8),
        ];
        for (name_field, problem) in cases {
            check_eq!(
                Initrd::parse(&with_name(name_field, name_field.len() as u32)).err(),
                Some(InitrdError::BadName { index: 1, problem }),
                "name field {name_field:?}"
            );
        }
        // A c_namesize one short or one long misplaces the NUL.
        let (bytes, starts) = two_files();
        for (namesize, problem) in [(4, NameError::Unterminated), (6, NameError::NulInside)] {
            let mut copy = bytes.clone();
            put_field(&mut copy, starts[1], NAMESIZE, namesize);
            check_eq!(
                Initrd::parse(&copy).err(),
                Some(InitrdError::BadName { index: 1, problem }),
                "c_namesize {namesize}"
            );
        }
        // A name past the end of the archive.
        let past_end = (bytes.len() - (starts[1] + HEADER_LEN) + 1) as u32;
        for namesize in [past_end, u32::MAX] {
            let mut copy = bytes.clone();
            put_field(&mut copy, starts[1], NAMESIZE, namesize);
            check_eq!(
                Initrd::parse(&copy).err(),
                Some(InitrdError::NameOutOfBounds { index: 1 }),
                "c_namesize {namesize:#x}"
            );
        }
        Ok(())
    }

    fn rejects_duplicate_names() -> TestResult {
        let (bytes, _) = archive(&[("same", b"1"), ("other", b"2"), ("same", b"3")]);
        check_eq!(
            Initrd::parse(&bytes).err(),
            Some(InitrdError::DuplicateName { index: 2, first: 0 })
        );
        let (bytes, _) = archive(&[("a", b"1"), ("a", b"1")]);
        check_eq!(
            Initrd::parse(&bytes).err(),
            Some(InitrdError::DuplicateName { index: 1, first: 0 })
        );
        // Names that share a prefix differ; the order is the archive's.
        let (bytes, _) = archive(&[("hello", b"1"), ("hello2", b"2"), ("hell", b"3")]);
        let initrd = require_ok!(Initrd::parse(&bytes));
        check!(initrd.names().eq(["hello", "hello2", "hell"]));
        check_eq!(initrd.find("hell"), Some(&b"3"[..]));
        Ok(())
    }

    fn rejects_other_file_types() -> TestResult {
        // Directory, symbolic link, character and block device, FIFO,
        // socket, and no type at all.
        let modes = [
            0o040_755, 0o120_777, 0o020_644, 0o060_644, 0o010_644, 0o140_755, 0o000_755,
        ];
        let (bytes, starts) = two_files();
        for mode in modes {
            let mut copy = bytes.clone();
            put_field(&mut copy, starts[1], MODE, mode);
            check_eq!(
                Initrd::parse(&copy).err(),
                Some(InitrdError::NotARegularFile { index: 1, mode }),
                "mode {mode:#o}"
            );
        }
        // An archive made by `find . | cpio -o -H newc` starts with ".".
        let mut bytes = Vec::new();
        push_entry(&mut bytes, 1, 0o040_755, b".", b"");
        push_trailer(&mut bytes);
        check_eq!(
            Initrd::parse(&bytes).err(),
            Some(InitrdError::NotARegularFile {
                index: 0,
                mode: 0o040_755
            })
        );
        // Permission bits do not matter; more than one link does.
        let (mut bytes, starts) = two_files();
        put_field(&mut bytes, starts[1], MODE, 0o100_000);
        check!(Initrd::parse(&bytes).is_ok(), "mode 0o100000");
        put_field(&mut bytes, starts[1], NLINK, 2);
        check_eq!(
            Initrd::parse(&bytes).err(),
            Some(InitrdError::HardLink { index: 1, nlink: 2 })
        );
        Ok(())
    }

    fn rejects_bad_data_ranges() -> TestResult {
        let (bytes, starts) = two_files();
        let beta_data = data_at(starts[1], "beta".len());
        let to_end = (bytes.len() - beta_data) as u32;
        let cases = [
            // Past the end, by one byte or by 4 GiB.
            (1, to_end + 1, InitrdError::DataOutOfBounds { index: 1 }),
            (1, u32::MAX, InitrdError::DataOutOfBounds { index: 1 }),
            // Up to the end: the trailer becomes data, and is missed.
            (1, to_end, InitrdError::MissingTrailer { files: 2 }),
            // Longer or shorter than the padding allows: the next entry is
            // looked for in the wrong place.
            (
                0,
                13,
                InitrdError::BadMagic {
                    index: 1,
                    offset: starts[1] + 4,
                },
            ),
            (
                0,
                0,
                InitrdError::BadMagic {
                    index: 1,
                    offset: data_at(0, "alpha".len()),
                },
            ),
        ];
        for (entry, size, expected) in cases {
            let mut copy = bytes.clone();
            put_field(&mut copy, starts[entry], FILESIZE, size);
            check_eq!(
                Initrd::parse(&copy).err(),
                Some(expected),
                "entry {entry}'s c_filesize {size:#x}"
            );
        }
        Ok(())
    }

    /// An archive that ends where a name or data ends, before the padding
    /// that must follow it.
    fn rejects_padding_past_the_end() -> TestResult {
        let (bytes, starts) = two_files();
        // "beta\0" ends 3 bytes after a multiple of 4, "2nd" too; the
        // trailer's name 1 byte after.
        let beta_name_end = starts[1] + HEADER_LEN + "beta".len() + 1;
        let beta_data_end = data_at(starts[1], "beta".len()) + 3;
        let trailer_name_end = starts[2] + HEADER_LEN + TRAILER.len() + 1;
        let cases = [
            (beta_name_end, 1),
            (beta_data_end, 1),
            (trailer_name_end, 2),
            (trailer_name_end + 1, 2),
            (trailer_name_end + 2, 2),
        ];
        for (len, index) in cases {
            check!(len % 4 != 0, "{len} is a multiple of 4");
            check_eq!(
                Initrd::parse(&bytes[..len]).err(),
                Some(InitrdError::PaddingOutOfBounds { index }),
                "archive cut to {len} bytes"
            );
        }
        Ok(())
    }

    fn requires_a_trailer() -> TestResult {
        check_eq!(
            Initrd::parse(&[]).err(),
            Some(InitrdError::MissingTrailer { files: 0 })
        );
        let (bytes, starts) = two_files();
        check_eq!(
            Initrd::parse(&bytes[..starts[2]]).err(),
            Some(InitrdError::MissingTrailer { files: 2 })
        );
        // A name that is nearly the trailer's is a file's, and the trailer's
        // mode 0 is no regular file's.
        let mut copy = bytes.clone();
        copy[starts[2] + HEADER_LEN + TRAILER.len() - 1] = b'?';
        check_eq!(
            Initrd::parse(&copy).err(),
            Some(InitrdError::NotARegularFile { index: 2, mode: 0 })
        );
        // Only zeros may follow the trailer: not another archive (Linux
        // reads concatenated archives; this kernel does not), nor a stray
        // byte.
        let mut twice = bytes.clone();
        twice.extend_from_slice(&bytes);
        check_eq!(
            Initrd::parse(&twice).err(),
            Some(InitrdError::BytesAfterTrailer {
                offset: bytes.len()
            })
        );
        let mut stray = bytes.clone();
        stray.extend_from_slice(&[0, 0, 0, 1]);
        check_eq!(
            Initrd::parse(&stray).err(),
            Some(InitrdError::BytesAfterTrailer {
                offset: bytes.len() + 3
            })
        );
        Ok(())
    }

    fn limits_the_file_count() -> TestResult {
        let names: Vec<String> = (0..=MAX_FILES).map(|i| format!("file{i}")).collect();
        let files: Vec<(&str, &[u8])> = names
            .iter()
            .map(|name| (name.as_str(), &b"x"[..]))
            .collect();
        let (bytes, _) = archive(&files[..MAX_FILES]);
        check_eq!(require_ok!(Initrd::parse(&bytes)).len(), MAX_FILES);
        let (bytes, _) = archive(&files);
        check_eq!(Initrd::parse(&bytes).err(), Some(InitrdError::TooManyFiles));
        Ok(())
    }

    /// Every prefix of an archive is an error (the trailer comes last), and
    /// every single-byte change gives a result, not a panic.
    fn truncated_archives_fail_cleanly() -> TestResult {
        let (bytes, _) = two_files();
        for len in 0..bytes.len() {
            let result = Initrd::parse(&bytes[..len]);
            check!(result.is_err(), "prefix of {len} bytes: {result:?}");
        }
        check!(Initrd::parse(&bytes).is_ok());
        let mut copy = bytes.clone();
        for at in 0..copy.len() {
            for flip in [0x01, 0x80, 0xff] {
                copy[at] ^= flip;
                // Only the absence of a panic matters here.
                let _ = Initrd::parse(&copy).map(|initrd| initrd.files().count());
                copy[at] ^= flip;
            }
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
        let names: Vec<&str> = initrd.names().collect();
        check!(
            names.is_sorted_by(|a, b| a < b),
            "the build writes the programs sorted by name: {names:?}"
        );
        Ok(())
    }
}
