"""The book's references to the code, checked without running anything.

`.ci/check-docs` runs the book's commands; this module checks what the text
itself claims about the tree, so that a renamed function, a moved line or a
grown test count is caught the day it happens:

- **excerpts**: a ```rust or ```c block is a copy of source lines, and the
  paragraph just before it names them: its last reference of the form
  `` `mm/src/flush.rs:120-141` `` is the excerpt's. The block must be
  byte-identical to those lines. (When it is not, the message says where
  the same lines are now, if they still exist.)
- **line references**: every `path:LINE` (or `path:LINE:COLUMN`,
  `path:FIRST-LAST`) in the text names an existing file and line. Written
  `` `name` (`path:LINE`) ``, the name must also be on that line or just
  below it.
- **paths**: every backticked path names a file or directory of the
  repository (relative to the root, or to a directory the same paragraph
  names). Nothing outside the repository (`../`, `/tmp/`) may be named,
  nor the project's private notes ("the seeds", "design notes",
  "design.md"): a reader's clone has only the repository.
- **names**: every backticked Rust name that has a `::`, an underscore or an
  inner capital (`TlbSystem::switch_mm`, `should_flush`, `FlushBatch`) is
  defined somewhere in the tree; `module::item` is defined in that module,
  `Type::item` where `Type` is defined or implemented. Names the text ties
  to a file, as `` `path` (`a`, `b`) `` or `` `a` in `path` ``, are
  defined in that file (or under that directory). Names of other software
  that the book mentions are listed in `ELSEWHERE`.
- **counts**: a number followed by `<!-- count: NAME -->` (invisible in the
  rendered page) must equal the count `COUNTS` computes from the tree, for
  example the host model's mutations or the loom tests.

Each problem is a `Problem` naming the book's file and line.
"""

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\s*$")
EXCERPT_LANGUAGES = {"rust", "c"}
# `path:LINE`, `path:LINE:COLUMN`, `path:FIRST-LAST`
SOURCE_SUFFIXES = r"(?:rs|c|h|py|toml|sh|md|svg|json|csv)"
LINE_REFERENCE = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\." + SOURCE_SUFFIXES + r"):(\d+)(?:(?::|-)(\d+))?"
)
CAPTION = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.(?:rs|c|h)):(\d+)-(\d+)`")
BACKTICKED = re.compile(r"`([^`\n]+)`")
RUST_NAME = re.compile(r"^(?:[A-Za-z_]\w*::)*[A-Za-z_]\w*(?:\(\))?$")
PATH_TOKEN = re.compile(r"^(?:\.\.?/)?(?:[\w.-]+/)+[\w.-]*$|^[\w.-]+\." + SOURCE_SUFFIXES + "$")
# Names of the project's private notes, which a public clone does not have.
PRIVATE_NOTES = re.compile(r"\bthe seeds\b|\bseed's\b|\bseeds'|`00[0-2]_|\bdesign notes\b"
                           r"|\bdesign\.md\b|\breference §")
COUNT_MARKER = re.compile(r"\b(\d+|[A-Za-z]+)\s*<!--\s*count:\s*([\w-]+)\s*-->")
# `path` (`a`, `b`) and `a` in `path`
PATH_THEN_NAMES = re.compile(r"`([^`\s]+)`\s*\(([^()]*)\)")
NAME_IN_PATH = re.compile(r"`([A-Za-z_][\w:]*)(?:\(\))?`\s+(?:in|of|from)\s+`([^`\s]+)`")

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20,
}

# The workspace's crates: the first segment of a path like `mm::flush`.
CRATES = {"mm", "hal", "kernel", "boot", "abi", "tlb_types", "user", "shootdown", "xtask",
          "kernel_tests", "crate", "self", "super", "std", "core", "alloc"}

# Names the book uses that belong to other software: Linux, QEMU, libc,
# Rust's library and the crates the kernel builds on. They are not looked
# up in the tree.
ELSEWHERE = {
    # Linux
    "flush_tlb_mm_range", "mmap_lock", "arch_tlbbatch_flush", "arch_tlbbatch_add_pending",
    "arch_tlbbatch_should_defer", "native_flush_tlb_multi", "should_flush_tlb",
    "switch_mm_irqs_off", "choose_new_asid", "cpu_tlbstate", "loaded_mm", "LOADED_MM_SWITCHING",
    "clear_page_erms", "tlb_flush2", "mmu_gather", "flush_tlb_func", "use_global_asid",
    "consider_global_asid", "finish_asid_transition", "broadcast_tlb_flush", "mm_global_asid",
    "invlpgb_count_max", "try_to_unmap_one", "try_to_unmap_flush", "set_tlb_ubc_flush_pending",
    "enter_lazy_tlb", "__invlpgb", "__tlbsync", "tlb_single_page_flush_ceiling", "set_robust_list", "set_tid_address", "sched_setaffinity",
    "sched_getaffinity", "clock_gettime", "clock_nanosleep", "arch_prctl", "exit_group",
    "CONFIG_DEBUG_TLBFLUSH", "nr_tlb_remote_flush", "X86_FEATURE_INVLPGB", "MADV_DONTNEED",
    "MADV_PAGEOUT", "MAP_SHARED", "MAP_FIXED", "MAP_ANONYMOUS", "MAP_PRIVATE", "PROT_READ",
    "CLONE_VM", "CLONE_THREAD", "CLONE_SETTLS", "CLONE_PARENT_SETTID", "CLONE_CHILD_CLEARTID",
    "ARCH_SET_FS", "AT_RANDOM", "AT_PHDR", "AT_PAGESZ", "FUTEX_WAIT", "FUTEX_WAKE",
    # QEMU and the CPU manuals
    "async_run_on_cpu", "tlb_flush_page", "tlb_flush_by_mmuidx", "InvlpgbCountMax",
    # Rust and crates
    "spin::Mutex", "spin::RwLock", "SmallVec", "write_bytes", "finish_grow", "RwLock",
    "AtomicU64", "AtomicU16", "AtomicBool", "SeqCst", "AcqRel", "Acquire", "Release", "Relaxed",
    "UnsafeCell", "Ordering::SeqCst", "Ordering::Acquire", "Ordering::Release",
    "libtest_mimic", "loom::model", "PhantomData", "MaybeUninit", "__rust_dealloc",
}

# Paths of other projects (Linux's tree) that the book names.
ELSEWHERE_PATHS = ("arch/", "Documentation/")


def count_tests(root, directory, prefix=""):
    """`#[test]` functions under `directory` whose names start with `prefix`."""
    total = 0
    for path in sorted((root / directory).rglob("*.rs")):
        text = path.read_text()
        total += len(re.findall(r"#\[test\]\s*(?:#\[[^\]]*\]\s*)*fn\s+" + re.escape(prefix), text))
    return total


def enum_variants(root, file, enum):
    """The variants of `enum` in `file` (doc comments and attributes skipped)."""
    text = (root / file).read_text()
    body = re.search(r"enum\s+" + enum + r"\b[^{]*\{(.*?)\n\}", text, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    body = re.sub(r"#\[[^\]]*\]", "", body)
    return re.findall(r"^\s*([A-Z]\w*)\s*[,({=]", body, re.M)


def bug_names(root):
    """The `tlb.bug=` names of the kernel's table of deliberate bugs."""
    text = (root / "kernel/src/tlb_mode.rs").read_text()
    table = re.search(r"BUGS:[^=]*=\s*&?\[(.*?)\];", text, re.S).group(1)
    return re.findall(r'\(\s*"([\w-]+)"', table)


def kernel_tests(root):
    """The in-kernel tests: `pub fn NAME() -> TestResult` in the suites."""
    total = 0
    for path in sorted((root / "kernel/src/ktest/suites").rglob("*.rs")):
        total += len(re.findall(r"pub fn \w+\(\)\s*->\s*TestResult", path.read_text()))
    return total


# What a `<!-- count: NAME -->` marker may name, computed from the tree.
COUNTS = {
    "model-tests": lambda root: count_tests(root, "mm/tests/model"),
    "model-mutations": lambda root: count_tests(root, "mm/tests/model", "mutation_"),
    "loom-tests": lambda root: count_tests(root, "mm/tests/loom"),
    "mm-faults": lambda root: len(enum_variants(root, "mm/src/faults.rs", "Fault")),
    "tlb-bugs": lambda root: len(bug_names(root)),
    "kernel-tests": kernel_tests,
    "chapters": lambda root: len(list((root / "docs").glob("[0-9][0-9]-*.md"))),
}


@dataclass
class Problem:
    where: str
    what: str

    def __str__(self):
        return f"{self.where}: {self.what}"


class Tree:
    """The repository's tracked files, and where each name is defined."""

    DEFINITION = [
        # Rust items, enum variants and struct fields, modules.
        re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|mod|union)\s+([A-Za-z_]\w*)"),
        re.compile(r"macro_rules!\s*([A-Za-z_]\w*)"),
        re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?([A-Za-z_]\w*)\s*(?:[,({=]|:[^:])", re.M),
        # C functions, macros and types; Python and shell functions.
        re.compile(r"^[\w \t\*]*?\b([A-Za-z_]\w*)\s*\([^;]*$", re.M),
        re.compile(r"#define\s+([A-Za-z_]\w*)"),
        re.compile(r"\b(?:def|class)\s+([A-Za-z_]\w*)"),
    ]

    def __init__(self, root):
        self.root = root
        listed = subprocess.run(["git", "ls-files"], cwd=root, stdout=subprocess.PIPE,
                                check=True).stdout.decode().split("\n")
        self.files = {name for name in listed if name}
        self.directories = {str(Path(name).parent) for name in self.files}
        for directory in list(self.directories):
            parts = Path(directory).parts
            self.directories.update(str(Path(*parts[:i])) for i in range(1, len(parts)))
        self._lines = {}
        self.defined = {}  # name -> set of files
        for name in self.files:
            if not name.endswith((".rs", ".c", ".h", ".py", ".sh")) and "/" in name \
                    and not name.startswith(".ci/"):
                continue
            path = root / name
            if not path.is_file():
                continue
            try:
                text = path.read_text()
            except UnicodeDecodeError:
                continue
            found = set()
            for pattern in self.DEFINITION:
                found.update(pattern.findall(text))
            stem = Path(name).stem
            found.add(Path(name).parent.name if stem == "mod" else stem)
            for word in found:
                self.defined.setdefault(word, set()).add(name)

    def printed_key(self, word):
        """Whether the kernel prints `word=` (a counter of a `tlb-counters:` line)."""
        if not hasattr(self, "_keys"):
            self._keys = set()
            for name in self.files:
                if name.endswith(".rs") and (self.root / name).is_file():
                    self._keys.update(re.findall(r"\b([a-z_][a-z0-9_]*)=\{",
                                                 (self.root / name).read_text()))
        return word in self._keys

    def lines(self, name):
        if name not in self._lines:
            self._lines[name] = (self.root / name).read_text().split("\n")
        return self._lines[name]

    def exists(self, name):
        name = name.rstrip("/")
        return name in self.files or name in self.directories

    def under(self, files, place):
        """The files of `files` that are `place` or lie under it."""
        place = place.rstrip("/")
        return {f for f in files if f == place or f.startswith(place + "/")}

    def module_files(self, module):
        """Files that are module `module`, or hold `mod module`."""
        return {f for f in self.files if Path(f).stem == module
                or (Path(f).name == "mod.rs" and Path(f).parent.name == module)
                or f.startswith(module + "/") or ("/" + module + "/") in f} | \
            self.defined.get(module, set())

    def definitions(self, item):
        return self.defined.get(item, set())


def paragraphs(lines):
    """(first line number, text) of each paragraph outside fenced blocks;
    the fenced blocks come back as (line number, language, body)."""
    blocks, prose = [], []
    current, start, index = [], None, 0
    while index < len(lines):
        line = lines[index]
        fence = FENCE.match(line)
        if fence:
            if current:
                prose.append((start, current))
                current = []
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            blocks.append((index + 1, fence.group(1), lines[index + 1:end]))
            index = end + 1
            continue
        if line.strip():
            if not current:
                start = index + 1
            current.append(line)
        elif current:
            prose.append((start, current))
            current = []
        index += 1
    if current:
        prose.append((start, current))
    return prose, blocks


class Checker:
    def __init__(self, root):
        self.root = root
        self.tree = Tree(root)
        self.counts = {}

    def check(self, path):
        lines = path.read_text().split("\n")
        try:
            shown = str(path.relative_to(self.root))
        except ValueError:
            shown = str(path)
        problems = []
        prose, blocks = paragraphs(lines)
        for number, language, body in blocks:
            if language in EXCERPT_LANGUAGES:
                problems += self.excerpt(shown, lines, number, body)
            for offset, line in enumerate(body):
                if "../shared" in line:
                    problems.append(Problem(f"{shown}:{number + 1 + offset}",
                                            "a command or output outside the repository "
                                            "(../shared): a clone lacks it"))
                if language != "sh":
                    problems += self.line_references(f"{shown}:{number + 1 + offset}", line)
        for start, paragraph in prose:
            problems += self.paragraph(shown, start, paragraph)
        return problems

    def excerpt(self, shown, lines, number, body):
        where = f"{shown}:{number}"
        before = lines[:number - 1]
        while before and not before[-1].strip():
            before.pop()
        caption = []
        while before and before[-1].strip() and not before[-1].startswith("```"):
            caption.insert(0, before.pop())
        found = None
        for found in CAPTION.finditer(" ".join(caption)):
            pass
        if not found:
            return [Problem(where, "an excerpt must follow a paragraph that names its lines "
                                   "as `path:FIRST-LAST`")]
        source, first, last = found.group(1), int(found.group(2)), int(found.group(3))
        if source not in self.tree.files:
            return [Problem(where, f"the excerpt's file {source} is not in the repository")]
        code = self.tree.lines(source)
        wanted = code[first - 1:last]
        if wanted == body:
            return []
        moved = self.find(code, body)
        hint = f"; the same lines are now {source}:{moved}" if moved else ""
        for offset, (book, file) in enumerate(zip(body, wanted)):
            if book != file:
                return [Problem(f"{shown}:{number + 1 + offset}",
                                f"excerpt differs from {source}:{first + offset}: the book has "
                                f"{book.strip()!r}, the file {file.strip()!r}{hint}")]
        return [Problem(where, f"excerpt has {len(body)} lines, {source}:{first}-{last} has "
                               f"{len(wanted)}{hint}")]

    @staticmethod
    def find(code, body):
        if not body:
            return None
        for start in range(len(code) - len(body) + 1):
            if code[start:start + len(body)] == body:
                return f"{start + 1}-{start + len(body)}"
        return None

    def line_references(self, where, text):
        problems = []
        for found in LINE_REFERENCE.finditer(text):
            source, line = found.group(1), int(found.group(2))
            if source.startswith(("target/", "/")):
                continue
            if source not in self.tree.files:
                problems.append(Problem(where, f"{found.group(0)}: no file {source}"))
                continue
            length = len(self.tree.lines(source))
            last = int(found.group(3)) if found.group(3) and "-" in found.group(0)[len(source):] \
                else line
            if not 1 <= line <= last <= length:
                problems.append(Problem(where, f"{found.group(0)}: {source} has {length} lines"))
        return problems

    def paragraph(self, shown, start, paragraph):
        text = "\n".join(paragraph)
        where = f"{shown}:{start}"
        problems = []
        for offset, line in enumerate(paragraph):
            problems += self.line_references(f"{shown}:{start + offset}", line)
        named_dirs = [token for token in BACKTICKED.findall(text)
                      if PATH_TOKEN.match(token) and self.tree.exists(token)]
        for token in BACKTICKED.findall(text):
            token = token.strip()
            if PATH_TOKEN.match(token) and not LINE_REFERENCE.fullmatch(token):
                problems += self.path(where, token, named_dirs)
            elif RUST_NAME.match(token) and self.checkable(token) and not self.elsewhere(token):
                problems += self.name(where, token)
        for found in PATH_THEN_NAMES.finditer(text):
            place = found.group(1)
            if not (PATH_TOKEN.match(place) and self.tree.exists(place)):
                continue
            for name in BACKTICKED.findall(found.group(2)):
                problems += self.name_in(where, name, place)
        for found in NAME_IN_PATH.finditer(text):
            if PATH_TOKEN.match(found.group(2)) and self.tree.exists(found.group(2)):
                problems += self.name_in(where, found.group(1), found.group(2))
        for found in re.finditer(r"`(?P<name>[A-Za-z_][\w:]*)(?:\(\))?`\s*\(`(?P<ref>[^`]+)`\)",
                                 text):
            problems += self.name_at_line(where, found.group("name"), found.group("ref"))
        for found in PRIVATE_NOTES.finditer(text):
            problems.append(Problem(where, f"'{found.group(0)}' names notes a public clone "
                                           "does not have: say what they say instead"))
        for found in COUNT_MARKER.finditer(text):
            problems += self.count(where, found.group(1), found.group(2))
        return problems

    def path(self, where, token, named_dirs):
        if token.startswith(("../", "/tmp/")) or "/shared/" in token:
            return [Problem(where, f"`{token}` is outside the repository: a clone lacks it")]
        token = token[2:] if token.startswith("./") else token
        first = token.split("/")[0]
        # Outputs (target/), other trees, and placeholders (DIR/, NAME).
        if token.startswith(("target/", "~", "/", "$") + ELSEWHERE_PATHS) or "*" in token \
                or "NAME" in token or "<" in token or (first.isupper() and "/" in token):
            return []
        # A word with a slash that names no file kind (`broadcasts/iter`) is no path.
        if not (token.endswith("/") or re.search(r"\.\w+$", token)):
            return []
        if self.tree.exists(token):
            return []
        if any(self.tree.exists(str(Path(d) / token)) for d in named_dirs):
            return []
        if "/" not in token and any(Path(f).name == token for f in self.tree.files):
            return []
        return [Problem(where, f"`{token}`: no such file or directory in the repository")]

    def elsewhere(self, token):
        """Whether `token` names other software's item (`ELSEWHERE`) that
        the tree does not define too: Linux's names that `mm` reuses are
        checked like any other."""
        bare = token[:-2] if token.endswith("()") else token
        item = bare.split("::")[-1]
        return (bare in ELSEWHERE or item in ELSEWHERE) and not self.tree.definitions(item)

    @staticmethod
    def checkable(token):
        bare = token[:-2] if token.endswith("()") else token
        if "::" in bare:
            return True
        if "_" in bare.strip("_") and not bare.isupper():
            return True
        return bool(re.match(r"^[A-Z][a-z0-9]+[A-Z]", bare))

    def name(self, where, token):
        segments = (token[:-2] if token.endswith("()") else token).split("::")
        segments = [s for s in segments if s]
        while segments and segments[0] in CRATES:
            segments = segments[1:]
        if not segments:
            return []
        item = segments[-1]
        files = self.tree.definitions(item)
        if not files and len(segments) == 1 and self.tree.printed_key(item):
            return []
        if not files:
            return [Problem(where, f"`{token}`: {item} is defined nowhere in the tree")]
        if len(segments) >= 2:
            owner = segments[-2]
            if owner[0].isupper():
                places = {f for f in self.tree.files
                          if re.search(r"\b(?:impl|trait|struct|enum)\b[^{;]*\b" + owner + r"\b",
                                       self.text(f))}
            else:
                places = self.tree.module_files(owner)
            if places and not files & self.expand(places):
                return [Problem(where, f"`{token}`: {item} is not defined in {owner}")]
        return []

    def expand(self, places):
        """Files and, for a module file `x.rs`, the files of `x/`."""
        more = set(places)
        for place in places:
            if place.endswith(".rs"):
                more |= self.tree.under(self.tree.files, place[:-3])
                parent = str(Path(place).parent)
                if Path(place).name in ("mod.rs", "lib.rs", "main.rs"):
                    more |= self.tree.under(self.tree.files, parent)
        return more

    def text(self, name):
        if not name.endswith((".rs", ".c", ".h")):
            return ""
        return "\n".join(self.tree.lines(name))

    def name_in(self, where, token, place):
        """`token`, named with `place`, is defined there or at least used
        there (`(where the scheduler calls `tlb::switch_to`)`)."""
        token = token.strip()
        if not RUST_NAME.match(token):
            return []
        bare = token[:-2] if token.endswith("()") else token
        if self.elsewhere(bare) or bare in CRATES:
            return []
        item = bare.split("::")[-1]
        place = place[2:] if place.startswith("./") else place
        files = self.tree.definitions(item)
        if self.tree.under(files, place):
            return []
        word = re.compile(r"\b" + re.escape(item) + r"\b")
        if any(word.search(self.text(f)) for f in self.tree.under(self.tree.files, place)):
            return []
        if not files:
            return [Problem(where, f"`{token}` (named with `{place}`) is defined nowhere")]
        return [Problem(where, f"`{token}` is not defined in `{place}` but in "
                               f"{', '.join(sorted(files)[:3])}")]

    def name_at_line(self, where, name, reference):
        found = LINE_REFERENCE.fullmatch(reference)
        # A range is an excerpt's, checked line by line against the file.
        if not found or found.group(1) not in self.tree.files or found.group(3):
            return []
        item = name.split("::")[-1]
        code = self.tree.lines(found.group(1))
        line = int(found.group(2))
        if any(item in text for text in code[line - 1:line + 3]):
            return []
        return [Problem(where, f"`{name}` is not at {reference}")]

    def count(self, where, written, name):
        if name not in COUNTS:
            return [Problem(where, f"count marker names no known count: {name} "
                                   f"(known: {', '.join(sorted(COUNTS))})")]
        if name not in self.counts:
            self.counts[name] = COUNTS[name](self.root)
        value = int(written) if written.isdigit() else NUMBER_WORDS.get(written.lower())
        if value != self.counts[name]:
            return [Problem(where, f"the text says {written} for {name}; the tree has "
                                   f"{self.counts[name]}")]
        return []
