//! Which instructions carry out a local TLB operation on this CPU.
//!
//! The protocol asks for *operations*: drop one page of the running address space, drop a
//! whole PCID, every non-global entry, everything, one page of the kernel, or load an address
//! space with or without a flush. Which x86 instructions do that depends on the CPU's state,
//! and getting it wrong is as much a shootdown bug as skipping an IPI:
//!
//! - with CR4.PCIDE, INVLPG drops the page only for the **current** PCID (and any global
//!   entry for it), and a CR3 load flushes only the PCID it loads;
//! - without CR4.PGE there are no global entries: a kernel page cached by a CPU that was
//!   running PCID 2 survives an INVLPG executed while it runs PCID 3;
//! - INVPCID (when the CPU has it) flushes any PCID without touching CR3; without it, the
//!   only way to flush a PCID that is not loaded, or everything, is to change CR4.PGE, which
//!   flushes every entry of every PCID (the SDM's "MOV to CR4" rule).
//!
//! So the choice is a decision, and it is made here, in [`select`], a pure function the host
//! model runs with its exact tagged TLB. The kernel executes the [`Instruction`] it returns
//! and decides nothing.

use tlb_types::{Instruction, PageTableRoot, Pcid};

use crate::TlbSystem;
use crate::faults::{Fault, Faults};
use crate::hardware::TlbHardware;

/// What the CPU's control registers and CPUID say, as far as local invalidation goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalTlb {
    /// CR4.PCIDE: entries are tagged with CR3's PCID.
    pub pcide: bool,
    /// CR4.PGE: entries of pages mapped global survive CR3 loads, and only INVLPG, INVPCID
    /// type 2, and a change of CR4.PGE drop them. The kernel's own changing mappings (thread
    /// stacks) are mapped global; without PGE they are cached per PCID like any page. With
    /// `pcide` set the CPU is taken to support PGE even when the bit is off (the kernel
    /// enables PCIDs only on such CPUs), so changing CR4.PGE is always possible then.
    pub pge: bool,
    /// The CPU has INVPCID (it is only used with PCIDE on).
    pub invpcid: bool,
}

/// A local TLB operation the protocol asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalOp {
    /// The page containing `va` in the address space loaded now.
    UserPage {
        /// An address in the page.
        va: u64,
    },
    /// Every non-global entry tagged `pcid` (loaded now or not).
    Pcid(Pcid),
    /// Every non-global entry of every PCID.
    AllNonGlobal,
    /// Every entry, global ones included.
    Everything,
    /// The kernel page containing `va`, whatever PCID cached it.
    KernelPage {
        /// An address in the page.
        va: u64,
    },
    /// Load `root` tagged `pcid`.
    Load {
        /// The page-table root.
        root: PageTableRoot,
        /// The PCID of the address space (ignored without PCIDE).
        pcid: Pcid,
        /// Drop what that PCID cached before (always, without PCIDE).
        flush: bool,
    },
}

/// The instruction that carries out `op` on a CPU in state `cpu` (each operation is one
/// instruction on every CPU state). `current_pcid` reads the PCID in CR3; it is called only
/// when the choice depends on it (a PCID flush without INVPCID), so the hot paths (a page of
/// the loaded address space, a load) never pay for the read. `faults` can swap in the
/// deliberate bugs of this decision ([`Fault::EverythingByCr3Reload`],
/// [`Fault::KernelPageByPcidInvpcid`]).
pub fn select(
    op: LocalOp,
    cpu: LocalTlb,
    current_pcid: impl Fn() -> Pcid,
    faults: &Faults,
) -> Instruction {
    use Instruction::*;
    let invpcid = cpu.pcide && cpu.invpcid;
    match op {
        LocalOp::UserPage { va } => Invlpg { va },
        // Without PCIDE every entry is tagged 0: reloading CR3 flushes "the" PCID.
        LocalOp::Pcid(_) if !cpu.pcide => ReloadCr3,
        LocalOp::Pcid(pcid) if invpcid => InvpcidSingle { pcid },
        LocalOp::Pcid(pcid) if pcid == current_pcid() => ReloadCr3,
        // Another PCID and no INVPCID: only flushing everything reaches it.
        LocalOp::Pcid(_) => TogglePge,
        LocalOp::AllNonGlobal if !cpu.pcide => ReloadCr3,
        LocalOp::AllNonGlobal if invpcid => InvpcidAllNonGlobal,
        LocalOp::AllNonGlobal => TogglePge,
        LocalOp::Everything if faults.has(Fault::EverythingByCr3Reload) => ReloadCr3,
        LocalOp::Everything if invpcid => InvpcidAll,
        // One tag and no global entries: a reload drops everything there is.
        LocalOp::Everything if !cpu.pcide && !cpu.pge => ReloadCr3,
        LocalOp::Everything => TogglePge,
        LocalOp::KernelPage { va } if faults.has(Fault::KernelPageByPcidInvpcid) && invpcid => {
            InvpcidAddress {
                pcid: current_pcid(),
                va,
            }
        }
        // A global entry (PGE) or the one tag there is (no PCIDE): INVLPG reaches it.
        LocalOp::KernelPage { va } if cpu.pge || !cpu.pcide => Invlpg { va },
        // Non-global copies may sit under every PCID.
        LocalOp::KernelPage { .. } if invpcid => InvpcidAllNonGlobal,
        LocalOp::KernelPage { .. } => TogglePge,
        LocalOp::Load { root, pcid, flush } if cpu.pcide => LoadCr3 {
            root,
            pcid,
            keep: !flush,
        },
        LocalOp::Load { root, .. } => LoadCr3 {
            root,
            pcid: Pcid::ZERO,
            keep: false,
        },
    }
}

