//! # `mm`: every decision about TLBs, none of the instructions
//!
//! This crate is the heart of a teaching kernel about **TLB shootdown**: making sure that once
//! a page is unmapped (or its protection reduced), no CPU can still use a cached translation
//! of it. The kernel owns the instructions (INVLPG, CR3 loads, IPIs, INVLPGB); this crate owns
//! the *protocol* and runs unchanged in the kernel and in host tests. Keeping the two apart is
//! what lets every decision be tested on the host, against a simulated TLB
//! (`tests/model/`) and under every interleaving loom can find ([`races`]), without the
//! hardware the decisions are for.
//!
//! ## A shootdown, from system call to IPI
//!
//! A thread on CPU 0 unmaps a page while two other threads of its process run on CPUs 1
//! and 2:
//!
//! ```text
//!  CPU 0 (munmap)                                      CPU 1, CPU 2
//!  kernel: clear the page-table entry
//!  TlbSystem::flush_tlb_mm_range(mm, range)
//!    1. bump mm's flush generation, full fence
//!    2. more than 33 pages? flush the whole space
//!    3. global ASID?      -> broadcast (INVLPGB), done
//!       other CPUs in the set? -> pick the targets
//!    4. TlbHardware::send_flush_ipis  --- IPI --->    TlbSystem::handle_flush_ipi
//!       (handler runs locally too)                      partial flush if exactly one
//!       wait for every target          <--- done ---    generation behind, else full
//!  kernel: free the frame
//! ```
//!
//! 1. The kernel changes the page tables, then calls [`TlbSystem::flush_tlb_mm_range`] with
//!    the address space's [`AddressSpaceTlb`]. The call **bumps the flush generation**
//!    ([`AddressSpaceTlb::tlb_gen`]), the number that lets any CPU not interrupted now catch
//!    up later, when it next runs the address space.
//! 2. A range of more than [`TlbConfig::flush_ceiling`] pages (33) becomes a full flush.
//! 3. An address space **promoted** to a global ASID (it ran on
//!    [`TlbConfig::promotion_threshold`] CPUs at once) is flushed by one broadcast through
//!    the [`BroadcastBackend`], which reaches every CPU without interrupting it. Otherwise
//!    the CPUs in its CPU set ([`AddressSpaceTlb::cpus`]) are filtered by
//!    [`TlbSystem::should_flush`]: running it, or in the middle of switching to it, but not
//!    lazy (an idle CPU that still has it loaded), unless page tables are being freed.
//! 4. The targets get an IPI through [`TlbHardware::send_flush_ipis`] and run
//!    [`TlbSystem::handle_flush_ipi`]. Each flushes page by page only if this request is the
//!    one change between what it has applied and the current generation; otherwise it
//!    flushes the whole PCID. With one CPU, or a single-threaded process, there is nobody to
//!    interrupt and the flush stays local.
//! 5. The call returns once every target is done; only then may the kernel free the frame.
//!
//! The other half is the context switch, [`TlbSystem::switch_mm`]: it picks the ASID (one of
//! six per-CPU slots, or the global ASID) and decides whether loading CR3 must flush, by
//! comparing generations. [`TlbSystem::enter_lazy`] is what an idle CPU does instead.
//! Reclaim collects many unmaps into one [`FlushBatch`] and flushes once.
//!
//! ## Where this crate sits
//!
//! ```text
//!   kernel ──► mm ──► tlb-types ◄── hal ◄── kernel
//! ```
//!
//! The kernel asks `mm` what to do and tells `hal` to do it. `mm` and `hal` never meet, but
//! they speak the same words, defined once in `tlb_types`: the [`CpuSet`] of a flush's
//! targets (which `hal::ipi::call_on` takes as it is), the [`Pcid`], the [`PageTableRoot`]
//! of an address space (which `hal::page_table` hands out), the local flush
//! [`Instruction`] that [`instructions::select`] chooses and `hal::tlb::execute` runs, and
//! the `tlb_types::InvlpgbOperands` that [`invlpgb`] encodes and `hal::tlb::invlpgb` puts in
//! the registers. So a local flush crosses the line once each way: `mm` chooses the
//! instruction and hands it to [`TlbHardware::execute`], whose kernel implementation passes
//! it to `hal` unchanged.
//!
//! ## The moving parts (one file each)
//! | file | concept |
//! |---|---|
//! | `sync.rs` | where atomics and locks come from (switchable to `loom`) |
//! | `cpu_set.rs` | [`AtomicCpuSet`]: which CPUs may hold an address space (the plain [`CpuSet`] is `tlb_types`') |
//! | `asid.rs` | [`Asid`]: dynamic and global ASIDs, PCID = ASID + 1 |
//! | `asid_alloc.rs` | [`GlobalAsidAllocator`]: used/freed bitmaps, rollover |
//! | `context.rs` | [`AddressSpaceTlb`]: id, flush generation, CPU set, global ASID |
//! | `percpu.rs` | [`CpuTlbState`]: loaded context, lazy flag, six ASID slots |
//! | `hardware.rs` | [`TlbHardware`], [`BroadcastBackend`], [`FlushRequest`] |
//! | `instructions.rs` | [`instructions::select`]: which instruction carries out a local flush on this CPU's state |
//! | `system.rs` | [`TlbSystem`], [`TlbConfig`] |
//! | `switch.rs` | [`TlbSystem::switch_mm`], ASID choice, [`TlbSystem::enter_lazy`] |
//! | `flush.rs` | [`TlbSystem::flush_tlb_mm_range`], [`TlbSystem::should_flush`], [`TlbSystem::flush_kernel_range`] |
//! | `flush_handler.rs` | [`TlbSystem::handle_flush_ipi`]: the per-CPU handler's steps and the `local + 1` rule |
//! | `global_asid.rs` | promotion ([`TlbSystem::use_global_asid`]), ASID transition, broadcast flushes, [`TlbSystem::handle_broadcast_ipi`] |
//! | `batch.rs` | [`FlushBatch`]: deferred reclaim flushes |
//! | `invlpgb.rs` | [`invlpgb`]: INVLPGB operand encoding and range chunking |
//! | `counters.rs` | [`Counters`] and [`TraceEvent`] |
//! | `faults.rs` | [`Fault`]: deliberate bugs that the tests must catch |
//! | `races.rs` | the protocol's races in prose, and the loom checks ([`races`]) |
//!
//! The module files explain the *why* of each part at length. They are private modules, so
//! their documentation appears with `cargo doc -p mm --no-deps --document-private-items`, or
//! in the source. The teaching text that ties them to the kernel and to runnable demos is the
//! book in the repository's `docs/` directory (`docs/README.md`).
//!
//! ## The invariants
//! 1. **Generation.** Every address space has a flush generation `tlb_gen`; every change
//!    that needs a flush increments it *after* changing the page tables. Every CPU remembers,
//!    per ASID slot, the generation its TLB is current with, and never holds entries staler
//!    than that. Whoever is not flushed now (not running it, lazy, switching away) catches up
//!    by comparing generations when it next runs the address space.
//! 2. **CPU set.** An address space's CPU set is a superset of the CPUs that may hold its
//!    translations. A CPU adds itself *before* reading the generation at switch-in, and
//!    removes itself only when a flush reaches it after it switched away.
//! 3. **Dekker.** Flusher: *bump generation; full fence; read CPU set and each CPU's loaded
//!    context*. Switcher: *publish SWITCHING and set its bit; full fence; read generation*.
//!    At least one side sees the other, so a switching CPU is either interrupted or flushes
//!    itself. Linux shipped two CVEs in 2025 for breaking exactly this (see [`races`]).
//! 4. **Partial only when exact.** A CPU applies a per-page flush only when that request is
//!    the one change between its generation and the current one (`new == local + 1 ==
//!    current`); otherwise it flushes the whole PCID.
//! 5. **Global ASIDs are always current.** An address space with a global ASID is flushed by
//!    broadcast on every CPU, whether running it or not, so switching to it never flushes.
//!    Its PCID is never reused for another address space before a rollover flush.
//! 6. **Transition.** Anyone who sees a global ASID also sees the transition flag (release /
//!    acquire), and the flag is cleared only when no CPU runs the address space on a dynamic
//!    ASID.
//!
//! ## What the kernel does
//! * At boot: allocate one [`CpuTlbState`] per possible CPU (a leaked `Vec` is fine), create
//!   the [`TlbSystem`] with the kernel page-table root and a [`TlbConfig`] from the command
//!   line, and call [`TlbSystem::init_cpu`] on each CPU as it comes up (interrupts off,
//!   before it is marked online). Choose the broadcast backend once, at boot: hardware
//!   INVLPGB only with PCIDs on (a PCID-tagged INVLPGB with PCIDE off raises #GP), the
//!   software backend in any mode, or none.
//! * Per process: [`TlbSystem::new_address_space`] with its page-table root, kept inside the
//!   process. Before dropping it, once no CPU has it loaded, *lazily included*,
//!   [`TlbSystem::release_address_space`]. The simple way: each CPU holds a reference to
//!   the process whose address space it last switched to and drops it at its next switch.
//! * Context switch (interrupts off): to a user thread, [`TlbSystem::switch_mm`] (also when
//!   returning from a kernel thread to the same process); to a kernel thread or idle,
//!   [`TlbSystem::enter_lazy`] instead.
//! * After changing page tables (preemption off, **interrupts on**):
//!   [`TlbSystem::flush_tlb_mm_range`] (`freed_tables` if page-table pages are going away),
//!   [`TlbSystem::flush_kernel_range`], or for reclaim [`TlbSystem::batch_add_pending`] per
//!   address space, then one [`TlbSystem::batch_flush`]. Free page-table pages and frames
//!   only after these return.
//! * Flush IPI handler (interrupts off): [`TlbSystem::handle_flush_ipi`] with the request the
//!   sender passed to [`TlbHardware::send_flush_ipis`], then acknowledge; a software
//!   broadcast backend's IPI handler: [`TlbSystem::handle_broadcast_ipi`].
//! * Statistics: [`CpuTlbState::counters`] per CPU or [`TlbSystem::total_counters`]; a
//!   [`CounterSnapshot`] prints as one `key=value` line. Trace: [`TlbHardware::trace`].

