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

use spin::Once;

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

/// Checks the boot ramdisk, `bytes` as the bootloader loaded them (found
/// and checked by `hal::ramdisk`). Called once at boot.
pub fn init(bytes: &'static [u8]) -> Result<&'static Initrd<'static>, InitrdError> {
    let initrd = Initrd::parse(bytes)?;
    Ok(INITRD.call_once(|| initrd))
}

/// The boot ramdisk, once [`init`] has checked it.
pub fn get() -> Option<&'static Initrd<'static>> {
    INITRD.get()
}

#[cfg(test)]
mod tests;