impl TlbSystem<'_> {
    /// Carries out `op` on the calling CPU: chooses its instruction here, from what `hw` says
    /// of this CPU, and hands that to `hw` to execute. The one way `mm` touches a local TLB.
    pub(crate) fn local(&self, hw: &impl TlbHardware, op: LocalOp) {
        debug_assert!(
            !matches!(
                op,
                LocalOp::Load {
                    pcid: Pcid::ZERO,
                    ..
                }
            ),
            "PCID 0 is never used for an address space"
        );
        hw.execute(select(
            op,
            hw.local_tlb(),
            || hw.current_pcid(),
            &self.faults,
        ));
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Every combination of the three state bits.
    fn states() -> impl Iterator<Item = LocalTlb> {
        (0..8).map(|bits| LocalTlb {
            pcide: bits & 1 != 0,
            pge: bits & 2 != 0,
            invpcid: bits & 4 != 0,
        })
    }

    fn chosen(op: LocalOp, cpu: LocalTlb) -> [Instruction; 1] {
        [select(op, cpu, || Pcid::new(3), &Faults::new())]
    }

    #[test]
    fn without_pcids_a_cr3_reload_flushes_every_tag() {
        for cpu in states().filter(|cpu| !cpu.pcide) {
            assert_eq!(
                chosen(LocalOp::Pcid(Pcid::new(7)), cpu),
                [Instruction::ReloadCr3]
            );
            assert_eq!(chosen(LocalOp::AllNonGlobal, cpu), [Instruction::ReloadCr3]);
            assert_eq!(
                chosen(LocalOp::KernelPage { va: 0x5000 }, cpu),
                [Instruction::Invlpg { va: 0x5000 }]
            );
            assert_eq!(
                chosen(
                    LocalOp::Load {
                        root: PageTableRoot::new(0x9000),
                        pcid: Pcid::new(4),
                        flush: false
                    },
                    cpu
                ),
                [Instruction::LoadCr3 {
                    root: PageTableRoot::new(0x9000),
                    pcid: Pcid::ZERO,
                    keep: false
                }]
            );
        }
    }

    #[test]
    fn another_pcid_needs_invpcid_or_a_pge_toggle() {
        let mut cpu = LocalTlb {
            pcide: true,
            pge: true,
            invpcid: false,
        };
        assert_eq!(
            chosen(LocalOp::Pcid(Pcid::new(3)), cpu),
            [Instruction::ReloadCr3]
        );
        assert_eq!(
            chosen(LocalOp::Pcid(Pcid::new(7)), cpu),
            [Instruction::TogglePge]
        );
        cpu.invpcid = true;
        assert_eq!(
            chosen(LocalOp::Pcid(Pcid::new(7)), cpu),
            [Instruction::InvpcidSingle { pcid: Pcid::new(7) }]
        );
    }

    #[test]
    fn kernel_pages_need_pge_for_invlpg_when_pcids_are_on() {
        let page = LocalOp::KernelPage { va: 0x5000 };
        let mut cpu = LocalTlb {
            pcide: true,
            pge: true,
            invpcid: false,
        };
        assert_eq!(chosen(page, cpu), [Instruction::Invlpg { va: 0x5000 }]);
        cpu.pge = false;
        assert_eq!(chosen(page, cpu), [Instruction::TogglePge]);
        cpu.invpcid = true;
        assert_eq!(chosen(page, cpu), [Instruction::InvpcidAllNonGlobal]);
    }

    #[test]
    fn everything_is_a_cr3_load_only_without_pcids_and_global_pages() {
        for cpu in states() {
            let everything = chosen(LocalOp::Everything, cpu);
            let expected = if !cpu.pcide && !cpu.pge {
                [Instruction::ReloadCr3]
            } else if cpu.pcide && cpu.invpcid {
                [Instruction::InvpcidAll]
            } else {
                [Instruction::TogglePge]
            };
            assert_eq!(everything, expected, "{cpu:?}");
        }
    }

    #[test]
    fn loads_keep_entries_only_with_pcids() {
        let load = |flush| LocalOp::Load {
            root: PageTableRoot::new(0x9000),
            pcid: Pcid::new(4),
            flush,
        };
        let cpu = LocalTlb {
            pcide: true,
            pge: true,
            invpcid: true,
        };
        assert_eq!(
            chosen(load(false), cpu),
            [Instruction::LoadCr3 {
                root: PageTableRoot::new(0x9000),
                pcid: Pcid::new(4),
                keep: true
            }]
        );
        assert_eq!(
            chosen(load(true), cpu),
            [Instruction::LoadCr3 {
                root: PageTableRoot::new(0x9000),
                pcid: Pcid::new(4),
                keep: false
            }]
        );
    }

    #[test]
    fn the_deliberate_bugs_change_the_choice() {
        let cpu = LocalTlb {
            pcide: true,
            pge: true,
            invpcid: true,
        };
        let faults = Faults::new();
        faults.set(Fault::EverythingByCr3Reload, true);
        faults.set(Fault::KernelPageByPcidInvpcid, true);
        let pick = |op| [select(op, cpu, || Pcid::new(3), &faults)];
        assert_eq!(pick(LocalOp::Everything), [Instruction::ReloadCr3]);
        assert_eq!(
            pick(LocalOp::KernelPage { va: 0x5000 }),
            [Instruction::InvpcidAddress {
                pcid: Pcid::new(3),
                va: 0x5000
            }]
        );
    }
}
