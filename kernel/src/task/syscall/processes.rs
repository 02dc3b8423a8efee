//! Processes: `fork`, waiting for a child, and starting a program of the
//! ramdisk (this kernel's `spawn`, as there is no file system for
//! `execve`).

use alloc::{string::String, sync::Arc};

use abi::Errno;

use super::SyscallResult;
use crate::task::{loader, process::Process};
use hal::{trap::TrapFrame, user_state::UserState};

/// The longest program name and argument string `spawn` accepts.
const MAX_NAME: u64 = 64;
const MAX_ARGS: u64 = 4096;

/// `fork()`: a child process that leaves this call with the caller's
/// registers and 0.
pub(super) fn fork(frame: &TrapFrame, process: &Process) -> SyscallResult {
    // The caller's SSE registers and FS base are in this CPU now.
    let user = UserState::copy_of_current();
    process
        .fork(frame, 0, user, |_, _| Ok(()))
        .map(|child| child.pid)
}

/// `spawn(name, name_len, args, args_len)`: a new process running the
/// initrd's program `name` with the argument string `args`, a child of
/// `process`. Returns its id.
pub(super) fn spawn(
    process: &Process,
    name: u64,
    name_len: u64,
    args: u64,
    args_len: u64,
) -> SyscallResult {
    if name_len > MAX_NAME || args_len > MAX_ARGS {
        return Err(Errno::Inval);
    }
    let space = &process.space;
    let name =
        String::from_utf8(space.copy_in(name, name_len as usize)?).map_err(|_| Errno::Inval)?;
    let args =
        String::from_utf8(space.copy_in(args, args_len as usize)?).map_err(|_| Errno::Inval)?;
    loader::spawn(&name, &args, Some(process.pid)).map(|child| child.pid)
}

/// `wait4(pid, status, options, usage)`: waits for the child `pid` to end,
/// stores how it ended at `status` and zeroes the `struct rusage` at `usage`
/// (each if not null), and returns `pid`.
pub(super) fn wait4(
    process: &Process,
    pid: u64,
    status: u64,
    options: u64,
    usage: u64,
) -> SyscallResult {
    /// `sizeof(struct rusage)` on x86-64.
    const RUSAGE_SIZE: usize = 144;
    // Only a given child, and no options: what this kernel's programs need
    // (`-1`, any child, is Linux's too; it is not offered yet).
    if pid as i64 <= 0 || options != 0 {
        return Err(Errno::Inval);
    }
    let child: Arc<Process> = Process::find(pid)
        .filter(|child| child.parent == Some(process.pid))
        .ok_or(Errno::Child)?;
    child.wait().ok_or(Errno::Srch)?;
    if status != 0 {
        process
            .space
            .copy_out(status, &child.wait_status().to_le_bytes())?;
    }
    if usage != 0 {
        process.space.copy_out(usage, &[0; RUSAGE_SIZE])?;
    }
    Ok(pid)
}
