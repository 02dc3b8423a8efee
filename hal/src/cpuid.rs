//! The CPUID instruction.
//!
//! CPUID is the only way the kernel learns what the processor can do: whether
//! it tags TLB entries with PCIDs, whether it has INVPCID, and whether it can
//! broadcast invalidations with INVLPGB. Decoding those bits is the job of
//! the kernel (its `cpu_features` module); this module only executes the instruction.

/// The four registers CPUID returns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuidResult {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
}

/// Executes CPUID for `leaf` and `subleaf`.
pub fn cpuid(leaf: u32, subleaf: u32) -> CpuidResult {
    let raw = core::arch::x86_64::__cpuid_count(leaf, subleaf);
    CpuidResult {
        eax: raw.eax,
        ebx: raw.ebx,
        ecx: raw.ecx,
        edx: raw.edx,
    }
}
