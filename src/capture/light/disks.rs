//! The disks the light programs count apart: each gets a slot, written
//! into the `dev_slot` map the programs look a request's device up in.

use super::maps::{self, NSLOT};
use super::{err, CaptureError};
use aya::maps::Array;
use aya::Ebpf;
use std::path::Path;

/// Writes each device's slot into `dev_slot`, where the programs look it
/// up (again for every slot: entries already there are rewritten as they were).
pub(super) fn name_devices(ebpf: &mut Ebpf, slots: &[DiskSlot]) -> Result<(), CaptureError> {
    let mut dev_slot: Array<_, u64> =
        Array::try_from(ebpf.map_mut(maps::MAP_DEV_SLOT).expect("dev_slot map"))
            .map_err(|e| err("dev_slot map")(e.to_string()))?;
    let mut taken = std::collections::HashSet::new();
    for (dev, slot) in slots
        .iter()
        .flat_map(|s| s.devts.iter().map(move |d| (*d, s.slot)))
    {
        // Two devices on one entry: the second counts as "other".
        if taken.insert(dev_index(dev)) {
            dev_slot
                .set(dev_index(dev), (u64::from(slot) << 32) | u64::from(dev), 0)
                .map_err(|e| err("dev_slot map")(e.to_string()))?;
        }
    }
    Ok(())
}

/// A disk the programs count apart: its kernel name, `maj,min`, its slot
/// and the dev_t of the disk and its partitions (as the kernel encodes
/// them: major << 20 | minor).
#[derive(Clone, Debug, PartialEq)]
pub struct DiskSlot {
    pub name: String,
    pub dev: String,
    pub slot: u32,
    devts: Vec<u32>,
}

/// The machine's disks, sorted by name, each with its dev_ts.
fn disks() -> Vec<(String, String, Vec<u32>)> {
    let mut disks = Vec::new();
    let Ok(dir) = std::fs::read_dir("/sys/block") else {
        return disks;
    };
    let mut paths: Vec<_> = dir.flatten().map(|e| e.path()).collect();
    paths.sort();
    for path in paths {
        let Some(dev) = read_dev(&path.join("dev")) else {
            continue;
        };
        let mut devs = vec![dev.0];
        if let Ok(parts) = std::fs::read_dir(&path) {
            for p in parts.flatten() {
                if p.path().join("partition").exists() {
                    devs.extend(read_dev(&p.path().join("dev")).map(|d| d.0));
                }
            }
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        disks.push((name, dev.1, devs));
    }
    disks
}

/// Slots for the machine's disks (slot 0 is every other device).
pub(super) fn device_slots() -> Vec<DiskSlot> {
    let mut slots = Vec::new();
    add_new_disks(&mut slots);
    slots
}

/// Gives the disks not in `slots` the next free slots, while there are;
/// returns how many it added. A disk removed keeps its slot (its counts
/// stay what they were).
pub(super) fn add_new_disks(slots: &mut Vec<DiskSlot>) -> usize {
    let before = slots.len();
    for (name, dev, devts) in disks() {
        if slots.len() + 1 >= NSLOT as usize {
            break;
        }
        if slots.iter().any(|s| s.dev == dev && s.name == name) {
            continue;
        }
        let slot = slots.len() as u32 + 1;
        slots.push(DiskSlot {
            name,
            dev,
            slot,
            devts,
        });
    }
    slots.len() - before
}

/// The entry of `dev_slot` for a dev_t (bpf/light.bpf.c's `slot_of`).
fn dev_index(dev: u32) -> u32 {
    use super::maps::{DEV_HASH_MUL, DEV_HASH_SHIFT, NDEVIDX};
    // The shift leaves 32 - DEV_HASH_SHIFT bits: NDEVIDX entries.
    const _: () = assert!(1 << (32 - DEV_HASH_SHIFT) == NDEVIDX);
    dev.wrapping_mul(DEV_HASH_MUL) >> DEV_HASH_SHIFT
}

/// A `MAJ:MIN` file as the kernel's dev_t and `maj,min`.
fn read_dev(path: &Path) -> Option<(u32, String)> {
    let s = std::fs::read_to_string(path).ok()?;
    let (maj, min) = s.trim().split_once(':')?;
    let (maj, min): (u32, u32) = (maj.parse().ok()?, min.parse().ok()?);
    Some(((maj << 20) | min, format!("{maj},{min}")))
}

/// When the disks' `stat` files were read (CLOCK_MONOTONIC ns), and each
/// one's fields by `maj,min`.
pub type DiskstatsReading = (u64, Vec<(String, Vec<u64>)>);

/// Each slot's disk's `stat` fields now (`maj,min`, fields), and when
/// (CLOCK_MONOTONIC ns): iostat's readings, taken at the capture's ends.
pub(super) fn read_stats(slots: &[DiskSlot]) -> DiskstatsReading {
    let at = crate::capture::snapshot::mono_ns();
    let stats = slots
        .iter()
        .filter_map(|s| {
            let text =
                std::fs::read_to_string(Path::new("/sys/block").join(&s.name).join("stat")).ok()?;
            let fields: Vec<u64> = text
                .split_whitespace()
                .map_while(|f| f.parse().ok())
                .collect();
            Some((s.dev.clone(), fields))
        })
        .collect();
    (at, stats)
}
