//! `print!` and `println!` for the kernel: formatted text to the serial console.
//!
//! These are for output that is part of the kernel's interface (the banner,
//! test results, reports) and is printed whatever the log level. Diagnostics
//! go through the `log` macros instead (the kernel installs a logger).

/// Prints to the serial console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::serial::write_fmt(format_args!($($arg)*))
    };
}

/// Prints a line to the serial console.
#[macro_export]
macro_rules! println {
    () => {
        $crate::print!("\n")
    };
    ($($arg:tt)*) => {
        $crate::serial::write_fmt(format_args!("{}\n", format_args!($($arg)*)))
    };
}
