//! The per-cgroup series `watch` serves. A cgroup is given its own series
//! the first time it is seen, while fewer than `--cgroups N` have them;
//! later ones are summed under `cgroup="other"`. A cgroup never moves
//! between the two, so every series only grows (a counter that fell would
//! read as a reset) and the series sum to what the devices counted.

use crate::capture::cgroups::{io_hierarchy, Hierarchy};
use crate::model::light::{LightCgroup, LE_NS};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One (cgroup, device, operation).
type Key = (u64, String, String);

/// Unresolved ids are looked up again at most this often (s): a walk of
/// the hierarchy per second would cost on machines with many cgroups.
const RESOLVE_EVERY_S: u64 = 10;

pub struct CgroupSeries {
    max: usize,
    hierarchy: Option<Hierarchy>,
    /// Cgroups with their own series: their label.
    own: BTreeMap<u64, String>,
    /// Cgroups summed under "other", and each of their entries' last counts.
    others: BTreeSet<u64>,
    last: HashMap<Key, LightCgroup>,
    /// By (device, operation): what the others counted since first seen.
    other_sum: BTreeMap<(String, String), LightCgroup>,
    /// Seconds since the last walk for ids without a path.
    since_resolve: u64,
    /// A cgroup got its own series since the last walk: looked up at once
    /// (a series labelled by id for its first seconds would be a series
    /// of its own, then stop).
    new_since_resolve: bool,
    /// The entries of the last reading with their own series.
    current: Vec<LightCgroup>,
}

/// A cgroup's label: its path, `none` for requests without a bio
/// (flushes), `id:N` for an id with no directory in the hierarchy
/// (removed, or not resolved yet).
fn label(id: u64, path: Option<&String>) -> String {
    match (id, path) {
        (_, Some(p)) => p.clone(),
        (0, None) => "none".into(),
        (id, None) => format!("id:{id}"),
    }
}

impl CgroupSeries {
    pub fn new(max: usize) -> CgroupSeries {
        CgroupSeries {
            max,
            hierarchy: io_hierarchy(),
            own: BTreeMap::new(),
            others: BTreeSet::new(),
            last: HashMap::new(),
            other_sum: BTreeMap::new(),
            since_resolve: RESOLVE_EVERY_S,
            new_since_resolve: false,
            current: Vec::new(),
        }
    }

    /// Takes one reading of the kernel's entries (once a second).
    pub fn update(&mut self, entries: &[LightCgroup]) {
        self.since_resolve += 1;
        // New cgroups, the busiest first, get their own series while there
        // is room.
        let mut new: Vec<(u64, u64)> = Vec::new();
        for e in entries {
            if !self.own.contains_key(&e.id) && !self.others.contains(&e.id) {
                match new.iter_mut().find(|(id, _)| *id == e.id) {
                    Some(n) => n.1 += e.ios,
                    None => new.push((e.id, e.ios)),
                }
            }
        }
        new.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (id, _) in new {
            if self.own.len() < self.max {
                self.own.insert(id, label(id, None));
                self.new_since_resolve = true;
            } else {
                self.others.insert(id);
            }
        }
        self.resolve();
        self.current.clear();
        for e in entries {
            if self.own.contains_key(&e.id) {
                self.current.push(e.clone());
                continue;
            }
            let key = (e.id, e.dev.clone(), e.op.clone());
            let delta = match self.last.get(&key) {
                Some(before) => e.since(before),
                None => e.clone(),
            };
            let sum = self
                .other_sum
                .entry((e.dev.clone(), e.op.clone()))
                .or_insert_with(|| LightCgroup {
                    id: u64::MAX,
                    dev: e.dev.clone(),
                    op: e.op.clone(),
                    le: vec![0; LE_NS.len() + 1],
                    ..Default::default()
                });
            sum.ios += delta.ios;
            sum.bytes += delta.bytes;
            sum.timed += delta.timed;
            sum.time_ns += delta.time_ns;
            for (t, d) in sum.le.iter_mut().zip(&delta.le) {
                *t += d;
            }
            self.last.insert(key, e.clone());
        }
    }

