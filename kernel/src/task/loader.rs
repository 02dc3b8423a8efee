//! Starting a program from the ramdisk: a new address space, the ELF's
//! loadable segments copied in, a stack with the arguments on top, and a
//! first thread at the entry point.

use alloc::sync::Arc;

use abi::{Errno, PAGE_SIZE, Prot};

use super::{
    process::{Process, ProcessSlot},
    vm::{AddressSpace, Sharing},
};
use crate::{elf, initrd, memory::heap, tlb};
use hal::context::ThreadStart;

/// The main thread's stack: 256 KiB just below the top of user space.
const STACK_SIZE: u64 = 256 * 1024;
const STACK_TOP: u64 = abi::USER_END - PAGE_SIZE;

/// Starts program `name` with argument string `args`; `parent` may wait for
/// it.
pub fn spawn(name: &str, args: &str, parent: Option<u64>) -> Result<Arc<Process>, Errno> {
    let image = initrd::get()
        .and_then(|programs| programs.find(name))
        .ok_or(Errno::NoEnt)?;
    let program = elf::Elf::parse(image).map_err(|_| Errno::NoEnt)?;
    let slot = ProcessSlot::reserve()?;
    let kernel_root = tlb::system().kernel_address_space().root();
    let space = AddressSpace::new(kernel_root).map_err(|_| Errno::NoMem)?;
    let entry = match load(&space, &program, args) {
        Ok(entry) => entry,
        Err(errno) => {
            space.tear_down();
            return Err(errno);
        }
    };
    let process = Process::new(name, parent, space, slot);
    let start = ThreadStart::User {
        entry: program.entry(),
        stack: entry.rsp,
        rdi: entry.args,
        rsi: args.len() as u64,
    };
    let started = process.start_thread(start, abi::ANY_CPU);
    if let Err(errno) = started {
        process.abandon();
        return Err(errno);
    }
    Ok(process)
}

/// Where the first thread starts: its stack pointer and argument pointer.
struct FirstThread {
    rsp: u64,
    args: u64,
}

/// Fills `space` with the program's segments and the stack.
fn load(space: &AddressSpace, program: &elf::Elf<'_>, args: &str) -> Result<FirstThread, Errno> {
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
        true,
        Sharing::Private,
    )?;
    // The argument bytes sit at the top of the stack; below them, a
    // 16-byte aligned top minus the return-address slot.
    let args_at = (STACK_TOP - args.len() as u64) & !15;
    space.copy_out(args_at, args.as_bytes())?;
    Ok(FirstThread {
        rsp: args_at - 8,
        args: args_at,
    })
}
