//! Linux beside this kernel, for `bench --against linux`: Debian's Linux
//! kernel package, fetched once into a cache outside the clone, and an
//! initramfs around the very program file this kernel's ramdisk holds.
//!
//! **The kernel.** `apt-get download` fetches the package into
//! `~/.cache/shootdown/linux/` (or `$XDG_CACHE_HOME/shootdown/linux/`) with
//! apt directories of its own: a source list naming only the package's
//! suite, its own package lists and cache, so the machine's apt
//! configuration is read for one thing only, the archive's address (the
//! first `URIs:` of `/etc/apt/sources.list.d/*.sources`, or the first
//! `deb` line of `/etc/apt/sources.list`), and never changed. `dpkg-deb`
//! unpacks the package's `/boot`; the `vmlinuz` there is what QEMU boots.
//!
//! **The initramfs.** A cpio "newc" archive, the format of this kernel's
//! ramdisk (packed by the same code, `build/ramdisk.rs`), holding `init`
//! (the project's own, `user/c/linux/init.c`) and the program, under the
//! name this kernel's ramdisk gives it. Its SHA-256 is printed with the
//! results: the same bytes ran on both kernels. A program that pages out
//! needs swap, which Linux gets from zram: the initramfs then also holds
//! zram's module and the modules it depends on, from the same package, as
//! `module-N-NAME.ko.xz` in the order `init` loads them.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use sha2::{Digest, Sha256};

#[path = "../build/ramdisk.rs"]
mod ramdisk;

/// Linux 6.17 from trixie-backports: global ASIDs flushed with INVLPGB
/// arrived in 6.15.
pub const DEFAULT_PACKAGE: &str = "linux-image-6.17.13+deb13-amd64";
pub const DEFAULT_SUITE: &str = "trixie-backports";

/// Where the C programs and Linux's init were built (`build.rs`).
pub const C_PROGRAMS_DIR: &str = env!("C_PROGRAMS_DIR");

/// Zram and the modules it depends on, in the order they load: Debian's
/// 6.17 builds zram as a module whose `.modinfo` says
/// `depends=lz4hc_compress,lz4_compress` (zsmalloc is built in).
const ZRAM_MODULES: [&str; 3] = ["lz4_compress", "lz4hc_compress", "zram"];

/// The signing keys of Debian's archive, from `debian-archive-keyring`.
const ARCHIVE_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// The cache directory: `$XDG_CACHE_HOME/shootdown/linux` or
/// `~/.cache/shootdown/linux`.
fn cache_dir() -> Result<PathBuf, String> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .ok_or("neither XDG_CACHE_HOME nor HOME is set: no place for the Linux cache")?;
    Ok(base.join("shootdown/linux"))
}

/// The Debian archive's address, as the machine's own apt sources give it.
fn archive_address() -> Result<String, String> {
    let mut sources: Vec<PathBuf> = std::fs::read_dir("/etc/apt/sources.list.d")
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .collect()
        })
        .unwrap_or_default();
    sources.sort();
    for path in sources
        .iter()
        .filter(|path| path.extension().is_some_and(|ext| ext == "sources"))
    {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(address) = text
            .lines()
            .find_map(|line| line.strip_prefix("URIs:"))
            .and_then(|uris| uris.split_whitespace().next())
        {
            return Ok(address.to_string());
        }
    }
    let list = std::fs::read_to_string("/etc/apt/sources.list").unwrap_or_default();
    list.lines()
        .map(str::split_whitespace)
        .find_map(|mut words| {
            (words.next() == Some("deb")).then(|| {
                words
                    .find(|word| !word.starts_with('['))
                    .map(str::to_string)
            })?
        })
        .ok_or_else(|| {
            String::from(
                "no Debian archive in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list",
            )
        })
}

/// Runs `command`, or says which step failed and what it printed.
fn run(mut command: Command, step: &str) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|error| format!("{step}: cannot run {:?}: {error}", command.get_program()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{step} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// The `vmlinuz` of `package` from `suite`, fetched and unpacked into the
/// cache unless it is there already.
pub fn kernel(package: &str, suite: &str) -> Result<PathBuf, String> {
    let cache = cache_dir()?.join(package);
    let unpacked = cache.join("unpacked");
    if let Some(vmlinuz) = find_vmlinuz(&unpacked) {
        return Ok(vmlinuz);
    }
    eprintln!(
        "bench: fetching {package} from {suite} into {}",
        cache.display()
    );
    let apt = cache.join("apt");
    for dir in ["parts", "lists/partial", "cache/archives/partial", "debs"] {
        std::fs::create_dir_all(apt.join(dir))
            .map_err(|error| format!("creating {}: {error}", apt.join(dir).display()))?;
    }
    let source = format!(
        "Types: deb\nURIs: {}\nSuites: {suite}\nComponents: main\nSigned-By: {ARCHIVE_KEYRING}\n",
        archive_address()?
    );
    std::fs::write(apt.join("parts/suite.sources"), source)
        .map_err(|error| format!("writing the apt source: {error}"))?;
    let apt_get = || {
        let mut command = Command::new("apt-get");
        command.args(["-q", "-o", "Dir::Etc::SourceList=/dev/null"]);
        for (option, dir) in [
            ("Dir::Etc::SourceParts", "parts"),
            ("Dir::State::Lists", "lists"),
            ("Dir::Cache", "cache"),
        ] {
            command
                .arg("-o")
                .arg(format!("{option}={}", apt.join(dir).display()));
        }
        // Downloads run as this user, not apt's sandbox user, which may not
        // write the cache.
        command.args(["-o", "APT::Sandbox::User=root"]);
        command
    };
    let mut update = apt_get();
    update.arg("update");
    run(update, "apt-get update (private lists)")?;
    let mut download = apt_get();
    download
        .current_dir(apt.join("debs"))
        .args(["download", package]);
    run(download, &format!("apt-get download {package}"))?;
    let deb = std::fs::read_dir(apt.join("debs"))
        .map_err(|error| format!("reading the download directory: {error}"))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| path.extension().is_some_and(|ext| ext == "deb"))
        .ok_or_else(|| format!("apt-get download {package} left no .deb"))?;
    std::fs::create_dir_all(&unpacked)
        .map_err(|error| format!("creating {}: {error}", unpacked.display()))?;
    let mut extract = Command::new("dpkg-deb");
    extract.arg("-x").arg(&deb).arg(&unpacked);
    run(extract, "dpkg-deb -x")?;
    find_vmlinuz(&unpacked).ok_or_else(|| format!("{} has no boot/vmlinuz-*", deb.display()))
}

