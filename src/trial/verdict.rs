//! Whether the candidate rounds beat the baseline rounds: the medians, the
//! change with a bootstrap confidence interval, and how many paired rounds
//! agree. A change is believed only when its interval excludes zero.

use serde::{Deserialize, Serialize};

/// Bootstrap resamples: enough for stable 2.5/97.5 percentiles (the
/// interval's ends move by well under a point between seeds at 5 rounds).
const RESAMPLES: usize = 4000;
/// Pairs of rounds (baseline i, candidate i) at least, for the interval to
/// resample pairs rather than each side on its own.
const MIN_PAIRS: usize = 3;
/// A change whose whole interval lies within this many percent of zero is
/// "no change" (not better); a wider interval across zero is inconclusive:
/// the noise is larger than any change it could hide.
pub const NO_CHANGE_PERCENT: f64 = 3.0;

/// One figure's comparison (read back from try's JSON by the lab).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Change {
    pub metric: String,
    pub baseline_median: f64,
    pub candidate_median: f64,
    /// (candidate / baseline − 1) × 100 of the medians.
    pub change_percent: f64,
    /// The change's 95 % interval (bootstrap of the medians' ratio,
    /// resampling pairs of rounds when at least 3 pairs have the figure).
    pub ci95_percent: [f64; 2],
    /// Paired rounds (baseline i, candidate i) where the candidate was
    /// better, of `pairs`.
    pub rounds_better: usize,
    pub pairs: usize,
    pub lower_is_better: bool,
    pub outcome: Outcome,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Better,
    Worse,
    NoChange,
    Inconclusive,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Better => "better",
            Outcome::Worse => "worse",
            Outcome::NoChange => "no change",
            Outcome::Inconclusive => "inconclusive",
        }
    }
}

pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return f64::NAN;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// xorshift64*: a fixed seed, so one set of rounds always gives one
/// interval (a rerun of the report must not move it).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

