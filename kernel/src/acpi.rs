//! Finding the CPUs: the ACPI MADT.
//!
//! The firmware describes the machine's processors in the *Multiple APIC
//! Description Table*. The bootloader gives us the physical address of the
//! RSDP; from there the RSDT (32-bit pointers) or XSDT (64-bit pointers) lists
//! every table, and the one signed `APIC` is the MADT. Its entries we use:
//!
//! | type | entry                         | fields used                            |
//! |------|-------------------------------|----------------------------------------|
//! | 0    | processor local APIC          | APIC id (u8), flags                    |
//! | 5    | local APIC address override   | 64-bit LAPIC physical address          |
//! | 9    | processor local x2APIC        | x2APIC id (u32), flags                 |
//!
//! Flags bit 0 is *enabled*; a CPU without it is absent or hot-pluggable and
//! must not be started. Firmware may list a CPU twice (once as type 0, once
//! as type 9): the first entry for an APIC id wins.
//!
//! Parsing works on byte slices so it can be tested on hand-made tables
//! (host tests); [`discover`] reads physical memory through the function it
//! is given. It is hand-written rather than taken from the `acpi` crate on
//! purpose: three entry types and a checksum are the whole story of how a
//! kernel finds its CPUs, and a student can read it in one sitting.

use alloc::{vec, vec::Vec};
use core::fmt;

use x86_64::PhysAddr;

const SDT_HEADER_LEN: usize = 36;
const MADT_ENTRIES_OFFSET: usize = SDT_HEADER_LEN + 8;
const FLAG_ENABLED: u32 = 1 << 0;
/// The legacy APIC id that means "no APIC" in type-0 entries.
const INVALID_XAPIC_ID: u32 = 0xFF;

/// One processor the firmware lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MadtCpu {
    pub apic_id: u32,
    pub enabled: bool,
}

/// What the MADT says about the CPUs and their local APICs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    pub local_apic_address: u64,
    /// Every distinct processor, enabled or not, in table order.
    pub cpus: Vec<MadtCpu>,
    /// Entries ignored because their APIC id was already listed.
    pub duplicates: usize,
}

impl CpuTopology {
    /// The APIC ids of the CPUs that may be started.
    pub fn enabled_apic_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus
            .iter()
            .filter(|cpu| cpu.enabled)
            .map(|cpu| cpu.apic_id)
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum AcpiError {
    NoRsdp,
    BadRsdp,
    BadChecksum([u8; 4]),
    NoMadt,
    Malformed(&'static str),
}

impl fmt::Display for AcpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRsdp => write!(f, "the bootloader found no ACPI RSDP"),
            Self::BadRsdp => write!(f, "the ACPI RSDP has a bad signature or checksum"),
            Self::BadChecksum(signature) => {
                write!(
                    f,
                    "ACPI table {} has a bad checksum",
                    core::str::from_utf8(signature).unwrap_or("????")
                )
            }
            Self::NoMadt => write!(f, "the firmware has no ACPI MADT (APIC) table"),
            Self::Malformed(what) => write!(f, "malformed ACPI table: {what}"),
        }
    }
}

fn u32_at(bytes: &[u8], offset: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        bytes.get(offset..offset + 4)?.try_into().ok()?,
    ))
}

fn u64_at(bytes: &[u8], offset: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        bytes.get(offset..offset + 8)?.try_into().ok()?,
    ))
}

fn checksum_ok(bytes: &[u8]) -> bool {
    bytes.iter().fold(0u8, |sum, &byte| sum.wrapping_add(byte)) == 0
}

/// Parses a whole MADT (header included).
pub fn parse_madt(table: &[u8]) -> Result<CpuTopology, AcpiError> {
    let too_short = AcpiError::Malformed("MADT shorter than its header");
    let mut local_apic_address = u64::from(u32_at(table, SDT_HEADER_LEN).ok_or(too_short)?);
    let mut cpus: Vec<MadtCpu> = Vec::new();
    let mut duplicates = 0;
    let mut offset = MADT_ENTRIES_OFFSET;
    while offset < table.len() {
        let entry_type = table[offset];
        let length = usize::from(
            *table
                .get(offset + 1)
                .ok_or(AcpiError::Malformed("MADT entry cut short"))?,
        );
        let entry = table
            .get(offset..offset + length)
            .filter(|_| length >= 2)
            .ok_or(AcpiError::Malformed("MADT entry length out of bounds"))?;
        match parse_madt_entry(entry_type, entry)? {
            MadtEntry::Cpu(cpu) if cpus.iter().any(|known| known.apic_id == cpu.apic_id) => {
                duplicates += 1;
            }
            MadtEntry::Cpu(cpu) => cpus.push(cpu),
            MadtEntry::LocalApicAddress(address) => local_apic_address = address,
            MadtEntry::Other => {}
        }
        offset += length;
    }
    Ok(CpuTopology {
        local_apic_address,
        cpus,
        duplicates,
    })
}