fn find_vmlinuz(unpacked: &Path) -> Option<PathBuf> {
    std::fs::read_dir(unpacked.join("boot"))
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("vmlinuz-"))
        })
}

/// The modules Linux needs for swap on zram (zram and what it depends on), read from
/// the package `vmlinuz` was unpacked from, named as the initramfs holds
/// them (`module-1-lz4_compress.ko.xz`, ...).
pub fn swap_modules(vmlinuz: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let unpacked = vmlinuz
        .parent()
        .and_then(Path::parent)
        .ok_or_else(|| format!("{} is not in an unpacked package", vmlinuz.display()))?;
    let version = vmlinuz
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_prefix("vmlinuz-"))
        .ok_or_else(|| format!("{} is not named vmlinuz-VERSION", vmlinuz.display()))?;
    let tree = ["usr/lib/modules", "lib/modules"]
        .iter()
        .map(|dir| unpacked.join(dir).join(version).join("kernel"))
        .find(|dir| dir.is_dir())
        .ok_or_else(|| format!("the package has no modules for {version}"))?;
    ZRAM_MODULES
        .iter()
        .enumerate()
        .map(|(index, module)| {
            let file = format!("{module}.ko.xz");
            let path = find_file(&tree, &file)
                .ok_or_else(|| format!("the package has no {file} (needed for swap on zram)"))?;
            let contents = std::fs::read(&path)
                .map_err(|error| format!("reading {}: {error}", path.display()))?;
            Ok((format!("module-{}-{file}", index + 1), contents))
        })
        .collect()
}

/// The first file called `name` under `dir`, depth first.
fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .collect();
    entries.sort();
    entries.iter().find_map(|path| {
        if path.is_dir() {
            find_file(path, name)
        } else {
            (path.file_name()? == name).then(|| path.clone())
        }
    })
}

/// A program file this kernel's ramdisk holds, as the initramfs gets it.
pub struct Program {
    pub name: String,
    pub contents: Vec<u8>,
}

impl Program {
    /// The built C program `name` (`tlb_flush2-musl`).
    pub fn built(name: &str) -> Result<Self, String> {
        let path = Path::new(C_PROGRAMS_DIR).join(name);
        let contents = std::fs::read(&path).map_err(|error| {
            format!(
                "reading {}: {error} (is the build current?)",
                path.display()
            )
        })?;
        Ok(Self {
            name: name.to_string(),
            contents,
        })
    }

    /// The SHA-256 of the file, in hex.
    pub fn sha256(&self) -> String {
        Sha256::digest(&self.contents)
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// Writes the initramfs with the project's init, `program` and `modules`
/// (named files, as [`swap_modules`] gives them) into `dir` and returns its
/// path.
pub fn initramfs(
    program: &Program,
    modules: &[(String, Vec<u8>)],
    dir: &Path,
) -> Result<PathBuf, String> {
    let init_path = Path::new(C_PROGRAMS_DIR).join("linux-init");
    let init = std::fs::read(&init_path)
        .map_err(|error| format!("reading {}: {error}", init_path.display()))?;
    let mut files = vec![
        (String::from("init"), init),
        (program.name.clone(), program.contents.clone()),
    ];
    files.extend_from_slice(modules);
    let archive = ramdisk::pack(&files);
    ramdisk::verify(&archive, &files);
    std::fs::create_dir_all(dir).map_err(|error| format!("creating {}: {error}", dir.display()))?;
    let path = dir.join(format!("initramfs-{}.cpio", program.name));
    std::fs::write(&path, archive)
        .map_err(|error| format!("writing {}: {error}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The initramfs holds the init, the program and the modules, byte for
    /// byte, under their names, as a cpio archive Linux unpacks.
    #[test]
    fn the_initramfs_holds_init_and_the_program() {
        let program = Program {
            name: String::from("probe"),
            contents: b"\x7fELF not really".to_vec(),
        };
        let dir = std::env::temp_dir().join(format!("shootdown-initramfs-{}", std::process::id()));
        let module = (
            String::from("module-1-probe.ko.xz"),
            b"not a module".to_vec(),
        );
        let path = initramfs(&program, std::slice::from_ref(&module), &dir).unwrap();
        let archive = std::fs::read(&path).unwrap();
        let init = std::fs::read(Path::new(C_PROGRAMS_DIR).join("linux-init")).unwrap();
        ramdisk::verify(
            &archive,
            &[
                (String::from("init"), init),
                (String::from("probe"), program.contents.clone()),
                module,
            ],
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    /// The checksum is SHA-256 (FIPS 180-2's "abc" vector).
    #[test]
    fn the_checksum_is_sha256() {
        let abc = Program {
            name: String::from("abc"),
            contents: b"abc".to_vec(),
        };
        assert_eq!(
            abc.sha256(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