/// Compares `candidate` with `baseline`: each side's values in round
/// order, `None` where a round lacks the figure. The medians and the
/// interval take the values there are; a pair is a baseline round and the
/// candidate round of the same number, when both have it. `None` when
/// either side has no value.
pub fn compare(
    metric: &str,
    baseline_rounds: &[Option<f64>],
    candidate_rounds: &[Option<f64>],
    lower_is_better: bool,
) -> Option<Change> {
    let present = |v: &[Option<f64>]| v.iter().flatten().copied().collect::<Vec<f64>>();
    let (baseline, candidate) = (present(baseline_rounds), present(candidate_rounds));
    let (baseline, candidate) = (&baseline[..], &candidate[..]);
    if baseline.is_empty() || candidate.is_empty() {
        return None;
    }
    let paired: Vec<(f64, f64)> = baseline_rounds
        .iter()
        .zip(candidate_rounds)
        .filter_map(|(b, c)| Some(((*b)?, (*c)?)))
        .collect();
    // By pairs of rounds where there are enough: the rounds are
    // interleaved so that a machine that drifts during the run moves both
    // rounds of a pair, and a resample keeps them together; the medians
    // are then those of the paired rounds, so that the change lies within
    // its interval. Otherwise each side on its own.
    let by_pairs = paired.len() >= MIN_PAIRS;
    let (b, c) = if by_pairs {
        let (pb, pc): (Vec<f64>, Vec<f64>) = paired.iter().copied().unzip();
        (median(&pb), median(&pc))
    } else {
        (median(baseline), median(candidate))
    };
    if !(b.is_finite() && c.is_finite()) || b == 0.0 {
        return None;
    }
    let pct = (c / b - 1.0) * 100.0;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            let (rb, rc): (Vec<f64>, Vec<f64>) = if by_pairs {
                (0..paired.len())
                    .map(|_| paired[rng.below(paired.len())])
                    .unzip()
            } else {
                (
                    (0..baseline.len())
                        .map(|_| baseline[rng.below(baseline.len())])
                        .collect(),
                    (0..candidate.len())
                        .map(|_| candidate[rng.below(candidate.len())])
                        .collect(),
                )
            };
            let mb = median(&rb);
            (mb != 0.0).then(|| (median(&rc) / mb - 1.0) * 100.0)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    let ci = [at(0.025), at(0.975)];
    let pairs = paired.len();
    let rounds_better = paired
        .iter()
        .filter(|&&(b, c)| if lower_is_better { c < b } else { c > b })
        .count();
    let improving = |x: f64| if lower_is_better { x < 0.0 } else { x > 0.0 };
    let worsening = |x: f64| if lower_is_better { x > 0.0 } else { x < 0.0 };
    let outcome = if ci.iter().all(|&x| improving(x)) {
        Outcome::Better
    } else if ci.iter().all(|&x| worsening(x)) {
        Outcome::Worse
    } else if ci[0].abs() <= NO_CHANGE_PERCENT && ci[1].abs() <= NO_CHANGE_PERCENT {
        Outcome::NoChange
    } else {
        Outcome::Inconclusive
    };
    Some(Change {
        metric: metric.to_string(),
        baseline_median: b,
        candidate_median: c,
        change_percent: pct,
        ci95_percent: ci,
        rounds_better,
        pairs,
        lower_is_better,
        outcome,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every round with its figure.
    fn all(v: &[f64]) -> Vec<Option<f64>> {
        v.iter().copied().map(Some).collect()
    }

    #[test]
    fn a_clear_drop_is_better_with_an_interval_that_excludes_zero() {
        let c = compare(
            "t",
            &all(&[10.0, 11.0, 10.5, 10.2, 10.8]),
            &all(&[3.0, 3.2, 3.1, 2.9, 3.05]),
            true,
        )
        .unwrap();
        assert_eq!(c.outcome, Outcome::Better);
        assert!((c.change_percent - (3.05 / 10.5 - 1.0) * 100.0).abs() < 1e-9);
        assert!(c.ci95_percent[0] <= c.change_percent && c.change_percent <= c.ci95_percent[1]);
        assert!(c.ci95_percent[1] < 0.0);
        assert_eq!((c.rounds_better, c.pairs), (5, 5));
    }

    #[test]
    fn a_machine_that_drifts_moves_both_rounds_of_a_pair() {
        // Measured in the lab (journal 4 MiB -> 256 MiB, ms per operation):
        // both sides slowed by half over the run, each candidate round
        // 8-26 % under the baseline round before it.
        let (b, c) = (
            [7.82, 8.56, 11.26, 13.81, 13.32],
            [7.20, 6.97, 9.76, 10.78, 9.81],
        );
        let paired = compare("t", &all(&b), &all(&c), true).unwrap();
        assert_eq!(paired.outcome, Outcome::Better, "{paired:?}");
        assert_eq!(paired.rounds_better, 5);
        assert!(paired.ci95_percent[1] < -5.0, "{paired:?}");
        // The same values with the pairs broken (a round of each side
        // missing its partner): each side on its own, the drift is noise.
        let mut bb: Vec<Option<f64>> = all(&b);
        let mut cc: Vec<Option<f64>> = all(&c);
        bb.extend([None, None, None]);
        cc.splice(0..0, [None, None, None]);
        let unpaired = compare("t", &bb, &cc, true).unwrap();
        assert_eq!(unpaired.pairs, 2);
        assert_eq!(unpaired.outcome, Outcome::Inconclusive, "{unpaired:?}");
    }

    #[test]
    fn higher_is_worse_turns_the_same_drop_around() {
        let c = compare(
            "iops",
            &all(&[10.0, 11.0, 10.5]),
            &all(&[3.0, 3.2, 3.1]),
            false,
        )
        .unwrap();
        assert_eq!(c.outcome, Outcome::Worse);
        assert_eq!(c.rounds_better, 0);
    }

    #[test]
    fn overlapping_noise_is_inconclusive_and_a_tight_tie_no_change() {
        let c = compare(
            "t",
            &all(&[10.0, 14.0, 9.0, 13.0, 8.0]),
            &all(&[9.0, 13.5, 10.0, 12.0, 8.5]),
            true,
        )
        .unwrap();
        assert_eq!(c.outcome, Outcome::Inconclusive, "{c:?}");
        let c = compare(
            "t",
            &all(&[10.0, 10.1, 10.05, 9.95, 10.0]),
            &all(&[10.02, 10.0, 10.08, 9.97, 10.03]),
            true,
        )
        .unwrap();
        assert_eq!(c.outcome, Outcome::NoChange, "{c:?}");
    }

    #[test]
    fn a_round_without_the_figure_leaves_its_pair_out_and_shifts_no_other() {
        // Baseline round 2 lacks it: pairs 1 and 3, not (b1,c1) (b3,c2).
        let c = compare(
            "t",
            &[Some(10.0), None, Some(10.0)],
            &[Some(5.0), Some(20.0), Some(5.0)],
            true,
        )
        .unwrap();
        assert_eq!((c.rounds_better, c.pairs), (2, 2));
    }

    #[test]
    fn nothing_to_compare_is_no_answer() {
        assert!(compare("t", &all(&[]), &all(&[1.0]), true).is_none());
        assert!(compare("t", &all(&[0.0]), &all(&[1.0]), true).is_none());
        assert!(median(&[]).is_nan());
        assert_eq!(median(&[3.0, 1.0, 2.0, 4.0]), 2.5);
    }
}
