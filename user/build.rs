//! Links every program in `src/bin/` as a static, non-relocatable executable
//! (ELF type ET_EXEC) at `abi::USER_IMAGE_BASE`, with the layout in
//! `link.ld`.
//!
//! The `x86_64-unknown-none` target links position-independent executables
//! by default, which a loader would have to relocate. The kernel's loader
//! only copies segments to their fixed addresses, so the programs are linked
//! without PIE: the code is still compiled position-independent (harmless),
//! but every address is resolved by the linker and no dynamic relocations
//! remain.

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rustc-link-arg-bins=--no-pie");
    println!("cargo:rustc-link-arg-bins=-static");
    println!("cargo:rustc-link-arg-bins=-T{manifest_dir}/link.ld");
    // Debug information would make each program some 30 times larger, and
    // every byte of the ramdisk is read from disk at each boot. The symbol
    // table stays, for reading fault addresses.
    println!("cargo:rustc-link-arg-bins=--strip-debug");
    println!("cargo:rerun-if-changed=link.ld");
}
