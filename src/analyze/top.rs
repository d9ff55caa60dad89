//! The N largest of a stream (slowest calls, longest waits and gaps):
//! largest first, ties earliest first. Memory: N items.

/// Whether an item of `value` would enter `v`, a list of the `n` largest
/// by `of`. Cheap: callers check it before building a costly item.
pub fn qualifies<T>(v: &[T], n: usize, value: u64, of: impl Fn(&T) -> u64) -> bool {
    v.len() < n || v.last().is_some_and(|x| of(x) < value)
}

/// Adds `item` to `v`, which keeps the `n` largest by `value`, largest
/// first; equal values are ordered by `start`, earliest first.
pub fn keep_largest<T>(
    v: &mut Vec<T>,
    item: T,
    n: usize,
    value: impl Fn(&T) -> u64,
    start: impl Fn(&T) -> u64,
) {
    if !qualifies(v, n, value(&item), &value) {
        return;
    }
    v.push(item);
    v.sort_by(|a, b| value(b).cmp(&value(a)).then(start(a).cmp(&start(b))));
    v.truncate(n);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_largest_ties_earliest_first() {
        let mut v: Vec<(u64, u64)> = Vec::new();
        for x in [(5, 1), (9, 2), (5, 0), (1, 3), (9, 1)] {
            keep_largest(&mut v, x, 3, |x| x.0, |x| x.1);
        }
        assert_eq!(v, [(9, 1), (9, 2), (5, 0)]);
        assert!(!qualifies(&v, 3, 5, |x| x.0));
        assert!(qualifies(&v, 3, 6, |x| x.0));
    }
}
