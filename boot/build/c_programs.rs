//! The C programs of `user/c/`: written for Linux, built as static
//! executables with each of the two C libraries a Linux program is
//! commonly linked with, and shipped in the ramdisk beside the Rust
//! programs.
//!
//! Each `NAME.c` becomes two programs: `NAME-musl`, linked with musl
//! (`musl-gcc -static`, from Debian's `musl-tools`), and `NAME-glibc`,
//! linked with glibc (`cc -static`, which needs glibc's static library from
//! `libc6-dev`). The suffix keeps them apart from the Rust programs of the
//! same name: `tlb_flush2` is Rust, `tlb_flush2-musl` its C twin. Both are
//! ordinary static x86-64 Linux executables: the same files run on Linux,
//! which is why they are also left as plain files in
//! `target/<profile>/c-programs/`.
//!
//! `user/c/linux/` holds what only Linux runs: the `/init` of the initramfs
//! that `bench --against linux` boots Linux with. It is built with musl
//! into the same directory (`linux-init`) and not put in the ramdisk.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The compilers: the musl wrapper and the system's C compiler (glibc).
/// `MUSL_GCC` and `CC` name others.
const MUSL_GCC: &str = "musl-gcc";
const GLIBC_CC: &str = "cc";

/// Every C library a program is built with, and the suffix of its name.
const LIBRARIES: [(&str, &str, &str, &str); 2] = [
    (
        "MUSL_GCC",
        MUSL_GCC,
        "-musl",
        "install Debian's musl-tools (apt-get install musl-tools)",
    ),
    (
        "CC",
        GLIBC_CC,
        "-glibc",
        "install a C compiler and glibc's static library (apt-get install gcc libc6-dev)",
    ),
];

/// Builds every `.c` file of `source_dir` with both libraries into
/// `copy_dir` and returns each program's name and contents; builds
/// `source_dir/linux/init.c` into `copy_dir/linux-init`.
pub fn build(source_dir: &Path, copy_dir: &Path) -> Vec<(String, Vec<u8>)> {
    println!("cargo:rerun-if-changed={}", source_dir.display());
    println!(
        "cargo:rerun-if-changed={}",
        source_dir.join("linux").display()
    );
    println!("cargo:rerun-if-env-changed=MUSL_GCC");
    println!("cargo:rerun-if-env-changed=CC");
    let mut sources: Vec<PathBuf> = std::fs::read_dir(source_dir)
        .unwrap_or_else(|error| panic!("reading {}: {error}", source_dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|extension| extension == "c"))
        .collect();
    sources.sort();
    std::fs::create_dir_all(copy_dir)
        .unwrap_or_else(|error| panic!("creating {}: {error}", copy_dir.display()));
    let mut programs = Vec::new();
    for source in &sources {
        let stem = source
            .file_stem()
            .and_then(|stem| stem.to_str())
            .expect("C program names are UTF-8");
        for (variable, default, suffix, install) in LIBRARIES {
            let name = format!("{stem}{suffix}");
            let contents = compile(variable, default, install, source, &copy_dir.join(&name));
            programs.push((name, contents));
        }
    }
    let (variable, default, _, install) = LIBRARIES[0];
    let init = source_dir.join("linux/init.c");
    compile(
        variable,
        default,
        install,
        &init,
        &copy_dir.join("linux-init"),
    );
    programs
}

/// Compiles `source` into the static executable `executable` with the
/// compiler `variable` names (or `default`) and returns the executable's
/// bytes, or stops the build saying what to install.
fn compile(
    variable: &str,
    default: &str,
    install: &str,
    source: &Path,
    executable: &Path,
) -> Vec<u8> {
    let compiler = std::env::var(variable).unwrap_or_else(|_| default.to_owned());
    let output = Command::new(&compiler)
        .args(["-static", "-O2", "-g0", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg("-o")
        .arg(executable)
        .arg(source)
        .output()
        .unwrap_or_else(|error| {
            panic!(
                "building the C program {} needs `{compiler}`, which could not run ({error}): {install}",
                source.display()
            )
        });
    assert!(
        output.status.success(),
        "`{compiler}` could not build {} ({}): {install} if it is missing\n{}",
        source.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read(executable)
        .unwrap_or_else(|error| panic!("reading {}: {error}", executable.display()))
}
