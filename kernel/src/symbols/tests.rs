//! Host tests of the symbol table reader, on a small hand-made file: whole,
//! cut short and damaged. (The running kernel's own table is checked in the
//! kernel: `src/ktest/suites/symbols.rs`.)

use std::vec::Vec;

use ::elf::abi::{
    EM_X86_64, ET_EXEC, SHN_UNDEF, SHT_PROGBITS, SHT_STRTAB, SHT_SYMTAB, STT_FUNC, STT_NOTYPE,
    STT_OBJECT,
};

use super::{find_symbol_table, nearest, sorted_code_symbols};

/// A symbol of the hand-made file.
struct Sym {
    name: &'static str,
    kind: u8,
    section: u16,
    value: u64,
    size: u64,
}

const SYMBOLS: [Sym; 6] = [
    Sym {
        name: "func",
        kind: STT_FUNC,
        section: 1,
        value: 0x1000,
        size: 0x20,
    },
    // At the same address as `func`, which has a size and wins.
    Sym {
        name: "func_label",
        kind: STT_NOTYPE,
        section: 1,
        value: 0x1000,
        size: 0,
    },
    // Extends up to the next symbol that counts.
    Sym {
        name: "label",
        kind: STT_NOTYPE,
        section: 1,
        value: 0x1100,
        size: 0,
    },
    // Neither counts: not defined here, not code.
    Sym {
        name: "undefined",
        kind: STT_FUNC,
        section: SHN_UNDEF,
        value: 0x1180,
        size: 0x10,
    },
    Sym {
        name: "object",
        kind: STT_OBJECT,
        section: 1,
        value: 0x1190,
        size: 0x10,
    },
    Sym {
        name: "last",
        kind: STT_FUNC,
        section: 1,
        value: 0x1200,
        size: 0x10,
    },
];

/// Where the hand-made file is "loaded".
const IMAGE_OFFSET: u64 = 0xffff_8000_0000_0000;

/// Byte offsets in the hand-made file: the header, 3 section headers
/// (null, `.symtab`, `.strtab`), the symbols (a null one first), the
/// strings.
const SECTIONS: usize = 64;

const SYMTAB: usize = SECTIONS + 3 * 64;

const STRTAB: usize = SYMTAB + (SYMBOLS.len() + 1) * 24;

/// Where section header `index`'s `sh_type` and `sh_link` are.
const fn sh_type(index: usize) -> usize {
    SECTIONS + index * 64 + 4
}

const fn sh_link(index: usize) -> usize {
    SECTIONS + index * 64 + 40
}

fn put(bytes: &mut [u8], at: usize, value: &[u8]) {
    bytes[at..at + value.len()].copy_from_slice(value);
}

/// A little-endian ELF64 file with no program headers and the section
/// headers, symbols and strings described above.
fn file() -> Vec<u8> {
    let mut strings = Vec::from(&b"\0"[..]);
    let mut name_offsets = Vec::new();
    for symbol in &SYMBOLS {
        name_offsets.push(strings.len() as u32);
        strings.extend_from_slice(symbol.name.as_bytes());
        strings.push(0);
    }
    let mut bytes = alloc::vec![0u8; STRTAB + strings.len()];
    put(&mut bytes, 0, b"\x7fELF\x02\x01\x01");
    put(&mut bytes, 16, &ET_EXEC.to_le_bytes());
    put(&mut bytes, 18, &EM_X86_64.to_le_bytes());
    put(&mut bytes, 20, &1u32.to_le_bytes());
    put(&mut bytes, 40, &(SECTIONS as u64).to_le_bytes());
    put(&mut bytes, 52, &64u16.to_le_bytes());
    put(&mut bytes, 54, &56u16.to_le_bytes());
    put(&mut bytes, 58, &64u16.to_le_bytes());
    put(&mut bytes, 60, &3u16.to_le_bytes());
    let tables = [
        (SHT_SYMTAB, SYMTAB, STRTAB - SYMTAB, 2u32, 24u64),
        (SHT_STRTAB, STRTAB, strings.len(), 0, 0),
    ];
    for (index, (kind, offset, size, link, entry_size)) in tables.into_iter().enumerate() {
        let at = SECTIONS + (index + 1) * 64;
        put(&mut bytes, at + 4, &kind.to_le_bytes());
        put(&mut bytes, at + 24, &(offset as u64).to_le_bytes());
        put(&mut bytes, at + 32, &(size as u64).to_le_bytes());
        put(&mut bytes, at + 40, &link.to_le_bytes());
        put(&mut bytes, at + 56, &entry_size.to_le_bytes());
    }
    for (index, symbol) in SYMBOLS.iter().enumerate() {
        let at = SYMTAB + (index + 1) * 24;
        put(&mut bytes, at, &name_offsets[index].to_le_bytes());
        bytes[at + 4] = symbol.kind;
        put(&mut bytes, at + 6, &symbol.section.to_le_bytes());
        put(&mut bytes, at + 8, &symbol.value.to_le_bytes());
        put(&mut bytes, at + 16, &symbol.size.to_le_bytes());
    }
    put(&mut bytes, STRTAB, &strings);
    bytes
}

