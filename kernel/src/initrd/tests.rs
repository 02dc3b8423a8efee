//! Host tests of the archive reader, on archives built here entry by entry
//! and broken one field at a time. (The real boot ramdisk is checked in the
//! kernel: `src/ktest/suites/initrd.rs`.)

use std::{format, string::String, vec::Vec};

use super::{
    FIELD_LEN, FIELDS, FILESIZE, HEADER_LEN, Initrd, InitrdError, MAGIC, MAX_FILES, MODE, NAMESIZE,
    NLINK, NameError, TRAILER,
};

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

#[test]
fn finds_files_by_name() {
    let (bytes, _) = two_files();
    let initrd = Initrd::parse(&bytes)
        .unwrap_or_else(|error| panic!("Initrd::parse(&bytes) failed: {error}"));
    assert_eq!(initrd.len(), 2);
    assert_eq!(initrd.find("alpha"), Some(&b"first file"[..]));
    assert_eq!(initrd.find("beta"), Some(&b"2nd"[..]));
    assert_eq!(initrd.find("gamma"), None);
    assert_eq!(initrd.find("alph"), None);
    assert_eq!(initrd.find("alpha\0"), None);
    assert_eq!(initrd.find(TRAILER), None);
    assert!(initrd.names().eq(["alpha", "beta"]));

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
    let initrd = Initrd::parse(&bytes)
        .unwrap_or_else(|error| panic!("Initrd::parse(&bytes) failed: {error}"));
    assert_eq!(initrd.len(), files.len());
    for (name, contents) in files {
        assert_eq!(initrd.find(name), Some(contents), "{name}");
    }
    assert!(initrd.files().eq(files));

    // Upper-case hex digits are hex digits too.
    let (mut bytes, starts) = two_files();
    let at = field_at(starts[1], MTIME);
    bytes[at..at + FIELD_LEN].copy_from_slice(b"DEADBEEF");
    assert!(Initrd::parse(&bytes).is_ok(), "c_mtime DEADBEEF");
}

#[test]
fn empty_archive_is_valid() {
    let (bytes, _) = archive(&[]);
    assert_eq!(bytes.len(), 124, "a trailer entry alone");
    let initrd = Initrd::parse(&bytes)
        .unwrap_or_else(|error| panic!("Initrd::parse(&bytes) failed: {error}"));
    assert!(initrd.is_empty());
    assert_eq!(initrd.names().count(), 0);
    assert_eq!(initrd.find("hello"), None);
    // GNU cpio pads its archives with zeros to a 512-byte block.
    let (mut bytes, _) = two_files();
    bytes.resize(512, 0);
    assert_eq!(
        Initrd::parse(&bytes)
            .unwrap_or_else(|error| panic!("Initrd::parse(&bytes) failed: {error}"))
            .len(),
        2
    );
}

#[test]
fn rejects_bad_headers() {
    let (bytes, starts) = two_files();
    // Other cpio formats' magics (crc, odc), and none, at every entry.
    let magics: [&[u8; 6]; 5] = [b"070702", b"070707", b"070700", b"170701", &[0; 6]];
    for magic in magics {
        for (index, &offset) in starts.iter().enumerate() {
            let mut copy = bytes.clone();
            copy[offset..offset + MAGIC.len()].copy_from_slice(magic);
            assert_eq!(
                Initrd::parse(&copy).err(),
                Some(InitrdError::BadMagic { index, offset }),
                "{magic:?} at entry {index}"
            );
        }
    }
    // The archive ends inside a header.
    assert_eq!(
        Initrd::parse(&bytes[..5]).err(),
        Some(InitrdError::TruncatedHeader {
            index: 0,
            offset: 0
        })
    );
    assert_eq!(
        Initrd::parse(&bytes[..starts[1] + HEADER_LEN - 1]).err(),
        Some(InitrdError::TruncatedHeader {
            index: 1,
            offset: starts[1]
        })
    );
}

