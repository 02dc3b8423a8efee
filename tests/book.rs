//! The book's references to the code: `.ci/check-docs --static`
//! (`.ci/book_refs.py`) finds the book true to the tree, and rejects a
//! chapter made stale on purpose in each of the ways a book goes stale: an
//! excerpt whose code moved on, a line reference past the end of its file,
//! a function named in a file that does not define it, a path that is not
//! in the repository, and a count the tree no longer has.
//!
//! Each stale copy is a real chapter with one edit, written into a scratch
//! directory; the checker reads the code from the repository either way.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// `.ci/check-docs --static FILES`: whether it passed, and what it printed.
fn check(files: &[&Path]) -> (bool, String) {
    let output = Command::new("python3")
        .arg(Path::new(ROOT).join(".ci/check-docs"))
        .arg("--static")
        .args(files)
        .current_dir(ROOT)
        .output()
        .unwrap_or_else(|error| panic!("cannot run python3 .ci/check-docs: {error}"));
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

/// A chapter of the book, by the start of its file name.
fn chapter(prefix: &str) -> (PathBuf, String) {
    let path = fs::read_dir(Path::new(ROOT).join("docs"))
        .expect("docs/")
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .find(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no chapter docs/{prefix}*"));
    let text = fs::read_to_string(&path).expect("the chapter");
    (path, text)
}

/// Writes `text` as a stale copy of `original` and checks it: the checker
/// must fail, naming the copy and saying `expected`.
fn assert_rejected(original: &Path, text: &str, expected: &str) {
    // A directory per test (libtest names each test's thread after it):
    // the tests run at once, and several stale the same chapter.
    let test = std::thread::current().name().unwrap_or("test").to_string();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("stale-book")
        .join(test);
    fs::create_dir_all(&dir).expect("scratch directory");
    let copy = dir.join(original.file_name().expect("a file name"));
    fs::write(&copy, text).expect("the stale copy");
    let (passed, output) = check(&[&copy]);
    assert!(!passed, "the stale copy passed:\n{output}");
    // The checker names a file inside the repository by its relative path.
    let named = copy
        .strip_prefix(ROOT)
        .unwrap_or(&copy)
        .display()
        .to_string();
    assert!(
        output
            .lines()
            .any(|line| line.starts_with(&format!("FAIL {named}:")) && line.contains(expected)),
        "no FAIL line naming {named} and saying {expected:?}:\n{output}"
    );
}

/// Replaces the first occurrence of `old` in `text`, which must hold it.
fn replace_once(text: &str, old: &str, new: &str) -> String {
    assert!(text.contains(old), "the chapter no longer holds {old:?}");
    text.replacen(old, new, 1)
}

#[test]
fn the_book_is_true_to_the_tree() {
    let (passed, output) = check(&[]);
    assert!(passed, "{output}");
    assert!(output.contains(", 0 problems"), "{output}");
}

#[test]
fn an_excerpt_whose_code_changed_is_rejected() {
    let (path, text) = chapter("03-");
    let start = text.find("```rust\n").expect("chapter 3 shows code") + "```rust\n".len();
    let line_end = start + text[start..].find('\n').expect("a line");
    let stale = format!(
        "{}    // a line the code does not have{}",
        &text[..start],
        &text[line_end..]
    );
    assert_rejected(&path, &stale, "excerpt differs from");
}

#[test]
fn a_line_reference_past_the_end_of_its_file_is_rejected() {
    let (path, text) = chapter("03-");
    let stale = replace_once(&text, "`mm/src/flush.rs`", "`mm/src/flush.rs:99999`");
    assert_rejected(&path, &stale, "mm/src/flush.rs:99999: mm/src/flush.rs has");
}

#[test]
fn a_function_named_in_the_wrong_file_is_rejected() {
    let (path, text) = chapter("03-");
    // `consider_global_asid` lives in mm/src/global_asid.rs; the handler's
    // file neither defines nor calls it.
    let stale = replace_once(
        &text,
        "`mm/src/flush_handler.rs` (`handle_flush`",
        "`mm/src/flush_handler.rs` (`consider_global_asid`",
    );
    assert_rejected(
        &path,
        &stale,
        "`consider_global_asid` is not defined in `mm/src/flush_handler.rs`",
    );
}

#[test]
fn a_renamed_function_is_rejected() {
    let (path, text) = chapter("03-");
    let stale = replace_once(&text, "`bump_generation`", "`bump_the_generation`");
    assert_rejected(&path, &stale, "bump_the_generation is defined nowhere");
}

#[test]
fn a_path_outside_the_repository_is_rejected() {
    let (path, text) = chapter("01-");
    let stale = format!("{text}\nSee `../shared/notes/`.\n");
    assert_rejected(&path, &stale, "is outside the repository");
}

#[test]
fn a_count_the_tree_no_longer_has_is_rejected() {
    let (path, text) = chapter("10-");
    let marker = "<!-- count: model-mutations -->";
    let at = text
        .find(marker)
        .expect("chapter 10 counts the model's mutations");
    let number_start = text[..at]
        .trim_end()
        .rfind(' ')
        .expect("a number before it")
        + 1;
    let stale = format!("{}999 {}", &text[..number_start], &text[at..]);
    assert_rejected(&path, &stale, "the text says 999 for model-mutations");
}
