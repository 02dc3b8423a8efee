//! `--against linux`: a `linux` column beside this kernel's, in which
//! Debian's Linux runs the very program file this kernel runs (one of the
//! C programs of `user/c/`, static musl), on the same QEMU, CPU model, CPU
//! count and memory, interleaved with this kernel's runs. Both benchmarks
//! take it; [`crate::linux`] fetches the kernel and packs the initramfs.

use clap::{Args, ValueEnum};

use crate::{linux, machine::Guest};

/// Another kernel to compare with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Against {
    /// Debian's Linux (`--linux-package`).
    Linux,
}

/// The options of `--against`.
#[derive(Debug, Args)]
pub struct AgainstArgs {
    /// Also boot Linux, with the same program file, on the same QEMU, CPU
    /// model, CPU count and memory, interleaved with this kernel's runs (a
    /// column `linux`). Both kernels then run the C program of `user/c/`
    /// (static musl) instead of the Rust one, from the same bytes. The
    /// kernel is Debian's package (`--linux-package`), fetched once into
    /// ~/.cache/shootdown/linux.
    #[arg(long, value_enum, value_name = "KERNEL")]
    pub against: Option<Against>,
    /// Debian's Linux kernel package for `--against linux`.
    #[arg(long, default_value = linux::DEFAULT_PACKAGE)]
    linux_package: String,
    /// The Debian suite that has `--linux-package`.
    #[arg(long, default_value = linux::DEFAULT_SUITE)]
    linux_suite: String,
}

/// Linux's column: the guest every `linux` cell boots, and the note printed
/// under the tables (the program file's checksum).
pub struct LinuxColumn {
    pub guest: Guest,
    pub note: String,
}

impl AgainstArgs {
    /// Linux's column for `program` (`tlb_flush2-musl`), or `None` without
    /// `--against`; `swap` also packs what Linux needs to swap, for a
    /// program that pages out.
    pub fn linux_column(&self, program: &str, swap: bool) -> Result<Option<LinuxColumn>, String> {
        let Some(Against::Linux) = self.against else {
            return Ok(None);
        };
        let file = linux::Program::built(program)?;
        let kernel = linux::kernel(&self.linux_package, &self.linux_suite)?;
        let modules = if swap {
            linux::swap_modules(&kernel)?
        } else {
            Vec::new()
        };
        let initramfs = linux::initramfs(
            &file,
            &modules,
            &std::env::temp_dir().join("shootdown-bench"),
        )?;
        let note = format!(
            "both kernels ran the same file: {program} sha256 {} ({} bytes); Linux: {}",
            file.sha256(),
            file.contents.len(),
            self.linux_package
        );
        Ok(Some(LinuxColumn {
            guest: Guest::Linux { kernel, initramfs },
            note,
        }))
    }
}
