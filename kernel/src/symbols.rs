//! The kernel's own symbol table: which function an address belongs to.
//!
//! Crash reports print return addresses; a student needs function names.
//! The kernel's ELF file keeps its `.symtab` (the dev profile drops only
//! DWARF, see the workspace `Cargo.toml`), and the bootloader leaves the
//! whole file in memory ([`hal::kernel_image`]). The kernel is
//! linked at address 0 and placed at `BootInfo::kernel_image_offset`, so a
//! run-time address minus that offset is a link-time symbol value.
//!
//! Names are Rust-mangled (`_RNvNtCs…_6kernel5fatal4stop`); the
//! `rustc-demangle` crate prints them as paths (`kernel::fatal::stop`).
//!
//! The `elf` crate finds the tables: it decodes the file header and the
//! section headers, picks the `SHT_SYMTAB` section and the string table it
//! links to, and checks that both lie inside the file and that the symbol
//! entries have the ELF64 size. The kernel keeps only the choice of symbol
//! ([`lookup`]'s rules), which is about backtraces, not about the format.
//!
//! Lookups run on the fatal path, possibly after memory corruption, so they
//! allocate nothing, take no lock and read the file only with bounds checks
//! (the crate's tables decode each entry on demand, with checked reads and
//! no allocation): a damaged table means "no name", never a second fault.

use core::fmt;

use ::elf::ElfBytes;
use ::elf::abi::{STT_FUNC, STT_NOTYPE};
use ::elf::endian::LittleEndian;
use ::elf::string_table::StringTable;
use ::elf::symbol::SymbolTable;
use spin::Once;

/// The symbol and string tables, found once at boot.
struct Table<'a> {
    symbols: SymbolTable<'a, LittleEndian>,
    strings: StringTable<'a>,
    image_offset: u64,
}

static TABLE: Once<Table<'static>> = Once::new();

/// Finds the symbol table in the kernel's ELF file `file`, loaded at
/// `image_offset`. Returns how many symbols it holds, or `None` if the file
/// has no usable one (then reports show bare addresses).
pub fn init(file: &'static [u8], image_offset: u64) -> Option<usize> {
    let table = find_symbol_table(file, image_offset)?;
    let count = table.symbols.len();
    TABLE.call_once(|| table);
    Some(count)
}

/// The `.symtab` of `file` and its string table, if the file is a
/// little-endian ELF file whose section headers and tables are inside it.
fn find_symbol_table(file: &[u8], image_offset: u64) -> Option<Table<'_>> {
    let elf = ElfBytes::<LittleEndian>::minimal_parse(file).ok()?;
    let (symbols, strings) = elf.symbol_table().ok()??;
    Some(Table {
        symbols,
        strings,
        image_offset,
    })
}

/// The function an address lies in, and how far into it.
#[derive(Clone, Copy, Debug)]
pub struct Symbol {
    pub name: &'static str,
    pub offset: u64,
}

impl fmt::Display for Symbol {
    /// The demangled path without the crate hash (`kernel::fatal::stop+0x1c`);
    /// names that are not Rust's (assembly labels) as they are.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match rustc_demangle::try_demangle(self.name) {
            Ok(demangled) => write!(f, "{demangled:#}+{:#x}", self.offset),
            Err(_) => write!(f, "{}+{:#x}", self.name, self.offset),
        }
    }
}

/// The symbol containing `address` (a run-time kernel address), if the
/// table is loaded and has one.
///
/// The nearest symbol at or below the address decides: a sized function
/// must contain it; a size-less label (the assembly entry stubs) is taken
/// to extend up to the next symbol.
pub fn lookup(address: u64) -> Option<Symbol> {
    let (name, offset) = TABLE.get()?.lookup(address)?;
    Some(Symbol { name, offset })
}

