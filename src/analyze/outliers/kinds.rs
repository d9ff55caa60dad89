//! Operation kinds (`syscall fsync`, `probe fsync`, `fault file`, …), each
//! named once: an operation carries its kind's number, and what is kept
//! per kind (its totals, its slowest) sits in a vector by that number.
//! Naming kinds as strings at every operation's begin and finding them
//! in maps of strings at every end cost about a tenth of the outlier
//! analysis on a capture of 16 fsync writers.

use super::summary::{add_breakdown, Breakdown, KindTotal, Outlier};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// A kind's number in its analysis' [`Kinds`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct KindId(u32);

/// What is kept of one kind.
struct PerKind {
    name: Box<str>,
    /// Every ended operation's time (`None`: none ended yet).
    total: Option<KindTotal>,
    /// The slowest ended ones, as `top::keep_largest` keeps them.
    kept: Vec<Outlier>,
}

#[derive(Default)]
pub(super) struct Kinds {
    kinds: Vec<PerKind>,
    /// By prefix (a handful: `syscall `, `probe `, …), then by name.
    by_prefix: Vec<(&'static str, FxHashMap<Box<str>, KindId>)>,
}

impl Kinds {
    /// The kind named `prefix` + `name`, numbered the first time it is met.
    pub(super) fn id(&mut self, prefix: &'static str, name: &str) -> KindId {
        let at = match self.by_prefix.iter().position(|(p, _)| *p == prefix) {
            Some(at) => at,
            None => {
                self.by_prefix.push((prefix, FxHashMap::default()));
                self.by_prefix.len() - 1
            }
        };
        if let Some(&id) = self.by_prefix[at].1.get(name) {
            return id;
        }
        let id = KindId(self.kinds.len() as u32);
        self.kinds.push(PerKind {
            name: [prefix, name].concat().into(),
            total: None,
            kept: Vec::new(),
        });
        self.by_prefix[at].1.insert(name.into(), id);
        id
    }

    pub(super) fn name(&self, id: KindId) -> &str {
        &self.kinds[id.0 as usize].name
    }

    /// An ended operation of kind `id` in its totals.
    pub(super) fn count(&mut self, id: KindId, latency: u64, b: &Breakdown) {
        let t = self.kinds[id.0 as usize]
            .total
            .get_or_insert_with(KindTotal::default);
        t.count += 1;
        t.latency_ns += latency;
        add_breakdown(&mut t.breakdown, b);
    }

    /// The slowest kept of kind `id` (an ended operation makes its list).
    pub(super) fn kept_mut(&mut self, id: KindId) -> &mut Vec<Outlier> {
        &mut self.kinds[id.0 as usize].kept
    }

    /// The slowest of every kind.
    pub(super) fn kept(&mut self) -> impl Iterator<Item = &mut Outlier> {
        self.kinds.iter_mut().flat_map(|k| k.kept.iter_mut())
    }

    /// By name: the slowest and the totals of every kind of which an
    /// operation ended.
    pub(super) fn into_maps(self) -> (BTreeMap<String, Vec<Outlier>>, BTreeMap<String, KindTotal>) {
        let (mut kept, mut totals) = (BTreeMap::new(), BTreeMap::new());
        for k in self.kinds {
            if let Some(t) = k.total {
                let name = String::from(k.name);
                kept.insert(name.clone(), k.kept);
                totals.insert(name, t);
            }
        }
        (kept, totals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_numbered_once_by_its_whole_name() {
        let mut k = Kinds::default();
        let fsync = k.id("syscall ", "fsync");
        let probe = k.id("probe ", "fsync");
        assert_ne!(fsync, probe);
        assert_eq!(k.id("syscall ", "fsync"), fsync);
        assert_eq!(
            (k.name(fsync), k.name(probe)),
            ("syscall fsync", "probe fsync")
        );
        k.count(fsync, 10, &Breakdown::default());
        k.count(fsync, 5, &Breakdown::default());
        let (kept, totals) = k.into_maps();
        assert_eq!(totals["syscall fsync"].count, 2);
        assert_eq!(totals["syscall fsync"].latency_ns, 15);
        assert!(kept["syscall fsync"].is_empty());
        assert!(!totals.contains_key("probe fsync"), "none ended");
    }
}