//! ## Reference checklist (linux-tlb-shootdown.md §8) → tests
//! Unit tests live in `src/tests/` (several CPUs driven from one thread through a recording
//! fake of the hardware, so every decision is checked exactly) and next to each module; the
//! host TLB model is `tests/model/` (concurrent, seeded, with an oracle).
//!
//! | item | test |
//! |---|---|
//! | 1 PCID mapping | `asid::tests::pcid_mapping_table`, `every_asid_maps_to_a_valid_nonzero_pcid`; the model asserts no CR3 load uses PCID 0 |
//! | 2 ASID budget | `asid_alloc::tests::full_space_count_is_exact_and_in_range` |
//! | 3 slot cache | `tests::switching::seven_address_spaces_round_robin`, `cached_slot_flushes_only_when_generation_moved` |
//! | 4 generation / `local + 1` | `tests::flushing::reversed_flushes_force_a_full_flush`, `partial_flush_when_exactly_one_behind`; model `mutation_partial_flush_without_generation_check` |
//! | 5 barriers and SWITCHING | `tests::flushing::switching_cpu_is_interrupted`; model `mutation_generation_read_before_cpu_set`, `mutation_skip_switching_cpu`; loom `switch_vs_flush_*`, `lazy_vs_return_*`, `batch_vs_return_*` ([`races`]) |
//! | 6 target test | `tests::flushing::target_test_every_state` |
//! | 7 lazy CPUs | `tests::switching::lazy_cpu_catches_up_on_return`, `tests::flushing::freed_tables_reach_lazy_cpus`; model `mutation_skip_lazy_when_freeing_tables` |
//! | 8 trimming | `tests::flushing::trim_removes_cpus_that_left` |
//! | 9 ceiling | `tests::flushing::ceiling_turns_34_pages_into_a_full_flush` |
//! | 10 encoding | `invlpgb::tests::golden_encodings`; the model decodes every operand it is given |
//! | 11 clamping | `invlpgb::tests::fuzzed_chunking_is_exact_and_clamped`, `limits_from_cpuid`; the model asserts the count limit |
//! | 12 TLBSYNC on the issuing CPU | model `mutation_tlbsync_on_other_cpu` (the kernel must not migrate in between) |
//! | 13 kernel flushes | `tests::flushing::kernel_range_flushes`, `flush_all_reaches_everyone` |
//! | 14 promotion | `tests::global::promotion_needs_threshold_cpus_and_respects_rate_limit`, `threshold_is_configurable_but_never_below_two`, `no_promotion_without_a_broadcast_backend` |
//! | 15 publication | `tests::global::promotion_publishes_flag_with_asid`; loom `publication_*` |
//! | 16 no-flush switch to global | `tests::global::stragglers_move_over_without_flush`, `transition_finishes_only_when_all_moved` |
//! | 17 transition completion | `tests::global::transition_finishes_only_when_all_moved`, `lazy_stragglers_are_reached_during_transition`; model `mutation_no_ipi_during_transition`; loom `transition_vs_switch_*` |
//! | 18 deferred reuse | `asid_alloc::tests::freed_asid_reused_only_after_rollover`, `tests::global::rollover_flushes_before_reuse`; model `mutation_reuse_global_asid_before_rollover` |
//! | 19 allocator | `asid_alloc::tests::randomized_against_reference_model` |
//! | 20 batching | `tests::batching::*` |
//! | 22 freed page tables | `tests::flushing::freed_tables_reach_lazy_cpus`; the model never uses FINAL_ONLY (asserted) |
//!
//! Items 21 and 23–26 concern the kernel (feature detection, PTI, `flush_tlb_batched_pending`,
//! benchmarks) or other architectures.
//!
//! ## Running the host model
//! `cargo test -p mm` runs it with about 10^6 simulated operations over all backends, plus
//! the mutation checks. `MM_MODEL_SCALE=50` runs fifty times as many seeds;
//! `MM_MODEL_SEED=<n>` replays one seed (every failure prints its seed).
//!
//! ## Running the loom checks
//! `RUSTFLAGS="--cfg loom" cargo test -p mm --release --test loom` explores every
//! interleaving and weak-memory reordering of six small race scenarios on the real code,
//! and proves that each scenario's mutated twins are rejected; [`races`] explains the races
//! and lists the tests.

