//! Host tests of the archive reader, on archives built here entry by entry
//! and broken one field at a time. (The real boot ramdisk is checked in the
//! kernel: `src/ktest/suites/initrd.rs`.)

mod builder;
mod rejects;

use std::{format, string::String, vec::Vec};

use super::{FIELD_LEN, HEADER_LEN, Initrd, InitrdError, MAX_FILES, TRAILER};
use builder::*;

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
