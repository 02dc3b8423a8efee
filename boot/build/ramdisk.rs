//! The ramdisk archive: the user programs, packed for the kernel as a cpio
//! "newc" archive, the format of Linux's initramfs.
//!
//! Each program is one regular file at the top level of the archive, named
//! after the program, in name order, followed by the `TRAILER!!!` entry that
//! closes every cpio archive. Ordinary tools read it:
//!
//! ```text
//! cpio -itv < target/debug/build/boot-*/out/ramdisk.cpio
//! ```
//!
//! The `cpio` crate writes the headers; the kernel's `initrd` module reads
//! them back with its own checked reader.

use std::io::{self, Read};

use cpio::{NewcBuilder, NewcReader, newc};

/// Regular file, `rwxr-xr-x`: the programs are executables.
const MODE: u32 = 0o100_755;

/// Packs `files` (name and contents) into an archive, sorted by name so that
/// the same programs always give the same bytes (and the kernel lists them
/// in order).
///
/// # Panics
///
/// On a name that is empty, contains a NUL byte or is repeated, or a file of
/// 4 GiB or more (newc's sizes are 32 bits): mistakes in the build, not in
/// anyone's input.
pub fn pack(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for pair in sorted.windows(2) {
        assert!(
            pair[0].0 != pair[1].0,
            "two ramdisk files are named {}",
            pair[0].0
        );
    }

    let mut archive = Vec::new();
    for (index, (name, contents)) in sorted.into_iter().enumerate() {
        assert!(
            !name.is_empty() && !name.contains('\0'),
            "ramdisk file name '{name}' must be non-empty and without NUL"
        );
        let size = u32::try_from(contents.len())
            .unwrap_or_else(|_| panic!("ramdisk file {name} is too large for cpio"));
        // Inode numbers only need to differ (cpio tools use them to find
        // hard links); 0 is left unused.
        let ino = u32::try_from(index + 1).expect("fewer than 4 billion programs");
        let mut writer = NewcBuilder::new(name)
            .ino(ino)
            .mode(MODE)
            .uid(0)
            .gid(0)
            .nlink(1)
            .mtime(0)
            .write(archive, size);
        io::Write::write_all(&mut writer, contents).expect("writing to memory cannot fail");
        archive = writer.finish().expect("writing to memory cannot fail");
    }
    newc::trailer(archive).expect("writing to memory cannot fail")
}

/// Reads `archive` back with the `cpio` crate's reader and checks that it
/// holds exactly `files`, each with the fields [`pack`] gave it: a check of
/// the writer on every build, since a build script has no test harness.
///
/// # Panics
///
/// On any difference.
pub fn verify(archive: &[u8], files: &[(String, Vec<u8>)]) {
    let mut expected: Vec<&(String, Vec<u8>)> = files.iter().collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0));
    let mut rest = archive;
    let mut found = 0;
    loop {
        let mut reader = NewcReader::new(rest).expect("the ramdisk's cpio header is readable");
        let entry = reader.entry().clone();
        if entry.is_trailer() {
            let after = reader.finish().expect("the trailer's padding is readable");
            assert!(after.is_empty(), "bytes after the ramdisk's trailer");
            break;
        }
        let (name, contents) = expected
            .get(found)
            .unwrap_or_else(|| panic!("unexpected ramdisk entry {}", entry.name()));
        assert_eq!(entry.name(), name, "ramdisk entry {found}'s name");
        assert_eq!(entry.mode(), MODE, "{name}'s mode");
        assert_eq!(entry.nlink(), 1, "{name}'s link count");
        assert_eq!(entry.ino() as usize, found + 1, "{name}'s inode number");
        let mut data = Vec::new();
        reader
            .read_to_end(&mut data)
            .expect("the ramdisk's file data is readable");
        assert!(data == *contents, "{name}'s contents differ in the ramdisk");
        rest = reader.finish().expect("the ramdisk's padding is readable");
        found += 1;
    }
    assert_eq!(found, expected.len(), "files in the ramdisk");
    assert_eq!(
        archive.len() % 4,
        0,
        "a newc archive is a whole number of 4-byte words"
    );
}
