//! The C programs of `user/c/`: written for Linux, built as static
//! executables with each of the two C libraries a Linux program is
//! commonly linked with, and shipped in the ramdisk beside the Rust
//! programs.
//!
//! Each `NAME.c` becomes two programs: `NAME`, linked with musl
//! (`musl-gcc -static`, from Debian's `musl-tools`), and `NAME-glibc`,
//! linked with glibc (`cc -static`, which needs glibc's static library from
//! `libc6-dev`). Both are ordinary static x86-64 Linux executables: the
//! same files run on Linux, which is why they are also left as plain files
//! in `target/<profile>/c-programs/`.

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
        "",
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
/// `out_dir`, copies the executables to `copy_dir`, and returns each
/// program's name and contents.
pub fn build(source_dir: &Path, out_dir: &Path, copy_dir: &Path) -> Vec<(String, Vec<u8>)> {
    println!("cargo:rerun-if-changed={}", source_dir.display());
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
            let compiler = std::env::var(variable).unwrap_or_else(|_| default.to_owned());
            let name = format!("{stem}{suffix}");
            let executable = out_dir.join(&name);
            compile(&compiler, install, source, &executable);
            let contents = std::fs::read(&executable)
                .unwrap_or_else(|error| panic!("reading {}: {error}", executable.display()));
            std::fs::write(copy_dir.join(&name), &contents).unwrap_or_else(|error| {
                panic!("copying {name} to {}: {error}", copy_dir.display())
            });
            programs.push((name, contents));
        }
    }
    programs
}

/// Compiles `source` into the static executable `executable` with
/// `compiler`, or stops the build saying what to install.
fn compile(compiler: &str, install: &str, source: &Path, executable: &Path) {
    let output = Command::new(compiler)
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
}