/// What one MADT entry says, as far as this kernel cares.
enum MadtEntry {
    /// A CPU's local APIC or x2APIC (an entry with the invalid xAPIC id is
    /// `Other`).
    Cpu(MadtCpu),
    /// The 64-bit local APIC address that overrides the header's.
    LocalApicAddress(u64),
    /// Anything else (I/O APICs, interrupt overrides, ...).
    Other,
}

/// Reads the MADT entry `entry` (its type and length bytes included) of type
/// `entry_type`.
fn parse_madt_entry(entry_type: u8, entry: &[u8]) -> Result<MadtEntry, AcpiError> {
    Ok(match entry_type {
        0 => {
            let id = u32::from(
                *entry
                    .get(3)
                    .ok_or(AcpiError::Malformed("short local APIC entry"))?,
            );
            let flags = u32_at(entry, 4).ok_or(AcpiError::Malformed("short local APIC entry"))?;
            if id == INVALID_XAPIC_ID {
                MadtEntry::Other
            } else {
                MadtEntry::Cpu(MadtCpu {
                    apic_id: id,
                    enabled: flags & FLAG_ENABLED != 0,
                })
            }
        }
        5 => MadtEntry::LocalApicAddress(
            u64_at(entry, 4).ok_or(AcpiError::Malformed("short local APIC address override"))?,
        ),
        9 => {
            let id = u32_at(entry, 4).ok_or(AcpiError::Malformed("short local x2APIC entry"))?;
            let flags = u32_at(entry, 8).ok_or(AcpiError::Malformed("short local x2APIC entry"))?;
            MadtEntry::Cpu(MadtCpu {
                apic_id: id,
                enabled: flags & FLAG_ENABLED != 0,
            })
        }
        _ => MadtEntry::Other,
    })
}

/// Reads a whole system description table at `addr`, checking its checksum.
fn read_table(
    addr: PhysAddr,
    read_bytes: &impl Fn(PhysAddr, &mut [u8]),
) -> Result<([u8; 4], Vec<u8>), AcpiError> {
    let mut header = [0; SDT_HEADER_LEN];
    read_bytes(addr, &mut header);
    let signature: [u8; 4] = header[0..4].try_into().unwrap_or_default();
    let length = u32_at(&header, 4).unwrap_or(0) as usize;
    if !(SDT_HEADER_LEN..=1 << 20).contains(&length) {
        return Err(AcpiError::Malformed("table length implausible"));
    }
    let mut table = vec![0; length];
    read_bytes(addr, &mut table);
    if !checksum_ok(&table) {
        return Err(AcpiError::BadChecksum(signature));
    }
    Ok((signature, table))
}

/// Finds the MADT from the RSDP and parses it, reading physical memory with
/// `read_bytes` (`hal::phys::read_bytes` on the machine: the tables live in
/// firmware memory the kernel does not own).
pub fn discover(
    rsdp_addr: Option<u64>,
    read_bytes: impl Fn(PhysAddr, &mut [u8]),
) -> Result<CpuTopology, AcpiError> {
    let rsdp_addr = PhysAddr::new(rsdp_addr.ok_or(AcpiError::NoRsdp)?);
    let mut rsdp = [0; 36];
    read_bytes(rsdp_addr, &mut rsdp);
    if &rsdp[0..8] != b"RSD PTR " || !checksum_ok(&rsdp[..20]) {
        return Err(AcpiError::BadRsdp);
    }
    let revision = rsdp[15];
    let (root, pointer_size) = match u64_at(&rsdp, 24) {
        Some(xsdt) if revision >= 2 && xsdt != 0 => (xsdt, 8),
        _ => (u64::from(u32_at(&rsdp, 16).unwrap_or(0)), 4),
    };
    let (_, root_table) = read_table(PhysAddr::new(root), &read_bytes)?;
    for pointer in root_table[SDT_HEADER_LEN..].chunks_exact(pointer_size) {
        let table_addr = match pointer_size {
            8 => u64_at(pointer, 0),
            _ => u32_at(pointer, 0).map(u64::from),
        }
        .unwrap_or(0);
        let mut signature = [0; 4];
        read_bytes(PhysAddr::new(table_addr), &mut signature);
        if &signature == b"APIC" {
            let (_, madt) = read_table(PhysAddr::new(table_addr), &read_bytes)?;
            return parse_madt(&madt);
        }
    }
    Err(AcpiError::NoMadt)
}

#[cfg(test)]
mod tests;
