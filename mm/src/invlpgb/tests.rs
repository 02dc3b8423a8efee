//! Golden tests of the INVLPGB encoders, chunking, sequences and refusals.

use std::vec::Vec;

use tlb_types::invlpgb::FLAG_FINAL_ONLY;

use super::*;

/// Checklist item 10: golden values for each wrapper, against the APM layout above.
#[test]
fn golden_encodings() {
    let cases = [
        // user range: VA|PCID|ASID, 3 pages => 2 extra, PCID 7 in EDX[31:16]
        (
            user_range(Pcid::new(7), 0x7fff_0000_0000, 3, false),
            0x7fff_0000_0007,
            0x0000_0002,
            0x0007_0000,
        ),
        // user range, 2 MiB stride, one page
        (
            user_range(Pcid::new(0x0ffe), 0x4000_0000, 1, true),
            0x4000_0006 | 1,
            0x8000_0000,
            0x0ffe_0000,
        ),
        // single PCID: PCID|ASID, no VA
        (single_pcid(Pcid::new(42)), 0x6, 0, 42 << 16),
        // kernel range: VA|GLOBAL|ASID (VA set: the upstream slip avoided)
        (
            kernel_range(0xffff_8000_0010_0000, 33),
            0xffff_8000_0010_000d,
            32,
            0,
        ),
        // everything including globals
        (all_including_global(), 0xc, 0, 0),
        // every non-global entry: only ASID-valid
        (all_nonglobals(), 0x4, 0, 0),
    ];
    for (i, (ops, rax, ecx, edx)) in cases.into_iter().enumerate() {
        assert_eq!(ops, InvlpgbOperands { rax, ecx, edx }, "case {i}");
        assert_ne!(ops.rax & FLAG_ASID, 0, "case {i}: ASID-valid always set");
        assert_eq!(ops.rax & FLAG_FINAL_ONLY, 0, "case {i}: never FINAL_ONLY");
        assert_eq!(ops.edx & 0xffff, 0, "case {i}: host ASID 0");
    }
}

#[test]
#[should_panic(expected = "not page aligned")]
fn unaligned_address_rejected() {
    user_range(Pcid::new(1), 0x1001, 1, false);
}

#[test]
fn limits_from_cpuid() {
    assert_eq!(
        InvlpgbLimits::default().max_pages(),
        1,
        "safe before detection"
    );
    assert_eq!(InvlpgbLimits::from_cpuid_edx(0).max_pages(), 1);
    assert_eq!(InvlpgbLimits::from_cpuid_edx(0x0007).max_pages(), 8);
    assert_eq!(
        InvlpgbLimits::from_cpuid_edx(0xabcd_ffff).max_pages(),
        0x1_0000
    );
}

#[test]
fn chunking_examples() {
    let l8 = InvlpgbLimits::from_cpuid_edx(7);
    let c: Vec<_> = range_chunks(0x1000, 0x1000 + 20 * 4096, 12, l8).collect();
    assert_eq!(c.iter().map(|c| c.pages).collect::<Vec<_>>(), [8, 8, 4]);
    assert_eq!(c[1].addr, 0x1000 + 8 * 4096);
    // 2 MiB stride crossing nothing special
    let c: Vec<_> = range_chunks(0x20_0000, 0x20_0000 * 4, 21, l8).collect();
    assert_eq!(
        c,
        [Chunk {
            addr: 0x20_0000,
            pages: 3,
            stride_2m: true
        }]
    );
    // 1 GiB pages: one single-page op per unit
    let c: Vec<_> = range_chunks(0x4000_0000, 0x4000_0000 * 3, 30, l8).collect();
    assert_eq!(c.len(), 2);
    assert!(c.iter().all(|c| c.pages == 1 && !c.stride_2m));
    // Before detection: one page each
    assert_eq!(
        range_chunks(0, 5 * 4096, 12, InvlpgbLimits::default()).count(),
        5
    );
    // Across the hole: stops at the lower-half end, resumes in the higher half
    let c: Vec<_> =
        range_chunks(LOWER_HALF_END - 2 * 4096, HIGHER_HALF_START + 4096, 12, l8).collect();
    assert_eq!(
        c,
        [
            Chunk {
                addr: LOWER_HALF_END - 2 * 4096,
                pages: 2,
                stride_2m: false
            },
            Chunk {
                addr: HIGHER_HALF_START,
                pages: 1,
                stride_2m: false
            },
        ]
    );
}

