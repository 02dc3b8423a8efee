//! The kernel command line under Bochs, which has no fw_cfg: written into
//! the image.
//!
//! The kernel image carries a fixed-size, empty command-line slot
//! (`kernel::cmdline::SLOT`, found by its two markers). The runner writes
//! the command line into the slot of its own temporary copy of the disk
//! image, and the kernel, finding no fw_cfg, reads it from its ELF file as
//! the bootloader loaded it. The images `cargo` builds are never modified,
//! and QEMU runs never read the slot.

use crate::machine::RunError;

/// The command-line slot, as `kernel::cmdline` lays it out: these markers
/// around [`CAPACITY`] bytes, NUL-padded. The kernel's constants are the
/// originals; the test `every_bios_image_has_one_empty_slot` checks that
/// these match them.
const START: &[u8; 16] = b"<shootdown-cmdl:";
const END: &[u8; 16] = b":shootdown-cmdl>";
pub const CAPACITY: usize = 1024;

/// The empty command-line slots in `image`: where each one's field starts.
fn empty_slots(image: &[u8]) -> Vec<usize> {
    let length = START.len() + CAPACITY + END.len();
    image
        .windows(START.len())
        .enumerate()
        .filter(|&(at, window)| {
            window == START
                && image.len() >= at + length
                && image[at + START.len()..][..CAPACITY]
                    .iter()
                    .all(|&byte| byte == 0)
                && image[at + START.len() + CAPACITY..].starts_with(END)
        })
        .map(|(at, _)| at + START.len())
        .collect()
}

/// Writes `cmdline` into the one empty command-line slot of `image`.
pub fn write(image: &mut [u8], cmdline: &str) -> Result<(), RunError> {
    if cmdline.len() > CAPACITY || cmdline.contains('\0') {
        return Err(RunError::CommandLineTooLong(cmdline.len()));
    }
    let field = match empty_slots(image)[..] {
        [field] => field,
        [] => {
            return Err(RunError::Slot(String::from(
                "none found (an image from before the slot, or its field split by the file system)",
            )));
        }
        ref several => {
            return Err(RunError::Slot(format!(
                "{} found; the runner cannot tell which one the kernel reads",
                several.len()
            )));
        }
    };
    image[field..][..cmdline.len()].copy_from_slice(cmdline.as_bytes());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image of `size` bytes of 0xcc with an empty slot at `at`.
    fn image_with_slot(size: usize, at: usize) -> Vec<u8> {
        let mut image = vec![0xcc; size];
        image[at..][..16].copy_from_slice(START);
        image[at + 16..][..CAPACITY].fill(0);
        image[at + 16 + CAPACITY..][..16].copy_from_slice(END);
        image
    }

    #[test]
    fn the_command_line_goes_into_the_slot() {
        let mut image = image_with_slot(4096, 100);
        write(&mut image, "exec=coherence:100,2").unwrap();
        assert_eq!(&image[116..][..20], b"exec=coherence:100,2");
        assert_eq!(image[136], 0);
        // Written once, the slot is no longer empty: a second write fails.
        assert!(matches!(write(&mut image, "x=y"), Err(RunError::Slot(_))));
    }

    #[test]
    fn no_slot_two_slots_and_long_lines_are_refused() {
        assert!(matches!(write(&mut [0; 64], ""), Err(RunError::Slot(_))));
        let mut two = image_with_slot(8192, 0);
        two[4000..].copy_from_slice(&image_with_slot(4192, 0));
        assert!(matches!(write(&mut two, ""), Err(RunError::Slot(_))));
        let mut image = image_with_slot(4096, 0);
        let long = "x".repeat(CAPACITY + 1);
        assert!(matches!(
            write(&mut image, &long),
            Err(RunError::CommandLineTooLong(_))
        ));
    }

    /// Both images carry exactly one empty slot, so the runner's markers
    /// and capacity match the kernel's (`kernel::cmdline::SLOT`), and the
    /// file system keeps the slot in one piece.
    #[test]
    fn every_bios_image_has_one_empty_slot() {
        for image in [crate::BIOS_IMAGE, crate::TESTS_BIOS_IMAGE] {
            let bytes = std::fs::read(image).unwrap_or_else(|error| panic!("{image}: {error}"));
            assert_eq!(empty_slots(&bytes).len(), 1, "{image}");
        }
    }
}
