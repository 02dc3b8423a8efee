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

/// `wait4(pid, status, options, usage)`: waits for the child `pid` to end
/// (or any child, for `pid` -1 or 0: there are no process groups, so every
/// child is in the caller's), stores how it ended at `status` and zeroes
/// the `struct rusage` at `usage` (each if not null), and returns its pid.
/// With `WNOHANG` it returns 0 at once if no child has ended. The options
/// about stopped and continued children are accepted and change nothing:
/// no process is ever stopped here.
pub(super) fn wait4(
    process: &Process,
    pid: u64,
    status: u64,
    options: u64,
    usage: u64,
) -> SyscallResult {
    /// `sizeof(struct rusage)` on x86-64.
    const RUSAGE_SIZE: usize = 144;
    /// `WNOHANG`.
    const NO_HANG: u64 = 1;
    /// `WNOHANG | WUNTRACED | WCONTINUED | __WNOTHREAD | __WALL | __WCLONE`.
    const KNOWN_OPTIONS: u64 = 0x1 | 0x2 | 0x8 | 0x2000_0000 | 0x4000_0000 | 0x8000_0000;
    if options & !KNOWN_OPTIONS != 0 {
        return Err(Errno::Inval);
    }
    let block = options & NO_HANG == 0;
    let child: Arc<Process> = match pid as i64 {
        -1 | 0 => match process.wait_any_child(block)? {
            Some(child) => child,
            None => return Ok(0),
        },
        // A process group: there are none but the one everyone is in.
        ..-1 => return Err(Errno::Child),
        _ => {
            let child = Process::find(pid)
                .filter(|child| child.parent == Some(process.pid))
                .ok_or(Errno::Child)?;
            if !block && !child.is_finished() {
                return Ok(0);
            }
            child.wait().ok_or(Errno::Srch)?;
            child
        }
    };
    if status != 0 {
        process
            .space
            .copy_out(status, &child.wait_status().to_le_bytes())?;
    }
    if usage != 0 {
        process.space.copy_out(usage, &[0; RUSAGE_SIZE])?;
    }
    Ok(child.pid)
}
