//! Per-device state found by device number, for analyses that look their
//! device up on every event: the device of the last lookup is checked
//! before hashing (most traces hold one device, or a few in runs), the
//! others are found through a map.

use crate::model::Dev;
use rustc_hash::FxHashMap;

#[derive(Debug)]
pub struct DevTable<V> {
    slots: Vec<(Dev, V)>,
    index: FxHashMap<Dev, usize>,
    /// The slot of the last lookup (slots.len() when none).
    last: usize,
}

impl<V> Default for DevTable<V> {
    fn default() -> Self {
        DevTable {
            slots: Vec::new(),
            index: FxHashMap::default(),
            last: 0,
        }
    }
}

impl<V> DevTable<V> {
    fn slot(&self, dev: Dev) -> Option<usize> {
        match self.slots.get(self.last) {
            Some((d, _)) if *d == dev => Some(self.last),
            _ => self.index.get(&dev).copied(),
        }
    }

    /// The device's state, made by `new` the first time.
    #[inline]
    pub fn get_or_insert_with(&mut self, dev: Dev, new: impl FnOnce() -> V) -> &mut V {
        let i = match self.slot(dev) {
            Some(i) => i,
            None => {
                self.index.insert(dev, self.slots.len());
                self.slots.push((dev, new()));
                self.slots.len() - 1
            }
        };
        self.last = i;
        &mut self.slots[i].1
    }

    pub fn get(&self, dev: &Dev) -> Option<&V> {
        self.slot(*dev).map(|i| &self.slots[i].1)
    }

    pub fn get_mut(&mut self, dev: &Dev) -> Option<&mut V> {
        let i = self.slot(*dev)?;
        self.last = i;
        Some(&mut self.slots[i].1)
    }

    /// Every device's state, by device.
    pub fn into_map(self) -> FxHashMap<Dev, V> {
        self.slots.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_each_device_whichever_was_last() {
        let mut t: DevTable<u32> = DevTable::default();
        let (a, b) = (Dev(7 << 20), Dev((8 << 20) | 16));
        *t.get_or_insert_with(a, || 0) += 1;
        *t.get_or_insert_with(b, || 10) += 1;
        *t.get_or_insert_with(a, || 100) += 1;
        assert_eq!(t.get(&a), Some(&2));
        assert_eq!(t.get(&b), Some(&11));
        *t.get_mut(&b).unwrap() += 1;
        assert_eq!(t.get(&b), Some(&12));
        assert_eq!(t.get(&Dev(1)), None);
        assert!(t.get_mut(&Dev(1)).is_none());
        let m = t.into_map();
        assert_eq!((m.len(), m[&a], m[&b]), (2, 2, 12));
    }
}
