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

use alloc::vec::Vec;
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

impl Symbol {
    /// The function's path as [`Symbol`]'s `Display` prints it, without the
    /// offset: what a profile's rows are named by.
    pub fn function(&self) -> alloc::string::String {
        match rustc_demangle::try_demangle(self.name) {
            Ok(demangled) => alloc::format!("{demangled:#}"),
            Err(_) => alloc::string::String::from(self.name),
        }
    }
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

/// A symbol that can name code: `(link-time value, size, name offset)`,
/// for a defined, named function or size-less label.
fn code_symbol(symbol: &::elf::symbol::Symbol) -> Option<(u64, u64, u32)> {
    let kind = symbol.st_symtype();
    let counts =
        (kind == STT_FUNC || kind == STT_NOTYPE) && !symbol.is_undefined() && symbol.st_name != 0;
    counts.then_some((symbol.st_value, symbol.st_size, symbol.st_name))
}

/// Whether candidate `a` names an address better than `b`, both at or below
/// it: closer below wins; at the same address a sized function beats a
/// label.
fn better(a: (u64, u64, u32), b: (u64, u64, u32)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}

impl<'a> Table<'a> {
    /// The name of the symbol containing `address` (a run-time address) and
    /// the offset into it, by [`lookup`]'s rules.
    fn lookup(&self, address: u64) -> Option<(&'a str, u64)> {
        let target = address.checked_sub(self.image_offset)?;
        let best = self
            .symbols
            .iter()
            .filter_map(|symbol| code_symbol(&symbol))
            .filter(|&(value, _, _)| value <= target)
            .fold(
                None,
                |best: Option<(u64, u64, u32)>, candidate| match best {
                    Some(best) if !better(candidate, best) => Some(best),
                    _ => Some(candidate),
                },
            );
        self.resolve(best?, target)
    }

    /// The name and offset of `target` in `symbol`, if the symbol contains it.
    fn resolve(
        &self,
        (value, size, name_offset): (u64, u64, u32),
        target: u64,
    ) -> Option<(&'a str, u64)> {
        if size != 0 && target - value >= size {
            return None;
        }
        // The NUL-terminated UTF-8 name at that offset, if there is one.
        let name = self.strings.get(usize::try_from(name_offset).ok()?).ok()?;
        Some((name, target - value))
    }
}

/// The symbol table sorted by address, for naming many addresses quickly
/// (the profiler names thousands at the end of a run; [`lookup`] reads the
/// whole table for each). Same rules as [`lookup`]. Building it allocates,
/// so it is not for the fatal path.
pub struct SortedSymbols {
    table: &'static Table<'static>,
    /// Code symbols by link-time value; of several at one value only the
    /// one [`lookup`] would choose.
    by_address: Vec<(u64, u64, u32)>,
}

impl SortedSymbols {
    /// Sorts the loaded table; `None` if there is none.
    pub fn build() -> Option<Self> {
        Some(Self::of(TABLE.get()?))
    }

    fn of(table: &'static Table<'static>) -> Self {
        Self {
            table,
            by_address: sorted_code_symbols(table),
        }
    }

    /// The symbol containing `address` (a run-time kernel address).
    pub fn lookup(&self, address: u64) -> Option<Symbol> {
        let (name, offset) = nearest(self.table, &self.by_address, address)?;
        Some(Symbol { name, offset })
    }
}

/// `table`'s code symbols by value, the best of each value first and only.
fn sorted_code_symbols(table: &Table<'_>) -> Vec<(u64, u64, u32)> {
    let mut symbols: Vec<(u64, u64, u32)> = table
        .symbols
        .iter()
        .filter_map(|symbol| code_symbol(&symbol))
        .collect();
    // By value, and at one value the largest size first: the one kept (a
    // stable sort, so of equals the first in the table, as `lookup` keeps).
    symbols.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    symbols.dedup_by_key(|symbol| symbol.0);
    symbols
}

/// [`Table::lookup`] by binary search in `sorted` (from [`sorted_code_symbols`]).
fn nearest<'a>(
    table: &Table<'a>,
    sorted: &[(u64, u64, u32)],
    address: u64,
) -> Option<(&'a str, u64)> {
    let target = address.checked_sub(table.image_offset)?;
    let above = sorted.partition_point(|&(value, _, _)| value <= target);
    table.resolve(*sorted.get(above.checked_sub(1)?)?, target)
}

#[cfg(test)]
mod tests;
