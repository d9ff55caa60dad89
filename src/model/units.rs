//! Figures as people read them (durations, shares, runs of numbers): one
//! definition of each conversion.

/// Sorted numbers with consecutive ones as ranges: [0, 1, 3] → `0-1`, `3`
/// (the kernel's CPU lists, thread ids).
pub fn ranges(sorted: &[u64]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        out.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    out
}

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

/// `part` in percent of `whole`, to one decimal (0 of nothing is 0).
pub fn percent_1dp(part: u64, whole: u64) -> f64 {
    (part as f64 * 1000.0 / whole.max(1) as f64).round() / 10.0
}

/// A percentage as a share of `whole` ("25% of the trace"), or, past
/// 100 % (a sum over several threads, or parts of different
/// populations), as the ratio it is ("1.55x the trace"): a percentage
/// a user reads is never above 100.
pub fn share_of(percent: f64, decimals: usize, whole: &str) -> String {
    if percent <= 100.0 {
        format!("{percent:.decimals$}% of {whole}")
    } else {
        format!("{:.2}x {whole}", percent / 100.0)
    }
}

/// A relative change (`+40%`, `-50%`), or past +100 % the ratio of the new
/// value to the old (`+6300%` is `64.00x`).
pub fn change(percent: f64) -> String {
    if percent > 100.0 {
        format!("{:.2}x", 1.0 + percent / 100.0)
    } else {
        format!("{percent:+.0}%")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn changes_above_100_percent_are_ratios() {
        assert_eq!(super::change(40.0), "+40%");
        assert_eq!(super::change(-50.0), "-50%");
        assert_eq!(super::change(100.0), "+100%");
        assert_eq!(super::change(6300.0), "64.00x");
    }

    #[test]
    fn shares_above_a_whole_are_ratios() {
        assert_eq!(super::share_of(25.04, 1, "the trace"), "25.0% of the trace");
        assert_eq!(super::share_of(100.0, 0, "the trace"), "100% of the trace");
        assert_eq!(super::share_of(155.2, 0, "the trace"), "1.55x the trace");
    }

    #[test]
    fn milliseconds() {
        assert_eq!(super::ms(36_789_600), 36.7896);
        assert_eq!(super::ms_2dp(36_789_600), 36.79);
        assert_eq!(super::ms_2dp(4_999), 0.0);
        assert_eq!(super::ms_2dp(5_000), 0.01);
    }
}
