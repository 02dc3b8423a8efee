//! Which QEMU binary runs, and what it needs to find its own files.
//!
//! The `qemu-system-x86_64` on `PATH` by default (Debian bookworm's 7.2),
//! or another binary, for instance QEMU 10 unpacked from bookworm-backports
//! into a private prefix (`.ci/qemu10`), whose TCG emulates x2APIC, or the
//! project's patched QEMU (`.ci/qemu-invlpgb`). Such a prefix needs its own
//! module directory and firmware search paths, which [`Qemu::from_prefix`]
//! derives.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use super::PROGRAM;
use crate::machine::RunError;

/// Where, inside a prefix, Debian's QEMU packages put what QEMU needs
/// besides its binary: its loadable modules (display, audio, ... back ends;
/// `QEMU_MODULE_DIR`), its firmware and option ROMs, and SeaBIOS (both
/// through `-L`; `usr/share/qemu` holds only links to `../seabios`).
const PREFIX_BINARY: &str = "usr/bin/qemu-system-x86_64";
const PREFIX_MODULE_DIR: &str = "usr/lib/x86_64-linux-gnu/qemu";
const PREFIX_DATA_DIRS: [&str; 2] = ["usr/share/qemu", "usr/share/seabios"];

/// Which QEMU binary runs, and what it needs to find its own files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Qemu {
    /// A path, or a bare name looked up in `PATH`.
    program: PathBuf,
    /// The directory the QEMU packages were unpacked into (with `dpkg-deb
    /// -x`), when it is not the system's root.
    prefix: Option<PathBuf>,
}

impl Default for Qemu {
    fn default() -> Self {
        Self::system()
    }
}

impl Qemu {
    /// The installed QEMU: `qemu-system-x86_64` from `PATH`.
    pub fn system() -> Self {
        Self {
            program: PathBuf::from(PROGRAM),
            prefix: None,
        }
    }

    /// The QEMU unpacked into `prefix` as Debian lays it out: the binary in
    /// `usr/bin`, modules in `usr/lib/x86_64-linux-gnu/qemu`, firmware in
    /// `usr/share/qemu` and `usr/share/seabios`. Each must be there.
    pub fn from_prefix(prefix: impl Into<PathBuf>) -> Result<Self, QemuPathError> {
        let prefix = prefix.into();
        check_prefix(&prefix)?;
        let program = prefix.join(PREFIX_BINARY);
        if !program.is_file() {
            return Err(QemuPathError::PrefixLacks {
                prefix,
                part: PREFIX_BINARY,
            });
        }
        Ok(Self {
            program,
            prefix: Some(prefix),
        })
    }

    /// The QEMU binary at `program`: a path to a file, or a bare name found
    /// in `PATH`. A path `PREFIX/usr/bin/NAME` whose `PREFIX` (not `/`)
    /// holds a QEMU module directory is taken as an unpacked prefix, as in
    /// [`Qemu::from_prefix`].
    pub fn from_program(program: impl Into<PathBuf>) -> Result<Self, QemuPathError> {
        let program = program.into();
        let bare_name = program
            .parent()
            .is_some_and(|dir| dir.as_os_str().is_empty());
        if bare_name {
            return match find_in_path(&program) {
                Some(_) => Ok(Self {
                    program,
                    prefix: None,
                }),
                None => Err(QemuPathError::NotInPath(program)),
            };
        }
        if !program.is_file() {
            return Err(QemuPathError::NotAFile(program));
        }
        let prefix = program
            .parent()
            .filter(|bin| bin.ends_with("usr/bin"))
            .and_then(|bin| bin.parent()?.parent())
            .filter(|prefix| {
                !prefix.as_os_str().is_empty()
                    && *prefix != Path::new("/")
                    && prefix.join(PREFIX_MODULE_DIR).is_dir()
            })
            .map(Path::to_path_buf);
        if let Some(prefix) = &prefix {
            check_prefix(prefix)?;
        }
        Ok(Self { program, prefix })
    }

