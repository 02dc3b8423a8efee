//! The kernel's serial output, as lines, while the run goes on.
//!
//! QEMU hands the serial port over a pipe and Bochs writes it to a file,
//! but both are bytes that become lines here and only here: split at
//! `\n`, a `\r` before it dropped, invalid UTF-8 replaced, an unfinished
//! last line kept when the run ends. The watch loop (`super::watch`) asks
//! this record whether the kernel has entered and how long it has been
//! silent, the emulator's session whether its closing line came; the
//! record is shared (one [`Serial`] and its clones), because QEMU's pipe is
//! read by a thread of its own.

use std::{
    io::Read,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use super::Echo;

/// The first line the kernel prints; its arrival times the boot.
const KERNEL_ENTRY_LINE: &str = "shootdown: kernel entered";

/// One run's serial output so far; clones share it.
#[derive(Clone, Debug)]
pub struct Serial(Arc<Mutex<Record>>);

#[derive(Debug)]
struct Record {
    /// Every finished line.
    lines: Vec<String>,
    /// Bytes after the last `\n`.
    pending: Vec<u8>,
    /// When the emulator started.
    start: Instant,
    /// From `start` to the kernel's first line.
    kernel_entry: Option<Duration>,
    /// When the last line (or the start) was.
    last_line: Instant,
    /// Which lines to print on our stdout as they come.
    echo: Echo,
}

impl Serial {
    /// An empty record for an emulator that started at `start`.
    pub fn new(start: Instant, echo: Echo) -> Self {
        Self(Arc::new(Mutex::new(Record {
            lines: Vec::new(),
            pending: Vec::new(),
            start,
            kernel_entry: None,
            last_line: start,
            echo,
        })))
    }

    fn record(&self) -> MutexGuard<'_, Record> {
        // A reader that panicked left whole lines behind: still usable.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes `bytes` of output: every line they finish is recorded.
    pub fn push(&self, bytes: &[u8]) {
        let mut record = self.record();
        record.pending.extend_from_slice(bytes);
        while let Some(newline) = record.pending.iter().position(|&byte| byte == b'\n') {
            let line: Vec<u8> = record.pending.drain(..=newline).collect();
            record.add(&line[..newline]);
        }
    }

    /// Reads `source` until its end (QEMU's pipe closes when QEMU exits).
    pub fn follow(&self, mut source: impl Read) {
        let mut buffer = [0; 4096];
        while let Ok(read @ 1..) = source.read(&mut buffer) {
            self.push(&buffer[..read]);
        }
    }

    /// Takes what `source` holds beyond what was read from it before (the
    /// file Bochs appends to). A failed read is retried at the next call.
    pub fn catch_up(&self, source: &mut impl Read) {
        let mut fresh = Vec::new();
        let _ = source.read_to_end(&mut fresh);
        self.push(&fresh);
    }

    /// Whether a finished line contains `text`.
    pub fn printed(&self, text: &str) -> bool {
        crate::report::printed(&self.record().lines, text)
    }

    /// How long the kernel has been silent, once it has printed its first
    /// line; `None` before (the bootloader loads the kernel silently, and
    /// slowly on a loaded host, so silence counts only once it is in).
    pub fn silence(&self) -> Option<Duration> {
        let record = self.record();
        record.kernel_entry.map(|_| record.last_line.elapsed())
    }

    /// Ends the record: every line, the unfinished last one included, and
    /// the time from the start to the kernel's first line.
    pub fn finish(&self) -> (Vec<String>, Option<Duration>) {
        let mut record = self.record();
        if !record.pending.is_empty() {
            let rest = std::mem::take(&mut record.pending);
            record.add(&rest);
        }
        (std::mem::take(&mut record.lines), record.kernel_entry)
    }
}

impl Record {
    fn add(&mut self, line: &[u8]) {
        let line = String::from_utf8_lossy(line)
            .trim_end_matches('\r')
            .to_string();
        self.last_line = Instant::now();
        if self.kernel_entry.is_none() && line.contains(KERNEL_ENTRY_LINE) {
            self.kernel_entry = Some(self.start.elapsed());
        }
        if self.echo.shows(&line) {
            println!("{line}");
        }
        self.lines.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_become_lines_wherever_they_are_cut() {
        let serial = Serial::new(Instant::now(), Echo::Nothing);
        serial.push(b"first\r");
        serial.push(b"\nsec");
        assert!(serial.printed("first") && !serial.printed("sec"));
        serial.push(b"ond\n\nbad \xff byte\nunfinished");
        let (lines, entry) = serial.finish();
        assert_eq!(
            lines,
            ["first", "second", "", "bad \u{fffd} byte", "unfinished"]
        );
        assert_eq!(entry, None);
    }

    #[test]
    fn silence_counts_from_the_kernel_entry_line() {
        let serial = Serial::new(Instant::now(), Echo::Nothing);
        serial.follow(&b"bootloader noise\n"[..]);
        assert_eq!(serial.silence(), None);
        serial.catch_up(&mut &b"[ INFO] shootdown: kernel entered\nmore\n"[..]);
        assert!(serial.silence().is_some());
        let (lines, entry) = serial.finish();
        assert_eq!(lines.len(), 3);
        assert!(entry.is_some());
    }
}
