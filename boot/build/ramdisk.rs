//! The ramdisk archive: the user programs, packed for the kernel.
//!
//! The format (all integers little-endian `u64`, everything 8-byte aligned),
//! read by the kernel's `initrd` module:
//!
//! ```text
//! offset 0    magic    b"SDRAMFS1"
//! offset 8    count    number of files
//! offset 16   count entries of 48 bytes each, sorted by name:
//!               name    [u8; 32]  UTF-8, padded with NUL bytes (no NUL inside)
//!               offset  u64       where the file's bytes start, from the
//!                                 start of the archive; a multiple of 8
//!               len     u64       the file's length in bytes
//! then        the files' bytes, each at its offset, padded with zeros to a
//!             multiple of 8
//! ```

/// The first eight bytes of every archive.
pub const MAGIC: &[u8; 8] = b"SDRAMFS1";

/// The longest file name, in bytes.
pub const NAME_LEN: usize = 32;

const HEADER_LEN: usize = 16;
const ENTRY_LEN: usize = NAME_LEN + 16;

/// Packs `files` (name and contents) into an archive.
///
/// # Panics
///
/// On a name that is empty, longer than [`NAME_LEN`], contains a NUL byte or
/// is repeated: mistakes in the build, not in anyone's input.
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
    archive.extend_from_slice(MAGIC);
    archive.extend_from_slice(&(sorted.len() as u64).to_le_bytes());
    let mut offset = HEADER_LEN + sorted.len() * ENTRY_LEN;
    for (name, contents) in &sorted {
        assert!(
            !name.is_empty() && name.len() <= NAME_LEN && !name.contains('\0'),
            "ramdisk file name '{name}' must be 1 to {NAME_LEN} bytes without NUL"
        );
        let mut padded = [0u8; NAME_LEN];
        padded[..name.len()].copy_from_slice(name.as_bytes());
        archive.extend_from_slice(&padded);
        archive.extend_from_slice(&(offset as u64).to_le_bytes());
        archive.extend_from_slice(&(contents.len() as u64).to_le_bytes());
        offset += contents.len().next_multiple_of(8);
    }
    for (_, contents) in &sorted {
        archive.extend_from_slice(contents);
        archive.resize(archive.len().next_multiple_of(8), 0);
    }
    debug_assert_eq!(archive.len(), offset);
    archive
}