impl<'a> Table<'a> {
    /// The name of the symbol containing `address` (a run-time address) and
    /// the offset into it, by [`lookup`]'s rules.
    fn lookup(&self, address: u64) -> Option<(&'a str, u64)> {
        let target = address.checked_sub(self.image_offset)?;
        // (value, size, name offset) of the best candidate so far.
        let mut best: Option<(u64, u64, u32)> = None;
        for symbol in self.symbols.iter() {
            let kind = symbol.st_symtype();
            let value = symbol.st_value;
            if !(kind == STT_FUNC || kind == STT_NOTYPE)
                || symbol.is_undefined()
                || symbol.st_name == 0
                || value > target
            {
                continue;
            }
            let size = symbol.st_size;
            let better = match best {
                None => true,
                // Closer below the address wins; at the same address a sized
                // function beats a label.
                Some((best_value, best_size, _)) => {
                    value > best_value || (value == best_value && size > best_size)
                }
            };
            if better {
                best = Some((value, size, symbol.st_name));
            }
        }
        let (value, size, name_offset) = best?;
        if size != 0 && target - value >= size {
            return None;
        }
        // The NUL-terminated UTF-8 name at that offset, if there is one.
        let name = self.strings.get(usize::try_from(name_offset).ok()?).ok()?;
        Some((name, target - value))
    }
}

pub mod tests {
    //! In-kernel tests of symbol lookup: on the running kernel's own table,
    //! and on a small hand-made file, whole, cut short and damaged.

    use alloc::{format, vec::Vec};

    use ::elf::abi::{
        EM_X86_64, ET_EXEC, SHN_UNDEF, SHT_PROGBITS, SHT_STRTAB, SHT_SYMTAB, STT_FUNC, STT_NOTYPE,
        STT_OBJECT,
    };

    use super::{find_symbol_table, lookup};
    use crate::ktest::{Test, TestResult};
    use crate::{check, check_eq, require_some};

    pub const TESTS: &[Test] = &[
        Test::new(
            "symbols::names_a_function_from_its_address",
            names_a_function_from_its_address,
        ),
        Test::new(
            "symbols::addresses_outside_the_kernel_have_no_name",
            addresses_outside_the_kernel_have_no_name,
        ),
        Test::new("symbols::reads_a_hand_made_table", reads_a_hand_made_table),
        Test::new(
            "symbols::damaged_tables_fail_cleanly",
            damaged_tables_fail_cleanly,
        ),
    ];

    fn names_a_function_from_its_address() -> TestResult {
        let function = names_a_function_from_its_address as *const () as u64;
        let symbol = require_some!(lookup(function + 3), "no symbol for {function:#x}");
        let shown = format!("{symbol}");
        check!(
            shown == "kernel::symbols::tests::names_a_function_from_its_address+0x3",
            "{function:#x} + 3 was shown as '{shown}'"
        );
        Ok(())
    }

    fn addresses_outside_the_kernel_have_no_name() -> TestResult {
        for address in [0, 0x1000, 0x0000_7fff_ffff_f000] {
            check!(
                lookup(address).is_none(),
                "user address {address:#x} was given a kernel symbol"
            );
        }
        Ok(())
    }

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

    fn reads_a_hand_made_table() -> TestResult {
        let bytes = file();
        let table = require_some!(
            find_symbol_table(&bytes, IMAGE_OFFSET),
            "no symbol table found"
        );
        check_eq!(table.symbols.len(), SYMBOLS.len() + 1);
        for (address, expected) in LOOKUPS {
            check_eq!(
                table.lookup(IMAGE_OFFSET + address),
                expected,
                "at {address:#x}"
            );
        }
        check_eq!(table.lookup(0x1000), None, "below the image");

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
            check!(
                find_symbol_table(&bytes, IMAGE_OFFSET).is_none(),
                "{what}: a table was found"
            );
        }
        Ok(())
    }

    /// Every prefix of the hand-made file has no table (the strings come
    /// last), and every single-byte change gives lookups a result, not a
    /// panic.
    fn damaged_tables_fail_cleanly() -> TestResult {
        let bytes = file();
        for len in 0..bytes.len() {
            check!(
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
        Ok(())
    }
}
