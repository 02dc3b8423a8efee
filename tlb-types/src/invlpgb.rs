//! INVLPGB's operands (AMD APM vol. 3, "INVLPGB"): what each register bit means.
//!
//! | register | bits | meaning |
//! |---|---|---|
//! | rAX | 63:12 | page-aligned virtual address |
//! | rAX | 0 | VA valid: compare the address |
//! | rAX | 1 | PCID valid: compare the PCID in EDX |
//! | rAX | 2 | ASID valid: compare the (SVM) ASID in EDX |
//! | rAX | 3 | include global translations |
//! | rAX | 4 | final translation only |
//! | rAX | 5 | include nested translations |
//! | ECX | 15:0 | number of pages **in addition to** the first |
//! | ECX | 31 | stride: 0 = 4 KiB pages, 1 = 2 MiB pages |
//! | EDX | 31:16 | PCID |
//! | EDX | 15:0 | ASID (0 = the host) |
//!
//! Which values a flush uses is a decision, `mm::invlpgb`'s; `hal::tlb::invlpgb` puts
//! them in the registers. [`InvlpgbOperands`]'s `Display` reads them back in words, for
//! the trace and for fault reports.

/// rAX bit 0: compare the virtual address.
pub const FLAG_VA: u64 = 1 << 0;
/// rAX bit 1: compare the PCID.
pub const FLAG_PCID: u64 = 1 << 1;
/// rAX bit 2: compare the ASID.
pub const FLAG_ASID: u64 = 1 << 2;
/// rAX bit 3: include global translations.
pub const FLAG_INCLUDE_GLOBAL: u64 = 1 << 3;
/// rAX bit 4: only leaf translations (not used by this kernel).
pub const FLAG_FINAL_ONLY: u64 = 1 << 4;
/// rAX bit 5: include nested translations (not used by this kernel).
pub const FLAG_INCLUDE_NESTED: u64 = 1 << 5;

/// The three register values of one INVLPGB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvlpgbOperands {
    /// rAX: address and flags.
    pub rax: u64,
    /// ECX: stride and extra-page count.
    pub ecx: u32,
    /// EDX: PCID and ASID.
    pub edx: u32,
}

/// ECX bit 31: 2 MiB stride.
pub const ECX_STRIDE_2M: u32 = 1 << 31;
/// rAX bits 11:6: no meaning assigned (the CPU raises #GP if one is set).
pub const RAX_RESERVED: u64 = 0xfc0;
/// ECX bits 30:16: no meaning assigned (#GP too).
pub const ECX_RESERVED: u32 = 0x7fff_0000;

impl core::fmt::Display for InvlpgbOperands {
    /// The registers, then what they ask for in words:
    /// `rax=0x100000001007 ecx=0x2 edx=0x50000: 3 pages of 4 KiB from
    /// 0x100000001000, PCID 5`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "rax={:#x} ecx={:#x} edx={:#x}: ",
            self.rax, self.ecx, self.edx
        )?;
        let pages = (self.ecx & 0xffff) + 1;
        if self.rax & FLAG_VA != 0 {
            let size = if self.ecx & ECX_STRIDE_2M != 0 {
                "2 MiB"
            } else {
                "4 KiB"
            };
            let plural = if pages == 1 { "" } else { "s" };
            write!(
                f,
                "{pages} page{plural} of {size} from {:#x}",
                self.rax & !0xfff
            )?;
        } else {
            f.write_str("every address")?;
        }
        if self.rax & FLAG_PCID != 0 {
            write!(f, ", PCID {}", self.edx >> 16)?;
        } else {
            f.write_str(", every PCID")?;
        }
        if self.rax & FLAG_INCLUDE_GLOBAL != 0 {
            f.write_str(", global entries too")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_read_as_words() {
        let range = InvlpgbOperands {
            rax: 0x1000_0000_1000 | FLAG_VA | FLAG_PCID | FLAG_ASID,
            ecx: 2,
            edx: 5 << 16,
        };
        assert_eq!(
            std::format!("{range}"),
            "rax=0x100000001007 ecx=0x2 edx=0x50000: 3 pages of 4 KiB from 0x100000001000, PCID 5"
        );
        assert_eq!(
            std::format!(
                "{}",
                InvlpgbOperands {
                    rax: 0xffff_8000_0000_0000 | FLAG_VA | FLAG_ASID | FLAG_INCLUDE_GLOBAL,
                    ecx: 0,
                    edx: 0,
                }
            ),
            "rax=0xffff80000000000d ecx=0x0 edx=0x0: 1 page of 4 KiB from 0xffff800000000000, \
             every PCID, global entries too"
        );
        assert_eq!(
            std::format!(
                "{}",
                InvlpgbOperands {
                    rax: FLAG_ASID,
                    ecx: 0,
                    edx: 0
                }
            ),
            "rax=0x4 ecx=0x0 edx=0x0: every address, every PCID"
        );
    }
}
