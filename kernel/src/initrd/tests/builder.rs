//! Archives built entry by entry, and the places of their fields, for the
//! tests to break one at a time.

use std::vec::Vec;

use super::super::{
    FIELD_LEN, FIELDS, FILESIZE, HEADER_LEN, MAGIC, MODE, NAMESIZE, NLINK, TRAILER,
};

/// The mode the build gives every program: a regular file, `rwxr-xr-x`.
pub(super) const REGULAR: u32 = 0o100_755;

/// `c_mtime`'s place among the fields.
pub(super) const MTIME: usize = 5;

/// `c_check`'s place among the fields.
pub(super) const CHECK: usize = 12;

pub(super) fn pad(bytes: &mut Vec<u8>) {
    bytes.resize(bytes.len().next_multiple_of(4), 0);
}

/// Appends one entry: the magic, `fields` as 8 hex digits each, then
/// `name_field` as it is (with whatever NUL the caller gives) and
/// `data`, each padded to 4 bytes.
pub(super) fn push_raw(
    bytes: &mut Vec<u8>,
    fields: [u32; FIELDS.len()],
    name_field: &[u8],
    data: &[u8],
) {
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
pub(super) fn fields(ino: u32, mode: u32, name: &[u8], data: &[u8]) -> [u32; FIELDS.len()] {
    let mut fields = [0; FIELDS.len()];
    fields[0] = ino;
    fields[MODE] = mode;
    fields[NLINK] = 1;
    fields[FILESIZE] = data.len() as u32;
    fields[NAMESIZE] = name.len() as u32 + 1;
    fields
}

/// Appends a well-formed entry called `name`.
pub(super) fn push_entry(bytes: &mut Vec<u8>, ino: u32, mode: u32, name: &[u8], data: &[u8]) {
    let mut name_field = Vec::from(name);
    name_field.push(0);
    push_raw(bytes, fields(ino, mode, name, data), &name_field, data);
}

/// Appends the trailer as the `cpio` crate writes it (inode and mode 0).
pub(super) fn push_trailer(bytes: &mut Vec<u8>) {
    push_entry(bytes, 0, 0, TRAILER.as_bytes(), &[]);
}

/// An archive of `files` laid out as `boot/build/ramdisk.rs` writes it
/// (inode numbers from 1, the trailer last), and where each entry
/// starts, the trailer's last.
pub(super) fn archive(files: &[(&str, &[u8])]) -> (Vec<u8>, Vec<usize>) {
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

pub(super) fn two_files() -> (Vec<u8>, Vec<usize>) {
    archive(&[("alpha", b"first file"), ("beta", b"2nd")])
}

/// Where header field `field` of the entry starting at `entry` is.
pub(super) const fn field_at(entry: usize, field: usize) -> usize {
    entry + MAGIC.len() + field * FIELD_LEN
}

/// Where the data of the entry at `entry`, with a name of `name_len`
/// bytes (without the NUL), starts.
pub(super) const fn data_at(entry: usize, name_len: usize) -> usize {
    (entry + HEADER_LEN + name_len + 1).next_multiple_of(4)
}

/// Writes `value` into a header field, as 8 hex digits.
pub(super) fn put_field(bytes: &mut [u8], entry: usize, field: usize, value: u32) {
    let at = field_at(entry, field);
    bytes[at..at + FIELD_LEN].copy_from_slice(format!("{value:08x}").as_bytes());
}
