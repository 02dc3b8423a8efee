//! Archives the reader must refuse, each broken in one field, with the error
//! that names what is wrong.

use std::vec::Vec;

use super::super::{
    FIELDS, FILESIZE, HEADER_LEN, Initrd, InitrdError, MAGIC, MODE, NAMESIZE, NLINK, NameError,
    TRAILER,
};
use super::builder::*;

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
