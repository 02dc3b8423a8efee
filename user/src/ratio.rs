//! Printing "per iteration" and "per loop" numbers without floating point.
//!
//! Benchmarks report counters divided by the work done (IPIs per
//! iteration); [`Ratio`] prints such a quotient with three decimals using
//! integer arithmetic only, rounded to the nearest thousandth.

use core::fmt;

/// `numerator / denominator`, shown as `1.234` (or `none` when the
/// denominator is 0: nothing was measured).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub numerator: u64,
    pub denominator: u64,
}

impl Ratio {
    pub fn new(numerator: u64, denominator: u64) -> Self {
        Self {
            numerator,
            denominator,
        }
    }
}

impl fmt::Display for Ratio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.denominator == 0 {
            return f.write_str("none");
        }
        let denominator = u128::from(self.denominator);
        let thousandths = (u128::from(self.numerator) * 1000 + denominator / 2) / denominator;
        write!(f, "{}.{:03}", thousandths / 1000, thousandths % 1000)
    }
}
