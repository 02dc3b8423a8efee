//! The bytes of `getrandom` and of each program's `AT_RANDOM`: a SplitMix64
//! stream whose state is stirred with the clock whenever a program starts.
//!
//! This is **not** a cryptographic generator, and says so: what the
//! programs here need from it is a stack-protector canary and hash seeds
//! that differ between runs, not secrets. A kernel that hands out keys
//! would gather entropy from the hardware (RDSEED, interrupt timing) into a
//! cryptographic generator (Linux's is ChaCha20-based).

use core::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's increment (the golden ratio in 64 bits).
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

static STATE: AtomicU64 = AtomicU64::new(GAMMA);

/// Stirs `value` (a clock reading, say) into the state.
pub fn mix_in(value: u64) {
    STATE.fetch_xor(finalize(value), Ordering::Relaxed);
}

/// SplitMix64's output function: every input bit affects every output bit.
fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `buffer` with the stream's next bytes. Each 8 bytes take one step
/// of the shared state, so concurrent callers never get the same bytes.
pub fn fill(buffer: &mut [u8]) {
    for chunk in buffer.chunks_mut(8) {
        let word = finalize(
            STATE
                .fetch_add(GAMMA, Ordering::Relaxed)
                .wrapping_add(GAMMA),
        );
        chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two fills never repeat each other, a partial word is filled, and
    /// the bytes are not all one value.
    #[test]
    fn fills_differ_and_cover_the_buffer() {
        let (mut first, mut second) = ([0u8; 21], [0u8; 21]);
        fill(&mut first);
        fill(&mut second);
        assert_ne!(first, second);
        assert!(first[16..].iter().any(|&byte| byte != 0));
        assert!(first.iter().any(|&byte| byte != first[0]));
        mix_in(12345);
        let mut third = [0u8; 21];
        fill(&mut third);
        assert_ne!(third, second);
    }
}