    /// The binary QEMU runs.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// The QEMU in the prefix that environment variable `variable` names,
    /// for a test tier that needs a QEMU other than the system's. The
    /// tier's tests are compiled as ignored where the variable is unset
    /// (the workspace root's `build.rs`), so this is reached without it
    /// only by `cargo test -- --ignored`: it then panics saying that
    /// `installer` provides the prefix. A set variable that names no usable
    /// prefix panics too.
    pub fn from_prefix_variable(variable: &str, installer: &str) -> Self {
        match std::env::var_os(variable) {
            Some(prefix) if !prefix.is_empty() && prefix != "0" => {
                Self::from_prefix(&prefix).unwrap_or_else(|error| panic!("{variable}: {error}"))
            }
            _ => panic!("{variable} is not set: {installer}, and {variable} names its prefix"),
        }
    }

    /// The unpacked prefix, if this QEMU lives in one.
    pub fn prefix(&self) -> Option<&Path> {
        self.prefix.as_deref()
    }

    /// A command that runs this QEMU with what its prefix needs: the
    /// prefix's module directory, or QEMU loads the system's modules of
    /// another build and aborts ("Only modules from the same build can be
    /// loaded"); and its firmware directories ahead of the compiled-in ones.
    pub fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        if let Some(prefix) = &self.prefix {
            command.env("QEMU_MODULE_DIR", prefix.join(PREFIX_MODULE_DIR));
            for dir in PREFIX_DATA_DIRS {
                command.arg("-L").arg(prefix.join(dir));
            }
        }
        command
    }

    /// The version QEMU reports (`10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)`),
    /// from `--version`.
    pub fn version(&self) -> Result<String, RunError> {
        let output = self
            .command()
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|error| RunError::NoQemu(self.program.clone(), error))?;
        let text = String::from_utf8_lossy(&output.stdout);
        let line = text.lines().next().unwrap_or_default();
        Ok(line
            .strip_prefix("QEMU emulator version ")
            .unwrap_or(line)
            .to_string())
    }
}

/// Checks that `prefix` has the directories a QEMU unpacked there needs.
fn check_prefix(prefix: &Path) -> Result<(), QemuPathError> {
    if !prefix.is_dir() {
        return Err(QemuPathError::NotADirectory(prefix.to_path_buf()));
    }
    for part in [PREFIX_MODULE_DIR].into_iter().chain(PREFIX_DATA_DIRS) {
        if !prefix.join(part).is_dir() {
            return Err(QemuPathError::PrefixLacks {
                prefix: prefix.to_path_buf(),
                part,
            });
        }
    }
    Ok(())
}

/// The first `PATH` entry that holds a file named `name`.
fn find_in_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Why a QEMU binary or prefix was rejected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QemuPathError {
    NotInPath(PathBuf),
    NotAFile(PathBuf),
    NotADirectory(PathBuf),
    /// The prefix has no `part` (one of the paths Debian's packages create).
    PrefixLacks {
        prefix: PathBuf,
        part: &'static str,
    },
}

impl std::fmt::Display for QemuPathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotInPath(name) => write!(f, "no {} in PATH", name.display()),
            Self::NotAFile(path) => write!(f, "{} is not a file", path.display()),
            Self::NotADirectory(path) => write!(f, "{} is not a directory", path.display()),
            Self::PrefixLacks { prefix, part } => write!(
                f,
                "{} is not an unpacked QEMU prefix: it has no {part} \
                 (.ci/qemu10 makes one from bookworm-backports' qemu-system-* and seabios packages)",
                prefix.display()
            ),
        }
    }
}

