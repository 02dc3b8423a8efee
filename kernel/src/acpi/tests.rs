//! Host tests of the MADT parser on hand-made tables.

use alloc::vec::Vec;

use super::{AcpiError, MadtCpu, SDT_HEADER_LEN, parse_madt};

fn madt(entries: &[&[u8]]) -> Vec<u8> {
    let mut table = alloc::vec![0; SDT_HEADER_LEN];
    table[0..4].copy_from_slice(b"APIC");
    table.extend_from_slice(&0xFEE0_0000u32.to_le_bytes());
    table.extend_from_slice(&1u32.to_le_bytes());
    for entry in entries {
        table.extend_from_slice(entry);
    }
    table
}

fn xapic(id: u8, flags: u32) -> Vec<u8> {
    let mut entry = alloc::vec![0, 8, id, id];
    entry.extend_from_slice(&flags.to_le_bytes());
    entry
}

fn x2apic(id: u32, flags: u32) -> Vec<u8> {
    let mut entry = alloc::vec![9, 16, 0, 0];
    entry.extend_from_slice(&id.to_le_bytes());
    entry.extend_from_slice(&flags.to_le_bytes());
    entry.extend_from_slice(&id.to_le_bytes());
    entry
}

#[test]
fn parses_cpus_and_skips_duplicates() {
    let table = madt(&[
        &xapic(0, 1),
        &xapic(1, 0),
        &xapic(2, 3),
        &x2apic(2, 1),
        &xapic(0xFF, 1),
        &x2apic(300, 1),
    ]);
    let topology =
        parse_madt(&table).unwrap_or_else(|error| panic!("parse_madt(&table) failed: {error}"));
    assert_eq!(topology.local_apic_address, 0xFEE0_0000);
    assert_eq!(
        topology.cpus,
        alloc::vec![
            MadtCpu {
                apic_id: 0,
                enabled: true
            },
            MadtCpu {
                apic_id: 1,
                enabled: false
            },
            MadtCpu {
                apic_id: 2,
                enabled: true
            },
            MadtCpu {
                apic_id: 300,
                enabled: true
            },
        ]
    );
    assert_eq!(topology.duplicates, 1);
    assert_eq!(
        topology.enabled_apic_ids().collect::<Vec<_>>(),
        alloc::vec![0, 2, 300]
    );
}

#[test]
fn address_override_wins() {
    let mut override_entry = alloc::vec![5, 12, 0, 0];
    override_entry.extend_from_slice(&0x1_2345_6000u64.to_le_bytes());
    let table = madt(&[&xapic(0, 1), &override_entry]);
    assert_eq!(
        parse_madt(&table).map(|topology| topology.local_apic_address),
        Ok(0x1_2345_6000)
    );
}

#[test]
fn rejects_bad_entry_lengths() {
    let zero_length = madt(&[&[0, 0, 0, 0]]);
    assert_eq!(
        parse_madt(&zero_length),
        Err(AcpiError::Malformed("MADT entry length out of bounds"))
    );
    let overrun = madt(&[&[0, 200, 0, 0]]);
    assert_eq!(
        parse_madt(&overrun),
        Err(AcpiError::Malformed("MADT entry length out of bounds"))
    );
}