#[test]
fn rejects_bad_hex_fields() {
    let (bytes, starts) = two_files();
    // Not hex digits: a letter past f, a space (an `strtoul` would stop
    // there), a sign (`from_str_radix` would take it), a NUL.
    let bad_digits = [(0, b'g'), (3, b' '), (7, b'x'), (0, b'+'), (7, 0)];
    for (field, name) in FIELDS.into_iter().enumerate() {
        for (digit, bad) in bad_digits {
            let mut copy = bytes.clone();
            copy[field_at(starts[1], field) + digit] = bad;
            assert_eq!(
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
    assert_eq!(
        Initrd::parse(&copy).err(),
        Some(InitrdError::BadHexField {
            index: 2,
            field: "c_check"
        })
    );
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

#[test]
fn rejects_bad_names() {
    assert!(Initrd::parse(&with_name(b"beta\0", 5)).is_ok());
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
        assert_eq!(
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
        assert_eq!(
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
        assert_eq!(
            Initrd::parse(&copy).err(),
            Some(InitrdError::NameOutOfBounds { index: 1 }),
            "c_namesize {namesize:#x}"
        );
    }
}

#[test]
fn rejects_duplicate_names() {
    let (bytes, _) = archive(&[("same", b"1"), ("other", b"2"), ("same", b"3")]);
    assert_eq!(
        Initrd::parse(&bytes).err(),
        Some(InitrdError::DuplicateName { index: 2, first: 0 })
    );
    let (bytes, _) = archive(&[("a", b"1"), ("a", b"1")]);
    assert_eq!(
        Initrd::parse(&bytes).err(),
        Some(InitrdError::DuplicateName { index: 1, first: 0 })
    );
    // Names that share a prefix differ; the order is the archive's.
    let (bytes, _) = archive(&[("hello", b"1"), ("hello2", b"2"), ("hell", b"3")]);
    let initrd = Initrd::parse(&bytes)
        .unwrap_or_else(|error| panic!("Initrd::parse(&bytes) failed: {error}"));
    assert!(initrd.names().eq(["hello", "hello2", "hell"]));
    assert_eq!(initrd.find("hell"), Some(&b"3"[..]));
}

#[test]
fn rejects_other_file_types() {
    // Directory, symbolic link, character and block device, FIFO,
    // socket, and no type at all.
    let modes = [
        0o040_755, 0o120_777, 0o020_644, 0o060_644, 0o010_644, 0o140_755, 0o000_755,
    ];
    let (bytes, starts) = two_files();
    for mode in modes {
        let mut copy = bytes.clone();
        put_field(&mut copy, starts[1], MODE, mode);
        assert_eq!(
            Initrd::parse(&copy).err(),
            Some(InitrdError::NotARegularFile { index: 1, mode }),
            "mode {mode:#o}"
        );
    }
    // An archive made by `find . | cpio -o -H newc` starts with ".".
    let mut bytes = Vec::new();
    push_entry(&mut bytes, 1, 0o040_755, b".", b"");
    push_trailer(&mut bytes);
    assert_eq!(
        Initrd::parse(&bytes).err(),
        Some(InitrdError::NotARegularFile {
            index: 0,
            mode: 0o040_755
        })
    );
    // Permission bits do not matter; more than one link does.
    let (mut bytes, starts) = two_files();
    put_field(&mut bytes, starts[1], MODE, 0o100_000);
    assert!(Initrd::parse(&bytes).is_ok(), "mode 0o100000");
    put_field(&mut bytes, starts[1], NLINK, 2);
    assert_eq!(
        Initrd::parse(&bytes).err(),
        Some(InitrdError::HardLink { index: 1, nlink: 2 })
    );
}

#[test]
fn rejects_bad_data_ranges() {
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
        assert_eq!(
            Initrd::parse(&copy).err(),
            Some(expected),
            "entry {entry}'s c_filesize {size:#x}"
        );
    }
}

/// An archive that ends where a name or data ends, before the padding
/// that must follow it.
#[test]
fn rejects_padding_past_the_end() {
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
        assert!(len % 4 != 0, "{len} is a multiple of 4");
        assert_eq!(
            Initrd::parse(&bytes[..len]).err(),
            Some(InitrdError::PaddingOutOfBounds { index }),
            "archive cut to {len} bytes"
        );
    }
}

#[test]
fn requires_a_trailer() {
    assert_eq!(
        Initrd::parse(&[]).err(),
        Some(InitrdError::MissingTrailer { files: 0 })
    );
    let (bytes, starts) = two_files();
    assert_eq!(
        Initrd::parse(&bytes[..starts[2]]).err(),
        Some(InitrdError::MissingTrailer { files: 2 })
    );
    // A name that is nearly the trailer's is a file's, and the trailer's
    // mode 0 is no regular file's.
    let mut copy = bytes.clone();
    copy[starts[2] + HEADER_LEN + TRAILER.len() - 1] = b'?';
    assert_eq!(
        Initrd::parse(&copy).err(),
        Some(InitrdError::NotARegularFile { index: 2, mode: 0 })
    );
    // Only zeros may follow the trailer: not another archive (Linux
    // reads concatenated archives; this kernel does not), nor a stray
    // byte.
    let mut twice = bytes.clone();
    twice.extend_from_slice(&bytes);
    assert_eq!(
        Initrd::parse(&twice).err(),
        Some(InitrdError::BytesAfterTrailer {
            offset: bytes.len()
        })
    );
    let mut stray = bytes.clone();
    stray.extend_from_slice(&[0, 0, 0, 1]);
    assert_eq!(
        Initrd::parse(&stray).err(),
        Some(InitrdError::BytesAfterTrailer {
            offset: bytes.len() + 3
        })
    );
}

#[test]
fn limits_the_file_count() {
    let names: Vec<String> = (0..=MAX_FILES).map(|i| format!("file{i}")).collect();
    let files: Vec<(&str, &[u8])> = names
        .iter()
        .map(|name| (name.as_str(), &b"x"[..]))
        .collect();
    let (bytes, _) = archive(&files[..MAX_FILES]);
    assert_eq!(
        Initrd::parse(&bytes)
            .unwrap_or_else(|error| panic!("Initrd::parse(&bytes) failed: {error}"))
            .len(),
        MAX_FILES
    );
    let (bytes, _) = archive(&files);
    assert_eq!(Initrd::parse(&bytes).err(), Some(InitrdError::TooManyFiles));
}

/// Every prefix of an archive is an error (the trailer comes last), and
/// every single-byte change gives a result, not a panic.
#[test]
fn truncated_archives_fail_cleanly() {
    let (bytes, _) = two_files();
    for len in 0..bytes.len() {
        let result = Initrd::parse(&bytes[..len]);
        assert!(result.is_err(), "prefix of {len} bytes: {result:?}");
    }
    assert!(Initrd::parse(&bytes).is_ok());
    let mut copy = bytes.clone();
    for at in 0..copy.len() {
        for flip in [0x01, 0x80, 0xff] {
            copy[at] ^= flip;
            // Only the absence of a panic matters here.
            let _ = Initrd::parse(&copy).map(|initrd| initrd.files().count());
            copy[at] ^= flip;
        }
    }
}
