//! # The races, and the loom checks that prove them closed
//!
//! This module has no code: it explains the protocol's seven races, the interleaving that
//! breaks each one, and the loom tests (`mm/tests/loom/`) that check the real code of this
//! crate against every interleaving and every weak-memory reordering the C11 model allows.
//! Random stress on x86 hardly ever finds these bugs (they are store-to-load reorderings
//! inside a window of a few instructions); loom finds each in milliseconds.
//!
//! Run them with
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test -p mm --release --test loom -- --nocapture
//! ```
//!
//! (`--nocapture` prints, per scenario, how many interleavings loom explored and the time.)
//! Every scenario has mutated twins that switch on one deliberate bug (a [`crate::Fault`], or
//! a weakened cross-call handshake) and **must fail**: a mutated twin that passes fails the
//! suite, so the proof cannot silently go stale.
//!
//! ## How a stale translation is detected
//! The tests' [`crate::TlbHardware`] (`tests/loom/machine.rs`) models the hardware around
//! `mm`: per address space, the version of its page tables (a test "unmaps a page" by
//! raising it right before calling the real flush, so version *n* is what generation *n*
//! stands for); per simulated CPU and PCID, the oldest version its TLB may still hold. A CR3
//! load without the flush bit keeps what the PCID holds; a flush refills from the current
//! page tables. After the threads are joined, the oracle demands: no CPU runs an address
//! space on a PCID older than the last flush that *returned*; no global PCID is stale on
//! any CPU; and no ASID slot claims a generation its PCID does not hold (or a later switch
//! would wrongly skip a flush). The handshake scenario adds a second detector: the unmapped
//! page is a loom `UnsafeCell` that CPUs with an old translation read and the flusher
//! frees after its flush returns; if that free is not ordered after every such read, loom
//! reports a causality violation (a use after free through a stale TLB entry).
//!
//! ## 1. Switch versus flush (CVE-2025-40174, CVE-2025-37964)
//! Switcher (`switch_mm`): store `loaded = SWITCHING`, set its bit in the CPU set, **full
//! fence**, read `tlb_gen`, pick the ASID (no flush if its slot is current), load CR3,
//! publish `loaded`. Flusher (`flush_tlb_mm_range`): change the PTEs, bump `tlb_gen`,
//! **full fence**, read the CPU set and each CPU's `loaded`, IPI the targets. This is the
//! Dekker pattern: with both fences at least one side sees the other. Break it and:
//!
//! ```text
//! CPU 1 (switching back to mm, slot at gen 2)   CPU 0 (flusher)
//! loaded = SWITCHING    (sits in store buffer)
//!                                               unmap page; tlb_gen = 3
//!                                               read loaded(1) -> old mm: skip CPU 1
//! read tlb_gen -> 2     (reordered before the   flush returns, page freed
//!                        SWITCHING store)
//! slot is current: load CR3 without flush  ->  CPU 1 uses the freed page's translation
//! ```
//!
//! Tests: `switch_vs_flush_is_safe`; rejected mutations: `SwitchFenceAcqRel` (the switcher's
//! fence is only acquire-release, which never orders a store before a later load: the
//! upstream CVE-2025-40174), `BumpFenceAcqRel` (the flusher's fence likewise; x86 hides this
//! one because its locked increment is a full barrier, C11 does not promise it),
//! `GenerationReadBeforeCpuSet` (the 6.1/6.6/6.12 backports' order), and
//! `SkipSwitchingCpus` (flushers treat SWITCHING as "not running it": CVE-2025-37964).
//! The scenario keeps CPU 1's bit in the CPU set from an earlier run, the upstream case; if
//! the bit had been trimmed, a flush would have moved the generation past CPU 1's slot
//! already and the switch would flush anyway.
//!
//! ## 2. Global-ASID publication
//! Promotion stores `asid_transition = true`, then the global ASID with **release**; every
//! reader loads the ASID with **acquire**. A flusher that sees the ASID broadcasts to the
//! global PCID, which does not reach CPUs still running the address space on a dynamic
//! ASID; it must therefore also see the flag, which makes it finish the transition (IPI
//! the stragglers). With a relaxed publication the flusher can see the ASID but not the
//! flag, skip the stragglers, and return while CPU 1 still runs on a stale dynamic PCID.
//!
//! Test: `publication_is_safe` (CPU 2 promotes while CPU 0 flushes and CPU 1 runs the
//! address space); rejected mutation: `PublishGlobalAsidRelaxed`.
//!
//! ## 3. Transition completion versus a concurrent switch
//! `finish_asid_transition` clears the flag only when no CPU runs the address space on a
//! dynamic ASID. A CPU in the middle of a switch may already have read "no global ASID"
//! (before the promotion) and be about to load its dynamic ASID without a flush. If the
//! finisher treats its `SWITCHING` as "not running it", it clears the flag, and nothing
//! will ever flush that dynamic PCID again:
//!
//! ```text
//! CPU 1 (switching back to mm)                  CPU 0
//! loaded = SWITCHING; fence
//! read tlb_gen -> 2, global ASID -> none
//!                                               promote mm; unmap page; tlb_gen = 3
//!                                               broadcast to the global PCID
//!                                               finish: CPU 1 is SWITCHING, ignore it;
//!                                               clear the flag; return
//! load dynamic ASID without flush (slot at 2)  ->  stale
//! ```
//!
//! The fix (Linux too) is to wait while a CPU is SWITCHING, then look at its ASID. Test:
//! `transition_vs_switch_is_safe`; rejected mutation: `TransitionIgnoresSwitching`.
//!
//! ## 4. Lazy-CPU skipping versus a return from idle
//! Flushers skip lazy CPUs (unless page tables are freed): they catch up by generation
//! when they return. The return path clears `is_lazy`, **full fence**, reads `tlb_gen`; the
//! flusher bumps, **full fence**, reads `is_lazy`. Same Dekker pattern as race 1: without
//! either fence the flusher reads `is_lazy == true` and skips, while the returning CPU
//! reads the old generation, finds its slot current and keeps its stale TLB.
//!
//! Test: `lazy_vs_return_is_safe`; rejected mutations: `SwitchFenceAcqRel`,
//! `BumpFenceAcqRel`.
//!
//! ## 5. Batch add-pending versus batch flush
//! Reclaim clears PTEs and calls `batch_add_pending` (bump the generation, **full fence**,
//! collect the CPU set) and only later `batch_flush`, which skips lazy CPUs and CPUs on the
//! kernel's address space. A CPU that returns from lazy mode between the two must catch up
//! by generation: the bump's fence in `batch_add_pending` pairs with the return path's
//! fence. Test: `batch_vs_return_is_safe`; rejected mutation: `BumpFenceAcqRel`.
//!
//! A CPU that comes back from the kernel's address space is the same race with the
//! SWITCHING marker in it, as in race 1: the batch flush reads `loaded` after its bump, so
//! either it sees SWITCHING (or the address space) and interrupts the CPU, or the CPU reads
//! the bumped generation. Test: `batch_vs_switch_in_is_safe`; rejected mutations:
//! `SkipSwitchingCpus` (a batch that skips SWITCHING CPUs too), `SwitchFenceAcqRel`.
//!
//! ## 6. The IPI completion handshake
//! A flush request returns only when every target has run its handler, because the
//! caller then frees the page. The cross-call protocol is the kernel's, not this crate's,
//! so the tests model it abstractly: the sender sets the targets' bits in a pending set
//! with Release and waits until they are clear, loading with Acquire; each target, when its
//! interrupts are on, runs `handle_flush_ipi` and clears its bit with **Release**. The
//! Release/Acquire pair is what orders the target's last use of the old translation before
//! the caller's free. The scenario has one target (two made loom run for many minutes).
//! Test: `handshake_is_safe`; rejected mutations: the target clears its
//! bit with a relaxed RMW, the caller waits with relaxed loads, the caller does not wait
//! (each reported by loom as a causality violation on the freed page).
//!
//! ## 7. The waiting caller's halt
//! A caller that has spun for its answers a while halts, and the target that answers last
//! wakes it with an IPI of its own (the kernel's `hal::ipi`: a spinning vCPU would hold the
//! host CPU its targets need). The caller stores "halted", fences, and halts only if an
//! answer is still owed; the last target counts its answer, fences, and reads "halted".
//! Without either fence this is the store-buffering pattern: each side reads the other's
//! old value, the caller halts, nobody wakes it, and a shootdown waits for a timer tick (or,
//! with no tick, for ever). The scenario models the halt as waiting for the wake-up alone.
//! Test: `halt_vs_last_answer_is_safe`; rejected mutations: either fence left out (loom
//! finds the caller waiting for ever).
//!
//! ## 8 to 11. The address space's locking (`mm/tests/loom/address_space.rs`)
//! Threads of one process fault and discard pages at once: the kernel's region table is a
//! reader-writer lock, page faults, `madvise(DONTNEED)` and the kernel's copies take it
//! shared and change entries by atomic swap and compare-exchange, and each change drops the
//! lock before its flush (`kernel/src/task/vm/mod.rs`). Four races of that design:
//! * **8. Two discards of one page.** Both swap the entry out; one gets the frame. The one
//!   that got nothing must still flush before it returns: its CPU (or another) may still
//!   hold the translation the winner's flush has not reached, and its thread would read the
//!   old frame, not zeroes, perhaps after the winner freed it. Runs the real flush on the
//!   simulated machine. Test: `two_discards_are_safe`; rejected: the loser returns at once.
//! * **9. A kernel copy into user memory versus a discard.** The kernel writes a system
//!   call's result through its own window on physical memory, which no user TLB flush
//!   covers, so the copy pins the frame (takes a reference) and then checks that the page
//!   still maps it; the discard swaps the entry out, flushes (the generation bump ends with
//!   a SeqCst fence) and releases its reference. Pin-then-check against take-then-release is
//!   the store-buffering pattern, so the copy fences between its two steps as well: loom
//!   found the kernel's copy without that fence (on x86 its locked increment is a full
//!   barrier, in the language's model it is not). Test: `copy_vs_discard_is_safe`;
//!   rejected: no reference, no check after it, no fence between them.
//! * **10. `munmap`'s pruning versus a fault in a neighbouring region** whose entry lives
//!   in the same last-level table. Pruning unlinks a table it found empty, and frees it
//!   after the flush; only the exclusive lock keeps a fault from walking the table as it
//!   goes, or mapping a page in it just before it is unlinked. Test:
//!   `prune_vs_fault_is_safe`; rejected: pruning under the shared lock.
//! * **11. `madvise(PAGEOUT)` versus a fault.** Between taking a page out and recording its
//!   swap slot, its entry is empty though the page has contents; a fault under the shared
//!   lock would take it for a hole and map zeroes. PAGEOUT holds the lock exclusive
//!   throughout. Test: `page_out_vs_fault_is_safe`; rejected: PAGEOUT under the shared
//!   lock ("lost page").
//!
//! Scenarios 9 to 11 need no TLB: they model the kernel's steps on loom atomics, with the
//! kernel's orderings, and loom's reader-writer lock stands in for the kernel's blocking
//! one. They prove the discipline, not the kernel's code line by line; `vmstress`
//! (`tests/vm_concurrency.rs`) runs the code itself, and the lock, on 4 and 8 CPUs.
//!
//! ## Limits of the proof
//! * Scenarios are small (two or three CPUs, one flush) and explored under a **preemption
//!   bound** (3, or 2 where noted): loom tries every interleaving with at most that many
//!   involuntary switches, and every value each load may return. Bugs needing more
//!   preemptions are out of reach; the races above need one or two.
//! * loom treats SeqCst *accesses* as acquire-release (it may report false alarms, never
//!   hide a bug); SeqCst *fences*, which this protocol relies on, are modelled exactly.
//!   loom does not explore load buffering (C11 allows it, x86 does not).
//! * loom's partial-order reduction remembers only the last access to each atomic, so a
//!   thread's own load can hide another's racing load. Each racing thread therefore starts
//!   with a relaxed RMW on a shared harness atomic, so loom also tries running it before
//!   the others' accesses (without that, race 2 was never explored).
//! * Page walks are modelled as sequentially consistent and INVLPGB as instantaneous on
//!   every CPU; the protocol's own atomics run on the weak model.
//!
//! ## Interleavings explored (2 shared cores, `--release`, whole suite about 15 s)
//! | scenario | test | bound | interleavings | time |
//! |---|---|---|---|---|
//! | 1 switch vs flush | `switch_vs_flush_is_safe` | 3 | 461 | 0.1 s |
//! | 2 global-ASID publication | `publication_is_safe` | 3 | 17 170 | 4 to 8 s |
//! | 3 transition vs switch | `transition_vs_switch_is_safe` | 2 | 322 | 0.1 s |
//! | 4 lazy vs return | `lazy_vs_return_is_safe` | 3 | 120 | 0.02 s |
//! | 5 batch vs return | `batch_vs_return_is_safe` | 3 | 120 | 0.04 s |
//! | 5 batch vs switch-in | `batch_vs_switch_in_is_safe` | 3 | 461 | 0.05 s |
//! | 6 IPI handshake | `handshake_is_safe` | 3 | 101 | 0.02 s |
//! | 7 halting caller | `halt_vs_last_answer_is_safe` | 3 | 71 | 0.02 s |
//! | 8 two discards | `two_discards_are_safe` | 3 | 4 259 | 0.7 s |
//! | 9 kernel copy vs discard | `copy_vs_discard_is_safe` | 3 | 59 | 0.002 s |
//! | 10 prune vs fault | `prune_vs_fault_is_safe` | 3 | 5 | 0.0003 s |
//! | 11 PAGEOUT vs fault | `page_out_vs_fault_is_safe` | 3 | 5 | 0.0003 s |
//!
//! The mutated twins and the interleaving at which loom rejects each: switch vs flush:
//! `SwitchFenceAcqRel` 6, `BumpFenceAcqRel` 6, `GenerationReadBeforeCpuSet` 1,
//! `SkipSwitchingCpus` 173; publication: `PublishGlobalAsidRelaxed` about 14 800 (6 s);
//! transition: `TransitionIgnoresSwitching` 243; lazy: `SwitchFenceAcqRel` 6,
//! `BumpFenceAcqRel` 6; batch: `BumpFenceAcqRel` 6; batch vs switch-in:
//! `SkipSwitchingCpus` 173, `SwitchFenceAcqRel` 6; handshake: relaxed ack, relaxed wait
//! and no wait all at the first; halting caller: either fence left out, at the first. Two
//! discards: the loser that returns at once, at the first; kernel copy: no reference, no
//! check, no fence, each at the first; prune under the shared lock, at the second; PAGEOUT
//! under the shared lock, at the ninth. Scenario 2 also passes without any preemption bound
//! (1 233 206 interleavings, 211 s), too slow for every CI run; scenario 3 at bound 3 did
//! not finish within ten minutes (its SWITCHING wait is a spin loop).
