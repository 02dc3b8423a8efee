//! QEMU's firmware configuration device (`fw_cfg`), legacy I/O-port interface.
//!
//! The runner passes the kernel command line as a named fw_cfg file
//! (`-fw_cfg name=opt/shootdown/cmdline,string=...`), so the command line can
//! change without rebuilding the disk image.
//!
//! Protocol: write a 16-bit *selector* to port 0x510, then read the selected
//! item byte by byte from port 0x511. Item 0x0000 holds the signature "QEMU";
//! item 0x0019 is the file directory: a big-endian `u32` count followed by one
//! 64-byte record per file (`u32` size, `u16` selector, `u16` reserved,
//! 56-byte NUL-terminated name), all big-endian.

use x86_64::instructions::port::Port;

const SELECTOR_PORT: u16 = 0x510;
const DATA_PORT: u16 = 0x511;
const SIGNATURE_ITEM: u16 = 0x0000;
const FILE_DIRECTORY_ITEM: u16 = 0x0019;
const FILE_NAME_LEN: usize = 56;

/// Why a fw_cfg file could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum FwCfgError {
    /// The machine has no fw_cfg device (not QEMU, or disabled).
    NoDevice,
    /// The device has no file of that name.
    NotFound,
    /// The file is larger than the caller's buffer.
    TooLarge { size: usize, capacity: usize },
}

/// One fw_cfg access session: selecting an item resets the read position.
struct FwCfg {
    selector: Port<u16>,
    data: Port<u8>,
}

impl FwCfg {
    fn new() -> Self {
        Self {
            selector: Port::new(SELECTOR_PORT),
            data: Port::new(DATA_PORT),
        }
    }

    fn select(&mut self, item: u16) {
        // Port 0x510 is fw_cfg's selector register; selecting an item
        // only changes what the data port returns. Without the device the
        // write goes nowhere.
        // SAFETY: a selector write affects nothing but fw_cfg.
        unsafe { self.selector.write(item) }
    }

    fn read_into(&mut self, buffer: &mut [u8]) {
        for byte in buffer {
            // Port 0x511 is fw_cfg's data register; reading it only
            // advances the device's read position within the selected item.
            // SAFETY: a data-port read affects nothing but fw_cfg.
            *byte = unsafe { self.data.read() };
        }
    }

    fn read_be_u32(&mut self) -> u32 {
        let mut bytes = [0; 4];
        self.read_into(&mut bytes);
        u32::from_be_bytes(bytes)
    }
}

/// Reads the fw_cfg file `name` into `buffer`, returning its length.
pub fn read_file(name: &str, buffer: &mut [u8]) -> Result<usize, FwCfgError> {
    let mut device = FwCfg::new();
    device.select(SIGNATURE_ITEM);
    let mut signature = [0; 4];
    device.read_into(&mut signature);
    if &signature != b"QEMU" {
        return Err(FwCfgError::NoDevice);
    }

    device.select(FILE_DIRECTORY_ITEM);
    let count = device.read_be_u32();
    for _ in 0..count {
        let size = device.read_be_u32() as usize;
        let mut selector_and_reserved = [0; 4];
        device.read_into(&mut selector_and_reserved);
        let mut raw_name = [0; FILE_NAME_LEN];
        device.read_into(&mut raw_name);

        let name_len = raw_name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(FILE_NAME_LEN);
        if &raw_name[..name_len] != name.as_bytes() {
            continue;
        }
        if size > buffer.len() {
            return Err(FwCfgError::TooLarge {
                size,
                capacity: buffer.len(),
            });
        }
        let selector = u16::from_be_bytes([selector_and_reserved[0], selector_and_reserved[1]]);
        device.select(selector);
        device.read_into(&mut buffer[..size]);
        return Ok(size);
    }
    Err(FwCfgError::NotFound)
}
