//! Time as Linux's calls pass it: `struct timespec` and the clocks.

/// Linux's `struct timespec` on x86-64, as `nanosleep` reads it and
/// `clock_gettime` writes it: two little-endian 64-bit words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timespec {
    /// Whole seconds.
    pub seconds: i64,
    /// Nanoseconds, `0..1_000_000_000` in a valid value.
    pub nanoseconds: i64,
}

impl Timespec {
    /// Its size in user memory.
    pub const SIZE: usize = 16;

    /// The time `ns` nanoseconds after the clock's start.
    pub fn from_ns(ns: u64) -> Self {
        Self {
            seconds: (ns / 1_000_000_000) as i64,
            nanoseconds: (ns % 1_000_000_000) as i64,
        }
    }

    /// Nanoseconds, or `None` if this is no valid duration (a negative
    /// part, nanoseconds of a second or more), which Linux refuses with
    /// `EINVAL`. Durations beyond `u64` nanoseconds (584 years) saturate.
    pub fn to_ns(self) -> Option<u64> {
        let seconds = u64::try_from(self.seconds).ok()?;
        let nanoseconds = u64::try_from(self.nanoseconds)
            .ok()
            .filter(|&ns| ns < 1_000_000_000)?;
        Some(
            seconds
                .saturating_mul(1_000_000_000)
                .saturating_add(nanoseconds),
        )
    }

    /// The bytes user memory holds (`const`, so tests can keep fixed
    /// requests in statics).
    pub const fn to_bytes(self) -> [u8; Self::SIZE] {
        let (seconds, nanoseconds) = (self.seconds.to_le_bytes(), self.nanoseconds.to_le_bytes());
        let mut bytes = [0; Self::SIZE];
        let mut i = 0;
        while i < 8 {
            bytes[i] = seconds[i];
            bytes[8 + i] = nanoseconds[i];
            i += 1;
        }
        bytes
    }

    /// The value user memory holds.
    pub fn from_bytes(bytes: [u8; Self::SIZE]) -> Self {
        let word = |at: usize| {
            let mut word = [0; 8];
            word.copy_from_slice(&bytes[at..at + 8]);
            i64::from_le_bytes(word)
        };
        Self {
            seconds: word(0),
            nanoseconds: word(8),
        }
    }
}

/// `clock_gettime`'s clocks (Linux's `CLOCK_*`) that this kernel reads; any
/// other is refused with `EINVAL`.
pub mod clock {
    pub const REALTIME: u64 = 0;
    pub const MONOTONIC: u64 = 1;
    pub const MONOTONIC_RAW: u64 = 4;
    pub const REALTIME_COARSE: u64 = 5;
    pub const MONOTONIC_COARSE: u64 = 6;
    pub const BOOTTIME: u64 = 7;
    /// All of them.
    pub const ALL: [u64; 6] = [
        REALTIME,
        MONOTONIC,
        MONOTONIC_RAW,
        REALTIME_COARSE,
        MONOTONIC_COARSE,
        BOOTTIME,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespecs_convert_and_refuse_what_linux_refuses() {
        let ts = Timespec::from_ns(3_000_000_007);
        assert_eq!((ts.seconds, ts.nanoseconds), (3, 7));
        assert_eq!(Timespec::from_bytes(ts.to_bytes()), ts);
        assert_eq!(ts.to_ns(), Some(3_000_000_007));
        let invalid = [(-1, 0), (0, -1), (0, 1_000_000_000)];
        for (seconds, nanoseconds) in invalid {
            let ts = Timespec {
                seconds,
                nanoseconds,
            };
            assert_eq!(ts.to_ns(), None, "{ts:?}");
        }
        let huge = Timespec {
            seconds: i64::MAX,
            nanoseconds: 0,
        };
        assert_eq!(huge.to_ns(), Some(u64::MAX));
    }
}
