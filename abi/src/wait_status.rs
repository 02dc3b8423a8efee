//! How `wait4` reports a child's end, Linux's encoding (`<sys/wait.h>`'s
//! `WIFEXITED`/`WEXITSTATUS`, `WIFSIGNALED`/`WTERMSIG`).

/// The status of a child that ended with `exit_group(code)`: the low 8
/// bits of the code, in bits 8 to 15.
pub fn exited(code: i32) -> i32 {
    (code & 0xff) << 8
}

/// The status of a child killed by signal `signal` (this kernel kills
/// a process whose thread makes a bad access with `SIGSEGV`).
pub fn signalled(signal: u8) -> i32 {
    i32::from(signal & 0x7f)
}

/// The code a shell shows for `status`: the exit code, or 128 plus the
/// signal that killed the child.
pub fn shell_code(status: i32) -> i32 {
    match status & 0x7f {
        0 => (status >> 8) & 0xff,
        signal => 128 + signal,
    }
}

/// `SIGSEGV`.
pub const SIGSEGV: u8 = 11;

#[cfg(test)]
mod tests {
    use super::*;

    /// `WEXITSTATUS`, `WTERMSIG` and a shell's `$?` of Linux's encoding.
    #[test]
    fn wait_statuses_are_linux_encoded() {
        assert_eq!(exited(0), 0);
        assert_eq!(exited(5), 0x500);
        assert_eq!(exited(-1), 0xff00);
        assert_eq!(shell_code(exited(5)), 5);
        assert_eq!(shell_code(exited(-1)), 255);
        let segv = signalled(SIGSEGV);
        assert_eq!(segv, 11);
        assert_eq!(shell_code(segv), 139);
    }
}
