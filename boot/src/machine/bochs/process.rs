//! Bochs as a process: started under `script` in a session of its own,
//! and killed with everything it started.
//!
//! Debian's Bochs has only the `term` and `rfb` displays, and `term` needs a
//! terminal: `script` gives it one. `setsid` makes `script` the leader of
//! a session and process group of its own, which the runner can kill
//! without touching its own group. Bochs ignores SIGTERM (and SIGINT only
//! drops it into its debugger), so the run ends with SIGKILL to every
//! process group involved.

use std::{
    fs,
    path::Path,
    process::{Child, Command, Stdio},
};

use super::Bochs;
use crate::machine::RunError;

/// Quotes `text` for the shell `script` runs the command with.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Starts `bochs` in `dir` under `script`, in a session of its own.
pub fn spawn(bochs: &Bochs, dir: &Path) -> Result<Child, RunError> {
    let command = format!(
        "exec {} -q -f bochsrc -rc continue",
        shell_quote(&bochs.binary.display().to_string())
    );
    Command::new("setsid")
        .args(["script", "-qec", &command, "/dev/null"])
        .current_dir(dir)
        .stdin(Stdio::null())
        // The term display's screen; nothing the kernel prints.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(RunError::NoScript)
}

/// The processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            // The parent is the second field after the command, which is
            // in parentheses and may contain spaces.
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let after = &stat[stat.rfind(')')? + 1..];
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

/// Kills `script` and Bochs. `script` leads the session `setsid` made for
/// it (its pid is its process group); Bochs runs in a session of its own
/// on `script`'s terminal, so its group is killed by its own pid.
pub fn kill(script: &mut Child) {
    let mut groups: Vec<u32> = children(script.id());
    groups.push(script.id());
    for group in groups {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{group}")])
            .stderr(Stdio::null())
            .status();
    }
    let _ = script.kill();
    let _ = script.wait();
}
