//! Collects the in-kernel tests for the `kernel-tests` image.
//!
//! Every `pub fn name() -> TestResult` at the top level of
//! `src/ktest/suites/area.rs` is the test `area::name`. This script writes
//! `suites.rs` into `OUT_DIR`: one module per suite file and the list of all
//! tests, in file-name and then source order, so that adding a test is
//! writing the function and nothing else. The suite `harness` holds tests
//! that fail on purpose; they are registered to run only when named exactly.

use std::{fmt::Write as _, fs, path::Path};

const SUITES: &str = "src/ktest/suites";
/// The suite whose tests must be named exactly to run.
const EXPLICIT_SUITE: &str = "harness";

fn main() {
    println!("cargo:rerun-if-changed={SUITES}");
    let mut files: Vec<_> = fs::read_dir(SUITES)
        .unwrap_or_else(|error| panic!("reading {SUITES}: {error}"))
        .map(|entry| entry.expect("a readable directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    files.sort();

    let mut modules = String::new();
    let mut list = String::from("pub const ALL: &[crate::framework::Test] = &[\n");
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let suite = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .expect("suite file names are UTF-8");
        let source = fs::read_to_string(path)
            .unwrap_or_else(|error| panic!("reading {}: {error}", path.display()));
        // A module declared in an included file is looked for beside that
        // file (in OUT_DIR), so each suite is named by its full path.
        let absolute = fs::canonicalize(path).expect("the suite file exists");
        writeln!(
            modules,
            "#[path = {:?}]\npub mod {suite};",
            absolute.display().to_string()
        )
        .unwrap();
        let constructor = if suite == EXPLICIT_SUITE {
            "explicit"
        } else {
            "new"
        };
        let tests = test_functions(&source);
        assert!(
            !tests.is_empty(),
            "{} has no `pub fn name() -> TestResult`",
            path.display()
        );
        for test in tests {
            writeln!(
                list,
                "    crate::framework::Test::{constructor}(\"{suite}::{test}\", {suite}::{test}),"
            )
            .unwrap();
        }
    }
    list.push_str("];\n");
    let out =
        Path::new(&std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("suites.rs");
    fs::write(&out, modules + "\n" + &list)
        .unwrap_or_else(|error| panic!("writing {}: {error}", out.display()));
}

/// The names of the test functions in a suite's source: top-level (not
/// indented) `pub fn name() -> TestResult`.
fn test_functions(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter_map(|line| line.strip_prefix("pub fn "))
        .filter_map(|rest| {
            let (name, signature) = rest.split_once('(')?;
            signature.starts_with(") -> TestResult").then_some(name)
        })
        .collect()
}
