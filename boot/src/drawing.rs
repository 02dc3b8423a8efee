//! What the pictures this crate draws by hand share: the benchmark plots
//! ([`crate::bench`]) and the timeline ([`crate::timeline`]) are SVG text
//! with labels that must be escaped and axes with round ticks.

/// `text` as SVG character data or an attribute value.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round tick step (1, 2, 2.5 or 5 times a power of ten) so that
/// `ticks` steps reach at least `max`.
pub fn tick_step(max: f64, ticks: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / ticks;
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|factor| factor * magnitude)
        .find(|&step| step >= raw)
        .unwrap_or(10.0 * magnitude)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(escape(r#"a<b & "c">"#), "a&lt;b &amp; &quot;c&quot;&gt;");
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(tick_step(1000.0, 5.0), 200.0);
        assert_eq!(tick_step(1100.0, 5.0), 250.0);
        assert_eq!(tick_step(4.2, 5.0), 1.0);
        assert_eq!(tick_step(0.0, 5.0), 1.0);
        assert_eq!(tick_step(37.0, 8.0), 5.0);
        for max in [0.3, 7.0, 99.0, 12_345.0, 1.27e6] {
            assert!(tick_step(max, 8.0) * 8.0 >= max, "{max}");
        }
    }
}