/// Link-time addresses and what they must be named.
const LOOKUPS: [(u64, Option<(&str, u64)>); 9] = [
    (0xfff, None),
    (0x1000, Some(("func", 0))),
    (0x101f, Some(("func", 0x1f))),
    (0x1020, None),
    (0x1100, Some(("label", 0))),
    (0x1185, Some(("label", 0x85))),
    (0x1195, Some(("label", 0x95))),
    (0x1205, Some(("last", 5))),
    (0x1210, None),
];

#[test]
fn reads_a_hand_made_table() {
    let bytes = file();
    let table =
        find_symbol_table(&bytes, IMAGE_OFFSET).unwrap_or_else(|| panic!("no symbol table found"));
    assert_eq!(table.symbols.len(), SYMBOLS.len() + 1);
    for (address, expected) in LOOKUPS {
        assert_eq!(
            table.lookup(IMAGE_OFFSET + address),
            expected,
            "at {address:#x}"
        );
    }
    assert_eq!(table.lookup(0x1000), None, "below the image");

    // No table: none of type SHT_SYMTAB, a link to no section, or to a
    // section whose bytes are not in the file; symbols of the wrong size.
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut no_symtab = file();
    put(&mut no_symtab, sh_type(1), &SHT_PROGBITS.to_le_bytes());
    cases.push(("no SHT_SYMTAB", no_symtab));
    let mut bad_link = file();
    put(&mut bad_link, sh_link(1), &3u32.to_le_bytes());
    cases.push(("sh_link 3", bad_link));
    let mut strings_outside = file();
    put(
        &mut strings_outside,
        SECTIONS + 2 * 64 + 24,
        &u64::MAX.to_le_bytes(),
    );
    cases.push(("strings past the end", strings_outside));
    let mut entry_size = file();
    put(&mut entry_size, SECTIONS + 64 + 56, &16u64.to_le_bytes());
    cases.push(("sh_entsize 16", entry_size));
    let mut big_endian = file();
    big_endian[5] = 2;
    cases.push(("big-endian", big_endian));
    for (what, bytes) in cases {
        assert!(
            find_symbol_table(&bytes, IMAGE_OFFSET).is_none(),
            "{what}: a table was found"
        );
    }
}

/// The sorted index the profiler uses names every address as the linear
/// lookup the crash reports use does, labels, gaps and ties included.
#[test]
fn sorted_lookup_agrees_with_the_linear_one() {
    let bytes = file();
    let table = find_symbol_table(&bytes, IMAGE_OFFSET).expect("the hand-made table");
    let sorted = sorted_code_symbols(&table);
    assert_eq!(
        sorted.len(),
        3,
        "func, label, last and nothing else: {sorted:?}"
    );
    for (address, expected) in LOOKUPS {
        assert_eq!(
            nearest(&table, &sorted, IMAGE_OFFSET + address),
            expected,
            "at {address:#x}"
        );
    }
    for address in IMAGE_OFFSET - 0x10..IMAGE_OFFSET + 0x1300 {
        assert_eq!(
            nearest(&table, &sorted, address),
            table.lookup(address),
            "at {address:#x}"
        );
    }
}

/// Every prefix of the hand-made file has no table (the strings come
/// last), and every single-byte change gives lookups a result, not a
/// panic.
#[test]
fn damaged_tables_fail_cleanly() {
    let bytes = file();
    for len in 0..bytes.len() {
        assert!(
            find_symbol_table(&bytes[..len], IMAGE_OFFSET).is_none(),
            "a table in the first {len} bytes"
        );
    }
    let mut copy = bytes.clone();
    for at in 0..copy.len() {
        for flip in [0x01, 0x80, 0xff] {
            copy[at] ^= flip;
            // Only the absence of a panic matters here.
            if let Some(table) = find_symbol_table(&copy, IMAGE_OFFSET) {
                for (address, _) in LOOKUPS {
                    let _ = table.lookup(IMAGE_OFFSET + address);
                }
            }
            copy[at] ^= flip;
        }
    }
}