/// Checklist item 11: fuzzed splitter. Every chunk within the limit, canonical, and the
/// chunks cover exactly the canonical units of the range, in order.
#[test]
fn fuzzed_chunking_is_exact_and_clamped() {
    let mut x = 0x1234_5678_9abc_def1u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..3000 {
        let shift = [12u8, 21, 30][(next() % 3) as usize];
        let unit = 1u64 << shift;
        let limits = InvlpgbLimits::from_cpuid_edx((next() % 12) as u32);
        let base = match next() % 3 {
            0 => (next() % (1 << 30)) << 12,
            1 => LOWER_HALF_END - ((next() % 64) << shift),
            _ => HIGHER_HALF_START + ((next() % (1 << 20)) << 12),
        };
        let start = base & !(unit - 1);
        let units = next() % 80 + 1;
        let end = start.saturating_add(units * unit);
        let mut expect = start;
        for c in range_chunks(start, end, shift, limits) {
            if (LOWER_HALF_END..HIGHER_HALF_START).contains(&expect) {
                expect = HIGHER_HALF_START.max(expect);
            }
            assert_eq!(c.addr, expect);
            assert!(c.pages >= 1 && c.pages <= limits.max_pages());
            let last = c.addr + (u64::from(c.pages) << shift) - 1;
            let canonical = |a: u64| !(LOWER_HALF_END..HIGHER_HALF_START).contains(&a);
            assert!(
                canonical(c.addr) && canonical(last),
                "chunk {c:?} crosses the hole"
            );
            assert!(c.addr < LOWER_HALF_END || c.addr >= HIGHER_HALF_START);
            assert_eq!(
                c.addr < LOWER_HALF_END,
                last < LOWER_HALF_END,
                "chunk {c:?} spans halves"
            );
            assert_eq!(c.stride_2m, shift == 21);
            if shift > 21 {
                assert_eq!(c.pages, 1);
            }
            expect = c.addr.saturating_add(u64::from(c.pages) << shift);
            let _ = encode(
                c.addr,
                FLAG_VA | FLAG_PCID,
                c.pages,
                c.stride_2m,
                Pcid::new(1),
            );
        }
        if end <= LOWER_HALF_END || end > HIGHER_HALF_START {
            assert!(expect >= end, "range {start:#x}..{end:#x} not covered");
        } else {
            assert!(expect >= LOWER_HALF_END.min(end), "lower part not covered");
        }
    }
}

#[test]
fn refusals_follow_the_manual() {
    let limits = InvlpgbLimits::from_cpuid_edx(7);
    let legal = user_range(Pcid::new(5), 0x4000_0000, 8, false);
    assert_eq!(refusal(&legal, limits, true), None);
    let too_many = user_range(Pcid::new(5), 0x4000_0000, 9, false);
    assert!(
        refusal(&too_many, limits, true)
            .unwrap()
            .contains("page count")
    );
    assert!(refusal(&legal, limits, false).unwrap().contains("PCID"));
    assert_eq!(
        refusal(
            &user_range(Pcid::new(0), 0x4000_0000, 1, false),
            limits,
            false
        ),
        None
    );
    let reserved = InvlpgbOperands {
        rax: legal.rax | 1 << 6,
        ..legal
    };
    assert!(
        refusal(&reserved, limits, true)
            .unwrap()
            .contains("reserved")
    );
    let across_the_hole = user_range(Pcid::new(5), LOWER_HALF_END - 0x1000, 2, false);
    assert!(
        refusal(&across_the_hole, limits, true)
            .unwrap()
            .contains("canonical")
    );
    assert_eq!(
        refusal(
            &user_range(Pcid::new(5), LOWER_HALF_END - 0x1000, 1, false),
            limits,
            true
        ),
        None
    );
}
