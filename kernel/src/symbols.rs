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
//! Lookups run on the fatal path, possibly after memory corruption, so they
//! allocate nothing, take no lock and read the file only with bounds checks:
//! a damaged table means "no name", never a second fault.

use core::fmt;

use spin::Once;

use crate::elf::{u16_at, u32_at, u64_at};

const SECTION_HEADER_LEN: usize = 64;
const SYMBOL_LEN: usize = 24;
const SHT_SYMTAB: u32 = 2;
const STT_NOTYPE: u8 = 0;
const STT_FUNC: u8 = 2;
/// `st_shndx` of a symbol that is not defined in this file.
const SHN_UNDEF: u16 = 0;

/// The symbol and string tables, found once at boot.
struct Table {
    symbols: &'static [u8],
    strings: &'static [u8],
    image_offset: u64,
}

static TABLE: Once<Table> = Once::new();

/// Finds the symbol table in the kernel's ELF file `file`, loaded at
/// `image_offset`. Returns how many symbols it holds, or `None` if the file
/// has no usable one (then reports show bare addresses).
pub fn init(file: &'static [u8], image_offset: u64) -> Option<usize> {
    let table = find_symbol_table(file, image_offset)?;
    let count = table.symbols.len() / SYMBOL_LEN;
    TABLE.call_once(|| table);
    Some(count)
}

/// The section header at `index`, if it is inside the file.
fn section(file: &'static [u8], index: usize) -> Option<&'static [u8]> {
    let table = usize::try_from(u64_at(file, 0x28)).ok()?;
    let entry_len = usize::from(u16_at(file, 0x3A));
    if entry_len != SECTION_HEADER_LEN || index >= usize::from(u16_at(file, 0x3C)) {
        return None;
    }
    let start = table.checked_add(index.checked_mul(SECTION_HEADER_LEN)?)?;
    file.get(start..start.checked_add(SECTION_HEADER_LEN)?)
}

/// The bytes a section header describes.
fn contents(file: &'static [u8], header: &[u8]) -> Option<&'static [u8]> {
    let start = usize::try_from(u64_at(header, 24)).ok()?;
    let len = usize::try_from(u64_at(header, 32)).ok()?;
    file.get(start..start.checked_add(len)?)
}

fn find_symbol_table(file: &'static [u8], image_offset: u64) -> Option<Table> {
    if file.get(..4)? != b"\x7fELF" {
        return None;
    }
    let count = usize::from(u16_at(file, 0x3C));
    let symtab = (0..count)
        .filter_map(|index| section(file, index))
        .find(|header| u32_at(header, 4) == SHT_SYMTAB)?;
    let strtab = section(file, usize::try_from(u32_at(symtab, 40)).ok()?)?;
    Some(Table {
        symbols: contents(file, symtab)?,
        strings: contents(file, strtab)?,
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
    let table = TABLE.get()?;
    let target = address.checked_sub(table.image_offset)?;
    let (symbols, _) = table.symbols.as_chunks::<SYMBOL_LEN>();
    // (value, size, name offset) of the best candidate so far.
    let mut best: Option<(u64, u64, u32)> = None;
    for entry in symbols {
        let kind = entry[4] & 0xF;
        let value = u64_at(entry, 8);
        if !(kind == STT_FUNC || kind == STT_NOTYPE)
            || u16_at(entry, 6) == SHN_UNDEF
            || u32_at(entry, 0) == 0
            || value > target
        {
            continue;
        }
        let size = u64_at(entry, 16);
        let better = match best {
            None => true,
            // Closer below the address wins; at the same address a sized
            // function beats a label.
            Some((best_value, best_size, _)) => {
                value > best_value || (value == best_value && size > best_size)
            }
        };
        if better {
            best = Some((value, size, u32_at(entry, 0)));
        }
    }
    let (value, size, name_offset) = best?;
    if size != 0 && target - value >= size {
        return None;
    }
    Some(Symbol {
        name: name_at(table.strings, name_offset)?,
        offset: target - value,
    })
}

/// The NUL-terminated name at `offset` in the string table.
fn name_at(strings: &'static [u8], offset: u32) -> Option<&'static str> {
    let rest = strings.get(usize::try_from(offset).ok()?..)?;
    let len = rest.iter().position(|&byte| byte == 0)?;
    core::str::from_utf8(&rest[..len]).ok()
}

pub mod tests {
    //! In-kernel tests of symbol lookup on the running kernel's own table.

    use alloc::format;

    use super::lookup;
    use crate::ktest::{Test, TestResult};
    use crate::{check, require_some};

    pub const TESTS: &[Test] = &[
        Test::new(
            "symbols::names_a_function_from_its_address",
            names_a_function_from_its_address,
        ),
        Test::new(
            "symbols::addresses_outside_the_kernel_have_no_name",
            addresses_outside_the_kernel_have_no_name,
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
}
