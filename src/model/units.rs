//! Durations as people read them: one definition of each conversion.

/// Nanoseconds as milliseconds, unrounded: for figures printed with a
/// chosen precision (`{:.1}`) or drawn.
pub fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// Nanoseconds as milliseconds rounded to two decimals (36.79): the
/// figures findings quote in their titles and evidence, so that the text
/// and the JSON say the same number.
pub fn ms_2dp(ns: u64) -> f64 {
    (ns as f64 / 1e4).round() / 100.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn milliseconds() {
        assert_eq!(super::ms(36_789_600), 36.7896);
        assert_eq!(super::ms_2dp(36_789_600), 36.79);
        assert_eq!(super::ms_2dp(4_999), 0.0);
        assert_eq!(super::ms_2dp(5_000), 0.01);
    }
}
