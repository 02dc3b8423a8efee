//! What repeated runs of one configuration add up to: the median and the
//! spread (smallest and largest value).
//!
//! Benchmarks under an emulator on a shared host are noisy, so every table
//! shows the spread next to the median: a difference smaller than the
//! spread is not a difference.

/// The median, minimum and maximum of some values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// How many values.
    pub count: usize,
}

impl Spread {
    /// `None` for no values. NaNs are not expected (every value was parsed
    /// from a number) and sort last.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut values: Vec<f64> = values.into_iter().collect();
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let middle = values.len() / 2;
        let median = if values.len() % 2 == 1 {
            values[middle]
        } else {
            (values[middle - 1] + values[middle]) / 2.0
        };
        Some(Self {
            median,
            min: values[0],
            max: values[values.len() - 1],
            count: values.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Spread;

    #[test]
    fn odd_and_even_counts() {
        let odd = Spread::of([5.0, 1.0, 3.0]).unwrap();
        assert_eq!(
            (odd.median, odd.min, odd.max, odd.count),
            (3.0, 1.0, 5.0, 3)
        );
        let even = Spread::of([4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((even.median, even.min, even.max), (3.0, 1.0, 10.0));
        let one = Spread::of([7.5]).unwrap();
        assert_eq!((one.median, one.min, one.max), (7.5, 7.5, 7.5));
    }

    #[test]
    fn nothing_has_no_spread() {
        assert_eq!(Spread::of([]), None);
    }
}