impl std::error::Error for QemuPathError {}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    /// A fresh directory under the system's temporary directory.
    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("shootdown-qemu-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A prefix laid out as `dpkg-deb -x` of Debian's packages leaves it,
    /// without `missing`.
    fn fake_prefix(name: &str, missing: Option<&str>) -> PathBuf {
        let prefix = scratch(name);
        for dir in [PREFIX_MODULE_DIR].into_iter().chain(PREFIX_DATA_DIRS) {
            if Some(dir) != missing {
                fs::create_dir_all(prefix.join(dir)).unwrap();
            }
        }
        fs::create_dir_all(prefix.join("usr/bin")).unwrap();
        if missing != Some(PREFIX_BINARY) {
            fs::write(prefix.join(PREFIX_BINARY), "").unwrap();
        }
        prefix
    }

    fn env_of(command: &Command, key: &str) -> Option<PathBuf> {
        command
            .get_envs()
            .find(|(name, _)| *name == key)
            .and_then(|(_, value)| value.map(PathBuf::from))
    }

    #[test]
    fn a_prefix_sets_the_module_dir_and_firmware_paths() {
        let prefix = fake_prefix("complete", None);
        let qemu = Qemu::from_prefix(&prefix).unwrap();
        assert_eq!(qemu.program(), prefix.join(PREFIX_BINARY));
        let command = qemu.command();
        assert_eq!(
            env_of(&command, "QEMU_MODULE_DIR"),
            Some(prefix.join("usr/lib/x86_64-linux-gnu/qemu"))
        );
        let args: Vec<PathBuf> = command.get_args().map(PathBuf::from).collect();
        assert_eq!(
            args,
            [
                PathBuf::from("-L"),
                prefix.join("usr/share/qemu"),
                PathBuf::from("-L"),
                prefix.join("usr/share/seabios"),
            ]
        );
        fs::remove_dir_all(prefix).unwrap();
    }

    #[test]
    fn an_incomplete_prefix_is_rejected_naming_what_it_lacks() {
        for part in [PREFIX_BINARY, PREFIX_MODULE_DIR, "usr/share/seabios"] {
            let prefix = fake_prefix("incomplete", Some(part));
            let error = Qemu::from_prefix(&prefix).unwrap_err();
            assert_eq!(
                error,
                QemuPathError::PrefixLacks {
                    prefix: prefix.clone(),
                    part
                }
            );
            assert!(error.to_string().contains(part), "{error}");
            fs::remove_dir_all(prefix).unwrap();
        }
        let nowhere = PathBuf::from("/nonexistent/qemu10");
        assert_eq!(
            Qemu::from_prefix(&nowhere),
            Err(QemuPathError::NotADirectory(nowhere))
        );
    }

    #[test]
    fn a_binary_inside_a_prefix_is_run_as_the_prefix() {
        let prefix = fake_prefix("binary", None);
        let qemu = Qemu::from_program(prefix.join(PREFIX_BINARY)).unwrap();
        assert_eq!(qemu.prefix(), Some(prefix.as_path()));
        assert!(env_of(&qemu.command(), "QEMU_MODULE_DIR").is_some());
        fs::remove_dir_all(prefix).unwrap();
    }

    #[test]
    fn other_binaries_run_as_they_are() {
        let dir = scratch("plain");
        let program = dir.join("qemu-system-x86_64");
        fs::write(&program, "").unwrap();
        let qemu = Qemu::from_program(&program).unwrap();
        assert_eq!(qemu.prefix(), None);
        assert_eq!(qemu.command().get_args().count(), 0);
        assert_eq!(env_of(&qemu.command(), "QEMU_MODULE_DIR"), None);
        assert_eq!(
            Qemu::from_program(dir.join("missing")),
            Err(QemuPathError::NotAFile(dir.join("missing")))
        );
        assert_eq!(
            Qemu::from_program("no-such-qemu-anywhere"),
            Err(QemuPathError::NotInPath("no-such-qemu-anywhere".into()))
        );
        fs::remove_dir_all(dir).unwrap();
    }
}
