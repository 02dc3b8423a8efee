//! `cargo run` at the workspace root: boot the kernel in QEMU (see `boot::cli`).

fn main() -> std::process::ExitCode {
    boot::cli::main()
}