    /// Paths for cgroups labelled by id: looked up when new, then at
    /// most every RESOLVE_EVERY_S seconds (removed ones never resolve).
    fn resolve(&mut self) {
        let Some(h) = &self.hierarchy else { return };
        if !self.new_since_resolve && self.since_resolve < RESOLVE_EVERY_S {
            return;
        }
        let unresolved: BTreeSet<u64> = self
            .own
            .iter()
            .filter(|(id, l)| **id != 0 && l.starts_with("id:"))
            .map(|(id, _)| *id)
            .collect();
        self.new_since_resolve = false;
        if unresolved.is_empty() {
            return;
        }
        self.since_resolve = 0;
        for (id, path) in h.paths(&unresolved) {
            self.own.insert(id, path);
        }
    }

    /// The series to serve: (label, entry), those with their own first.
    pub fn series(&self) -> Vec<(String, &LightCgroup)> {
        let own = self.current.iter().map(|e| (self.own[&e.id].clone(), e));
        let other = self.other_sum.values().map(|e| ("other".to_string(), e));
        own.chain(other).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, ios: u64) -> LightCgroup {
        let mut le = vec![0; LE_NS.len() + 1];
        le[3] = ios;
        LightCgroup {
            id,
            dev: "7,0".into(),
            op: "read".into(),
            ios,
            bytes: ios * 4096,
            timed: ios,
            time_ns: ios * 80_000,
            le,
            ..Default::default()
        }
    }

    fn by_label<'a>(s: &'a CgroupSeries, l: &str) -> Option<&'a LightCgroup> {
        s.series().into_iter().find(|(x, _)| x == l).map(|(_, e)| e)
    }

    #[test]
    fn the_busiest_new_cgroups_get_series_and_later_ones_are_summed_and_only_grow() {
        let mut s = CgroupSeries {
            hierarchy: None,
            ..CgroupSeries::new(2)
        };
        s.update(&[entry(5, 10), entry(6, 300), entry(7, 200)]);
        assert_eq!(by_label(&s, "id:6").unwrap().ios, 300);
        assert_eq!(by_label(&s, "id:7").unwrap().ios, 200);
        assert!(by_label(&s, "id:5").is_none());
        assert_eq!(by_label(&s, "other").unwrap().ios, 10);
        // 5 grows past the others: it stays summed, "other" only grows.
        s.update(&[entry(5, 1000), entry(6, 301), entry(7, 200), entry(0, 4)]);
        let other = by_label(&s, "other").unwrap();
        assert_eq!(other.ios, 1004, "5's 1000 and the flushes' 4");
        assert_eq!(other.le[3], 1004);
        assert_eq!(other.bytes, 1004 * 4096);
        assert_eq!(by_label(&s, "id:6").unwrap().ios, 301);
        let total: u64 = s.series().iter().map(|(_, e)| e.ios).sum();
        assert_eq!(total, 1000 + 301 + 200 + 4, "the series sum to the total");
    }

    #[test]
    fn ids_resolve_to_paths_in_the_hierarchy() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("svc")).unwrap();
        use std::os::unix::fs::MetadataExt;
        let ino = std::fs::metadata(t.path().join("svc")).unwrap().ino();
        let mut s = CgroupSeries {
            hierarchy: Some(Hierarchy {
                root: t.path().into(),
                v2: true,
            }),
            ..CgroupSeries::new(4)
        };
        s.update(&[entry(ino, 3), entry(0, 1)]);
        assert_eq!(by_label(&s, "/svc").unwrap().ios, 3);
        assert_eq!(by_label(&s, "none").unwrap().ios, 1);
        // A cgroup first seen a second later is named in that reading,
        // not 10 s later.
        std::fs::create_dir(t.path().join("batch")).unwrap();
        let later = std::fs::metadata(t.path().join("batch")).unwrap().ino();
        s.update(&[entry(ino, 4), entry(0, 1), entry(later, 2)]);
        assert_eq!(by_label(&s, "/batch").unwrap().ios, 2);
        assert!(by_label(&s, &format!("id:{later}")).is_none());
    }
}
