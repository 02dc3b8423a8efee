//! Leveled logging (`log::info!` and friends) to the serial console.
//!
//! The level starts at `info` and can be changed with the `log=` command-line
//! option. Each line names its level so a reader can tell a diagnostic from
//! the kernel's regular output.

use log::{LevelFilter, Log, Metadata, Record};

struct SerialLogger;

static LOGGER: SerialLogger = SerialLogger;

impl Log for SerialLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            hal::println!("[{:>5}] {}", record.level(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger at level `info`.
pub fn init() {
    // `set_logger` fails only if a logger is already installed, which means
    // `init` ran before: keeping the first one is the right outcome.
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(LevelFilter::Info);
}

/// Changes the most verbose level that is printed.
pub fn set_level(level: LevelFilter) {
    log::set_max_level(level);
}