#![no_std]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(test)]
extern crate std;

mod asid;
mod asid_alloc;
mod batch;
mod context;
mod counters;
mod cpu_set;
mod faults;
mod flush;
mod flush_handler;
mod global_asid;
mod hardware;
pub mod instructions;
pub mod invlpgb;
mod percpu;
pub mod races;
mod switch;
mod sync;
mod system;

#[cfg(all(test, not(loom)))]
mod tests;

pub use asid::{Asid, DYN_ASIDS, FIRST_GLOBAL_ASID, GLOBAL_ASID_COUNT, MAX_ASID_AVAILABLE};
pub use asid_alloc::GlobalAsidAllocator;
pub use batch::FlushBatch;
pub use context::{AddressSpaceTlb, CTX_KERNEL, CTX_NONE, CTX_SWITCHING};
pub use counters::{CounterSnapshot, Counters, TraceEvent, TraceReason};
pub use cpu_set::AtomicCpuSet;
pub use faults::{Fault, Faults};
pub use flush::PAGE_SHIFT;
pub use hardware::{
    BroadcastBackend, BroadcastOp, FlushRange, FlushRequest, FlushTarget, NoBroadcast, TlbHardware,
};
pub use percpu::CpuTlbState;
pub use system::{TlbConfig, TlbSystem};

/// Installs the host model's scheduling hook (feature `model-hooks`, tests only).
#[cfg(all(feature = "model-hooks", not(loom)))]
#[doc(hidden)]
pub use sync::set_schedule_hook;

/// The words `mm` shares with the hardware layer, defined once in `tlb_types` and
/// re-exported so that `mm`'s API reads whole: its functions take and return these.
pub use tlb_types::{
    CpuId, CpuSet, CpuSetIter, Instruction, MAX_CPUS, PCID_BITS, PageTableRoot, Pcid,
};
