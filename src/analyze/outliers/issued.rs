//! A device's issued requests by issue time and sector, oldest first: what
//! the outlier analysis asks of them is the oldest, at every stretch an
//! operation waits. A device holds a queue's depth of them, which a sorted
//! vector keeps for less than a tree (issue times come in order: an insert
//! is mostly a push); a trace that holds more (a damaged one: issues
//! never completed) moves to the tree and stays there, so no change costs
//! more than a tree's.

use std::collections::BTreeSet;

/// Requests kept in the vector before the tree.
const SORTED_MAX: usize = 512;

/// (issue time, sector) of each issued request.
#[derive(Debug)]
pub(super) enum Issued {
    Sorted(Vec<(u64, u64)>),
    Tree(BTreeSet<(u64, u64)>),
}

impl Default for Issued {
    fn default() -> Self {
        Issued::Sorted(Vec::new())
    }
}

impl Issued {
    pub(super) fn insert(&mut self, k: (u64, u64)) {
        match self {
            Issued::Sorted(v) => {
                let at = if v.last().is_none_or(|last| *last < k) {
                    v.len()
                } else {
                    match v.binary_search(&k) {
                        Ok(_) => return,
                        Err(i) => i,
                    }
                };
                if v.len() < SORTED_MAX {
                    v.insert(at, k);
                } else {
                    let mut t: BTreeSet<(u64, u64)> = v.drain(..).collect();
                    t.insert(k);
                    *self = Issued::Tree(t);
                }
            }
            Issued::Tree(t) => {
                t.insert(k);
            }
        }
    }

    pub(super) fn remove(&mut self, k: &(u64, u64)) {
        match self {
            Issued::Sorted(v) => {
                if let Ok(i) = v.binary_search(k) {
                    v.remove(i);
                }
            }
            Issued::Tree(t) => {
                t.remove(k);
            }
        }
    }

    /// The oldest: the lowest issue time, then the lowest sector.
    pub(super) fn first(&self) -> Option<(u64, u64)> {
        match self {
            Issued::Sorted(v) => v.first().copied(),
            Issued::Tree(t) => t.first().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held to a BTreeSet through inserts in and out of order, repeats,
    /// removals of what is and is not there, and the move to the tree.
    #[test]
    fn keeps_the_oldest_as_a_tree_does() {
        let mut got = Issued::default();
        let mut want = BTreeSet::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..5000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = if x.is_multiple_of(4) {
                (i / 2, x % 64)
            } else {
                (i / 3 + x % 50, x % 16)
            };
            if x % 5 < 4 {
                got.insert(k);
                want.insert(k);
            } else {
                let r = *want
                    .iter()
                    .nth((x as usize / 7) % want.len().max(1))
                    .unwrap_or(&k);
                got.remove(&r);
                want.remove(&r);
            }
            assert_eq!(got.first(), want.first().copied(), "after {i}");
        }
        assert!(
            matches!(got, Issued::Tree(_)),
            "more than {SORTED_MAX} held"
        );
        for k in want.clone() {
            got.remove(&k);
            want.remove(&k);
            assert_eq!(got.first(), want.first().copied());
        }
    }
}
