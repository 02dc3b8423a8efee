//! Starting a program from the ramdisk: a new address space, the ELF's
//! loadable segments copied in, a stack laid out as Linux lays out a new
//! program's (arguments, environment, auxiliary vector), and a first thread
//! at the entry point.
//!
//! The first stack, from the stack pointer up (see [`abi::auxv`]):
//! `argc`, the `argv` pointers and a null, the `envp` pointers (none) and
//! a null, the auxiliary vector's pairs ending in `AT_NULL`, and above them
//! the bytes all those pointers point to: the argument strings one after
//! another, the platform name, `AT_RANDOM`'s 16 bytes. The stack pointer is
//! 16-byte aligned at `argc`, as the x86-64 ABI requires at a program's
//! entry. `argv[0]` is the program's name, and the rest are the words of
//! the argument string.

use alloc::{sync::Arc, vec::Vec};

use abi::{Errno, PAGE_SIZE, Prot, auxv};

use super::{
    process::{Process, ProcessSlot, ProgramBreak},
    vm::{AddressSpace, Placement, Sharing},
};
use crate::{elf, entropy, initrd, memory::heap, tlb};
use hal::{context::ThreadStart, user_state::UserState};

/// The main thread's stack: 256 KiB just below the top of user space.
pub const STACK_SIZE: u64 = 256 * 1024;
const STACK_TOP: u64 = abi::USER_END - PAGE_SIZE;
/// The platform `AT_PLATFORM` names.
const PLATFORM: &str = "x86_64";
/// Clock ticks per second, as Linux's `USER_HZ`.
const CLOCK_TICKS: u64 = 100;

/// Starts program `name` with argument string `args` (words separated by
/// spaces); `parent` may wait for it.
pub fn spawn(name: &str, args: &str, parent: Option<u64>) -> Result<Arc<Process>, Errno> {
    let image = initrd::get()
        .and_then(|programs| programs.find(name))
        .ok_or(Errno::NoEnt)?;
    let program = elf::Elf::parse(image).map_err(|_| Errno::NoEnt)?;
    let slot = ProcessSlot::reserve()?;
    let kernel_root = tlb::system().kernel_address_space().root();
    let space = AddressSpace::new(kernel_root).map_err(|_| Errno::NoMem)?;
    let stack_pointer = match load(&space, &program, name, args) {
        Ok(stack_pointer) => stack_pointer,
        Err(errno) => {
            space.tear_down();
            return Err(errno);
        }
    };
    let image_end = program.image_end();
    let program_break = ProgramBreak {
        start: image_end,
        end: image_end,
    };
    let process = Process::new(name, parent, space, program_break, slot);
    let start = ThreadStart::User {
        entry: program.entry(),
        stack: stack_pointer,
        rdi: 0,
        rsi: 0,
    };
    let started = process.start_thread(start, UserState::initial(), abi::ANY_CPU, |_| Ok(()));
    if let Err(errno) = started {
        process.abandon();
        return Err(errno);
    }
    Ok(process)
}

/// Fills `space` with the program's segments and its first stack; returns
/// the stack pointer the program starts with.
fn load(
    space: &AddressSpace,
    program: &elf::Elf<'_>,
    name: &str,
    args: &str,
) -> Result<u64, Errno> {
    for segment in program.segments() {
        let start = segment.vaddr & !(PAGE_SIZE - 1);
        let lead = (segment.vaddr - start) as usize;
        // A copy with the page's leading bytes: the program chose the size
        // (it is its segment), so it comes out of the heap budget.
        let mut contents = heap::try_zeroed_vec::<u8>(lead + segment.data.len())?;
        contents[lead..].copy_from_slice(segment.data);
        let mut protection = Prot::READ;
        if segment.flags.write {
            protection |= Prot::WRITE;
        }
        if segment.flags.execute {
            protection |= Prot::EXEC;
        }
        space.load_region(start, segment.mem_size + lead as u64, protection, &contents)?;
    }

    let stack_bottom = STACK_TOP - STACK_SIZE;
    space.map_anonymous(
        stack_bottom,
        STACK_SIZE,
        Prot::READ | Prot::WRITE,
        Placement::Fixed,
        Sharing::Private,
    )?;
    let (stack_pointer, bytes) = first_stack(program, name, args)?;
    space.copy_out(stack_pointer, &bytes)?;
    Ok(stack_pointer)
}

/// The first stack's contents (see the module docs) and where they start.
fn first_stack(program: &elf::Elf<'_>, name: &str, args: &str) -> Result<(u64, Vec<u8>), Errno> {
    // The bytes the pointers point to, from `strings_at` up.
    let mut strings = Vec::new();
    let mut string_offsets = Vec::new();
    for word in core::iter::once(name).chain(args.split_ascii_whitespace()) {
        string_offsets.push(strings.len());
        strings.extend_from_slice(word.as_bytes());
        strings.push(0);
    }
    let platform_offset = strings.len();
    strings.extend_from_slice(PLATFORM.as_bytes());
    strings.push(0);
    let random_offset = strings.len();
    entropy::mix_in(hal::time::now_ns());
    let mut random = [0u8; 16];
    entropy::fill(&mut random);
    strings.extend_from_slice(&random);
    let strings_at = (STACK_TOP - strings.len() as u64) & !15;

    let at = |offset: usize| strings_at + offset as u64;
    let mut auxiliary = alloc::vec![
        (auxv::PHENT, elf::PROGRAM_HEADER_LEN as u64),
        (auxv::PHNUM, u64::from(program.program_header_count())),
        (auxv::PAGESZ, PAGE_SIZE),
        (auxv::BASE, 0),
        (auxv::FLAGS, 0),
        (auxv::ENTRY, program.entry()),
        (auxv::UID, 0),
        (auxv::EUID, 0),
        (auxv::GID, 0),
        (auxv::EGID, 0),
        (auxv::PLATFORM, at(platform_offset)),
        (auxv::HWCAP, u64::from(hal::cpuid::cpuid(1, 0).edx)),
        (auxv::CLKTCK, CLOCK_TICKS),
        (auxv::SECURE, 0),
        (auxv::RANDOM, at(random_offset)),
        (auxv::EXECFN, at(string_offsets[0])),
    ];
    if let Some(address) = program.program_headers_address() {
        auxiliary.insert(0, (auxv::PHDR, address));
    }
    auxiliary.push((auxv::NULL, 0));

    let mut words = Vec::new();
    words.push(string_offsets.len() as u64); // argc
    words.extend(string_offsets.iter().map(|&offset| at(offset)));
    words.push(0); // the end of argv
    words.push(0); // envp: empty
    words.extend(auxiliary.iter().flat_map(|&(kind, value)| [kind, value]));
    // `argc` must land on a 16-byte boundary.
    let padding = if words.len() % 2 == 1 { 8 } else { 0 };
    let stack_pointer = strings_at - padding - words.len() as u64 * 8;
    if stack_pointer < STACK_TOP - STACK_SIZE / 2 {
        // Arguments may not take half the stack (`spawn` limits them far
        // below this; a guard against a later larger limit).
        return Err(Errno::Inval);
    }
    let mut bytes: Vec<u8> = words.iter().flat_map(|word| word.to_le_bytes()).collect();
    bytes.resize(bytes.len() + padding as usize, 0);
    bytes.extend_from_slice(&strings);
    Ok((stack_pointer, bytes))
}
