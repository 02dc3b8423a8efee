//! What the processor can do for TLB management, decoded from CPUID.
//!
//! Each feature below changes how a kernel keeps TLBs coherent:
//! - **PCID** (CPUID `1:ECX[17]`): TLB entries are tagged with a 12-bit process
//!   context id, so switching CR3 need not flush everything.
//! - **INVPCID** (`7.0:EBX[10]`): invalidate by PCID without loading CR3.
//! - **INVLPGB/TLBSYNC** (`0x8000_0008:EBX[3]`, AMD): invalidate on *every* CPU
//!   with one instruction, no IPIs; `EDX[15:0]` is the largest extra-page count
//!   one INVLPGB accepts. Zen 2 parts report it but must not use it.
//! - **x2APIC** (`1:ECX[21]`): IPIs through MSRs instead of MMIO.
//! - **TCE** (`0x8000_0001:ECX[17]`, AMD): translation cache extension, INVLPG
//!   keeps unrelated page-walk cache entries.
//! - **SMEP/SMAP** (`7.0:EBX[7]`, `EBX[20]`): the kernel may not execute or touch
//!   user pages by accident.
//! - **PGE** (`1:EDX[13]`): global pages, kept across CR3 loads (kernel mappings).
//!
//! The table of bits is hand-written rather than taken from a CPUID crate:
//! each line is a fact about TLBs a reader should see next to its bit.
//! Decoding is pure ([`CpuFeatures::from_cpuid`] takes the instruction as a
//! function), so the rules are host-tested with made-up CPUs.

/// One CPUID answer.
#[derive(Clone, Copy, Default)]
struct Registers {
    eax: u32,
    ebx: u32,
    ecx: u32,
    edx: u32,
}

/// AMD family 19h is Zen 3 and Zen 4; 1Ah is Zen 5. Family 17h (Zen, Zen 2)
/// may report INVLPGB but it is unusable there.
const FIRST_ZEN3_FAMILY: u32 = 0x19;

#[derive(Clone, Debug)]
pub struct CpuFeatures {
    pub vendor: [u8; 12],
    pub brand: [u8; 48],
    pub family: u32,
    pub model: u32,
    pub stepping: u32,
    pub pcid: bool,
    pub invpcid: bool,
    pub global_pages: bool,
    /// INVLPGB as reported by CPUID, with its maximum extra-page count.
    pub invlpgb: Option<u16>,
    pub x2apic: bool,
    pub tce: bool,
    pub smep: bool,
    pub smap: bool,
}

impl CpuFeatures {
    /// Decodes every feature this kernel cares about from `cpuid(leaf,
    /// subleaf)`, which returns EAX, EBX, ECX and EDX: the instruction on
    /// the machine (`hal::cpuid`), made-up answers in tests.
    pub fn from_cpuid(cpuid: impl Fn(u32, u32) -> [u32; 4]) -> Self {
        let cpuid = |leaf, subleaf| {
            let [eax, ebx, ecx, edx] = cpuid(leaf, subleaf);
            Registers { eax, ebx, ecx, edx }
        };
        let leaf0 = cpuid(0, 0);
        let mut vendor = [0; 12];
        vendor[0..4].copy_from_slice(&leaf0.ebx.to_le_bytes());
        vendor[4..8].copy_from_slice(&leaf0.edx.to_le_bytes());
        vendor[8..12].copy_from_slice(&leaf0.ecx.to_le_bytes());

        let leaf1 = cpuid(1, 0);
        let (family, model, stepping) = decode_signature(leaf1.eax);
        let leaf7 = if leaf0.eax >= 7 {
            cpuid(7, 0)
        } else {
            Default::default()
        };

        let max_extended = cpuid(0x8000_0000, 0).eax;
        let extended = |leaf: u32| {
            if max_extended >= leaf {
                cpuid(leaf, 0)
            } else {
                Default::default()
            }
        };
        let ext1 = extended(0x8000_0001);
        let ext8 = extended(0x8000_0008);

        let mut brand = [0; 48];
        if max_extended >= 0x8000_0004 {
            let words = (0x8000_0002..=0x8000_0004).flat_map(|leaf| {
                let regs = cpuid(leaf, 0);
                [regs.eax, regs.ebx, regs.ecx, regs.edx]
            });
            for (bytes, word) in brand.as_chunks_mut::<4>().0.iter_mut().zip(words) {
                *bytes = word.to_le_bytes();
            }
        }

        let bit = |value: u32, index: u32| value & (1 << index) != 0;
        Self {
            vendor,
            brand,
            family,
            model,
            stepping,
            pcid: bit(leaf1.ecx, 17),
            invpcid: bit(leaf7.ebx, 10),
            global_pages: bit(leaf1.edx, 13),
            invlpgb: bit(ext8.ebx, 3).then_some(ext8.edx as u16),
            x2apic: bit(leaf1.ecx, 21),
            tce: bit(ext1.ecx, 17),
            smep: bit(leaf7.ebx, 7),
            smap: bit(leaf7.ebx, 20),
        }
    }

    pub fn vendor_str(&self) -> &str {
        core::str::from_utf8(&self.vendor).unwrap_or("?")
    }

    pub fn brand_str(&self) -> &str {
        let end = self
            .brand
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(self.brand.len());
        core::str::from_utf8(&self.brand[..end])
            .map(str::trim)
            .unwrap_or("?")
    }

    /// Whether INVLPGB may be used: reported by CPUID *and* on Zen 3 or later.
    pub fn invlpgb_usable(&self) -> bool {
        self.invlpgb.is_some()
            && self.vendor_str() == "AuthenticAMD"
            && self.family >= FIRST_ZEN3_FAMILY
    }
}

/// Family, model and stepping from CPUID 1:EAX, with the extended fields
/// folded in as both vendors specify.
fn decode_signature(eax: u32) -> (u32, u32, u32) {
    let stepping = eax & 0xF;
    let base_model = (eax >> 4) & 0xF;
    let base_family = (eax >> 8) & 0xF;
    let extended_model = (eax >> 16) & 0xF;
    let extended_family = (eax >> 20) & 0xFF;
    let family = if base_family == 0xF {
        base_family + extended_family
    } else {
        base_family
    };
    let model = if base_family == 0x6 || base_family == 0xF {
        (extended_model << 4) | base_model
    } else {
        base_model
    };
    (family, model, stepping)
}

#[cfg(test)]
mod tests;
