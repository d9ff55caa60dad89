//! The system snapshot a capture carries (`snapshot.json`, written by
//! `capture::snapshot`), typed for the stages that read it: diagnose,
//! compare and report. Only what they read is typed; the document itself
//! is kept as recorded, so that JSON output gives it back whole.
//!
//! Missing keys read as empty (older captures lack `ext4_journals`, a
//! `record --blk` snapshot may lack a workload); a document that is not a
//! snapshot at all reads as none.

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    /// Settings before the workload started.
    pub before: SystemState,
    /// When the snapshot after the workload was taken (its settings are
    /// not read).
    pub after: Taken,
    /// The workload's threads and cgroup, sampled while it ran.
    pub workload: Workload,
    /// The document as recorded, for output.
    #[serde(skip)]
    pub raw: Value,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SystemState {
    /// `CLOCK_MONOTONIC` when it was taken: the trace's clock (`mono`).
    pub taken_at_mono_ns: Option<u64>,
    /// Wall-clock time when it was taken (captures since Parquet export).
    pub taken_at_unix_ns: Option<u64>,
    pub hostname: Option<String>,
    pub kernel: Kernel,
    pub cpus: Cpus,
    /// By device name (`loop0`).
    pub block_devices: BTreeMap<String, BlockDevice>,
    /// Each mounted ext4's journal, by device name: `journal_kib` and
    /// `block_size`, or `unreadable` with the reason.
    pub ext4_journals: BTreeMap<String, BTreeMap<String, Value>>,
    /// `/proc/fs/jbd2/NAME/info`, by journal (`loop0-8`).
    pub jbd2: BTreeMap<String, String>,
    /// Cgroup I/O limits that are set: by cgroup path, file → its text.
    pub cgroup_io_limits: BTreeMap<String, BTreeMap<String, String>>,
    /// `vm.dirty_*`, by name without `vm.`.
    pub vm: BTreeMap<String, Option<String>>,
    /// The page cache's and reclaim's counters of `/proc/vmstat`
    /// (captures since iosleuth read them).
    pub vmstat: BTreeMap<String, u64>,
    /// `sched_rt_runtime_us`, `sched_rt_period_us`, `features`.
    pub sched: BTreeMap<String, Option<String>>,
    pub kernel_threads: Vec<Thread>,
    pub mounts: Vec<Mount>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Mount {
    /// `/dev/loop0`, `proc`, …
    pub device: String,
    pub mountpoint: String,
    pub fstype: String,
    /// As /proc/self/mounts shows them (`rw,relatime,nodioread_nolock`).
    pub options: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Kernel {
    pub release: Option<String>,
    pub version: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Cpus {
    pub online: Option<String>,
    pub model: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Taken {
    pub taken_at_mono_ns: Option<u64>,
    pub vmstat: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct BlockDevice {
    /// `MAJ,MIN`.
    pub dev: Option<String>,
    /// Every readable `queue/*` file, as text (`scheduler` is
    /// `mq-deadline [none]`, with the current one in brackets).
    pub queue: BTreeMap<String, String>,
    /// Devices built on this one, and those it is built on.
    pub holders: Vec<String>,
    pub slaves: Vec<String>,
    /// A loop device's backing file.
    pub backing_file: Option<String>,
    /// The disk's partitions by name (`vda1`), each with its `dev`.
    pub partitions: BTreeMap<String, Partition>,
    /// A device-mapper device's name (`/dev/mapper/NAME`).
    pub dm_name: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Partition {
    /// `MAJ,MIN`.
    pub dev: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Workload {
    /// The recorded command's process.
    pub pid: Option<u64>,
    pub threads: Vec<Thread>,
    /// The files its processes mapped while it ran (captures since they
    /// were read): what names a page fault's file.
    pub mapped_files: Vec<MappedFile>,
    /// The memory limits set on the cgroups its processes ran in and on
    /// their ancestors (captures since they were read).
    pub memory_limits: Vec<MemoryLimit>,
}

/// A memory limit over the workload: the cgroup's directory, the file
/// (`memory.max`, `memory.high`, v1's `memory.limit_in_bytes`) and its
/// value in bytes; `own` when its processes were in that cgroup, not in
/// one below it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MemoryLimit {
    pub cgroup: String,
    pub file: String,
    pub value: String,
    pub own: bool,
}

/// A file the workload mapped: its filesystem's device (`MAJ,MIN`), inode
/// and path as `/proc/PID/maps` printed it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MappedFile {
    pub dev: String,
    pub inode: u64,
    pub path: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Thread {
    pub pid: Option<u64>,
    pub tid: Option<u64>,
    pub comm: Option<String>,
    pub policy: Option<String>,
    pub rt_priority: Option<i64>,
    pub nice: Option<i64>,
    pub cpus_allowed: Option<String>,
}

impl Snapshot {
    /// Reads a snapshot document; none when it is not JSON or not shaped
    /// like one.
    pub fn parse(text: &str) -> Option<Snapshot> {
        Snapshot::read(text).ok()
    }

    /// Like `parse`, saying what is wrong with a document that is not one.
    pub fn read(text: &str) -> Result<Snapshot, String> {
        let raw: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let mut s =
            Snapshot::deserialize(&raw).map_err(|e| format!("not shaped like a snapshot: {e}"))?;
        s.raw = raw;
        Ok(s)
    }

    pub fn from_value(raw: Value) -> Option<Snapshot> {
        let mut s = Snapshot::deserialize(&raw).ok()?;
        s.raw = raw;
        Some(s)
    }

    /// The `MAJ,MIN` of a device named as `/sys/class/block` names it
    /// (`loop0`, `vda1`, `dm-0`, with or without `/dev/`), or as
    /// `/dev/mapper/NAME`; `None` when the snapshot does not list it.
    pub fn dev_named(&self, named: &str) -> Option<String> {
        let name = named.strip_prefix("/dev/").unwrap_or(named);
        let devs = &self.before.block_devices;
        if let Some(d) = devs.get(name) {
            return d.dev.clone();
        }
        if let Some(dm) = name.strip_prefix("mapper/") {
            return devs
                .values()
                .find(|d| d.dm_name.as_deref() == Some(dm))?
                .dev
                .clone();
        }
        devs.values()
            .find_map(|d| d.partitions.get(name))
            .and_then(|p| p.dev.clone())
    }

    /// The name of a device or partition by `MAJ,MIN`.
    pub fn name_of(&self, dev: &str) -> Option<&str> {
        let devs = &self.before.block_devices;
        devs.iter().find_map(|(name, d)| {
            if d.dev.as_deref() == Some(dev) {
                return Some(name.as_str());
            }
            d.partitions
                .iter()
                .find(|(_, p)| p.dev.as_deref() == Some(dev))
                .map(|(n, _)| n.as_str())
        })
    }

    /// A block device by `MAJ,MIN`: its name and settings.
    pub fn device(&self, dev: &str) -> Option<(&str, &BlockDevice)> {
        self.before
            .block_devices
            .iter()
            .find(|(_, d)| d.dev.as_deref() == Some(dev))
            .map(|(name, d)| (name.as_str(), d))
    }

    /// The devices directly under `dev` (`MAJ,MIN`), with how each is
    /// under it: the device-mapper or md members (`slaves`), or the device
    /// whose file system holds a loop device's backing file (the mount
    /// with the longest matching mount point). A partition stands for its
    /// disk: the block layer remaps its bios there, and the trace's
    /// requests are the disk's.
    pub fn lower_devices(&self, dev: &str) -> Vec<(String, String)> {
        let Some((name, d)) = self.device(dev) else {
            return Vec::new();
        };
        let mut out: Vec<(String, String)> = d
            .slaves
            .iter()
            .filter_map(|s| {
                let (ld, on) = self.disk_of(s)?;
                Some((ld, format!("{name} is built on {on}")))
            })
            .collect();
        if let Some(file) = &d.backing_file {
            let under = |m: &&Mount| {
                file.starts_with(&m.mountpoint)
                    && (m.mountpoint == "/" || file[m.mountpoint.len()..].starts_with('/'))
            };
            let holder = self
                .before
                .mounts
                .iter()
                .filter(under)
                .max_by_key(|m| m.mountpoint.len());
            if let Some((ld, on)) = holder.and_then(|m| self.disk_of(&m.device)) {
                out.push((ld, format!("{name}'s file {file} is on {on}")));
            }
        }
        out
    }

    /// The `MAJ,MIN` whose requests carry the I/O of a device named as
    /// mounts and `slaves` name it (`/dev/vda1`, `vda`, `/dev/mapper/vg-lv`,
    /// `dm-0`), and how to say it.
    fn disk_of(&self, named: &str) -> Option<(String, String)> {
        let devs = &self.before.block_devices;
        let name = named.trim_start_matches("/dev/");
        if let Some(d) = devs.get(name) {
            return Some((d.dev.clone()?, name.to_string()));
        }
        if let Some(dm) = name.strip_prefix("mapper/") {
            let (n, d) = devs
                .iter()
                .find(|(_, d)| d.dm_name.as_deref() == Some(dm))?;
            return Some((d.dev.clone()?, format!("{n} ({named})")));
        }
        let (disk, d) = devs.iter().find(|(_, d)| d.partitions.contains_key(name))?;
        Some((d.dev.clone()?, format!("{name}, a partition of {disk}")))
    }

    /// Thread names the snapshot knows: the workload's threads and the
    /// kernel threads (with their workqueue), for threads a trace never names.
    pub fn thread_names(&self) -> Vec<(u32, String)> {
        self.workload
            .threads
            .iter()
            .chain(&self.before.kernel_threads)
            .filter_map(|t| Some((t.tid.or(t.pid)? as u32, t.comm.clone()?)))
            .collect()
    }
}

impl Snapshot {
    /// Whether the snapshot lists `tid` among the kernel threads (children
    /// of kthreadd when it was taken): a name alone does not tell
    /// (`kdamond.0`, `khugepaged`, a driver's own threads).
    pub fn is_kernel_thread(&self, tid: u32) -> bool {
        self.before
            .kernel_threads
            .iter()
            .any(|t| t.tid.or(t.pid) == Some(u64::from(tid)))
    }
}

impl Snapshot {
    /// Thread id → process id (thread group) of the threads the snapshot
    /// lists with both: the workload's and the kernel threads.
    pub fn thread_groups(&self) -> std::collections::HashMap<u32, u32> {
        let mut out = std::collections::HashMap::new();
        for t in self
            .workload
            .threads
            .iter()
            .chain(&self.before.kernel_threads)
        {
            if let (Some(pid), Some(tid)) = (t.pid, t.tid) {
                if let (Ok(pid), Ok(tid)) = (u32::try_from(pid), u32::try_from(tid)) {
                    out.insert(tid, pid);
                }
            }
        }
        // The recorded command's first thread is its process.
        if let Some(p) = self.workload.pid.and_then(|p| u32::try_from(p).ok()) {
            out.insert(p, p);
        }
        out
    }
}

impl BlockDevice {
    /// A queue setting as the kernel reports it, its current choice picked
    /// out (`mq-deadline [none]` → `none`).
    pub fn setting(&self, key: &str) -> Option<String> {
        self.queue.get(key).map(|v| current_value(v))
    }
}

/// `a [b] c` → `b`: the choice a sysfs list file marks as current;
/// anything else, its first line trimmed.
pub fn current_value(raw: &str) -> String {
    match (raw.find('['), raw.find(']')) {
        (Some(i), Some(j)) if i < j => raw[i + 1..j].to_string(),
        _ => raw.lines().next().unwrap_or("").trim().to_string(),
    }
}

/// JSON output gives the document back as it was recorded.
impl Serialize for Snapshot {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_recorded_snapshot() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/journal-4m.cap/snapshot.json"
        ))
        .unwrap();
        let s = Snapshot::parse(&text).unwrap();
        let (name, d) = s.device("7,0").unwrap();
        assert_eq!(name, "loop0");
        assert_eq!(d.setting("nomerges").as_deref(), Some("0"));
        assert_eq!(d.setting("scheduler").as_deref(), Some("none"));
        assert!(s.before.jbd2["loop0-8"].contains("transactions"));
        assert_eq!(s.before.sched["features"], None);
        assert_eq!(
            s.before.sched["sched_rt_runtime_us"].as_deref(),
            Some("950000")
        );
        assert!(s
            .thread_names()
            .iter()
            .any(|(tid, c)| *tid == 6146 && c == "iosleuth"));
        // The whole document comes back in JSON.
        let back = serde_json::to_value(&s).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(&text).unwrap());
    }

    #[test]
    fn not_a_snapshot() {
        assert!(Snapshot::parse("not json").is_none());
        assert!(Snapshot::parse(r#"{"before": 3}"#).is_none());
        let empty = Snapshot::parse("{}").unwrap();
        assert!(empty.before.block_devices.is_empty());
        assert_eq!(current_value("mq-deadline [bfq] none"), "bfq");
        assert_eq!(current_value(" 2\n"), "2");
    }

    /// Partitions and device-mapper names, which these VMs' kernel cannot
    /// make (no partition table support, no dm): a hand-written snapshot of
    /// a disk with two partitions, ext4 on vda1 holding a loop device's
    /// file, and dm-0 (`/dev/mapper/vg-data`) built on vda2 with a second
    /// loop device's file on it.
    #[test]
    fn a_partition_or_a_mapper_name_stands_for_the_device_the_trace_names() {
        let s = Snapshot::from_value(serde_json::json!({
            "before": {
                "block_devices": {
                    "vda": {"dev": "254,0", "partitions": {
                        "vda1": {"dev": "254,1"}, "vda2": {"dev": "254,2"}}},
                    "dm-0": {"dev": "253,0", "dm_name": "vg-data", "slaves": ["vda2"]},
                    "loop0": {"dev": "7,0", "backing_file": "/srv/a/disk.img"},
                    "loop1": {"dev": "7,1", "backing_file": "/data/b.img"}
                },
                "mounts": [
                    {"device": "/dev/vda1", "mountpoint": "/srv"},
                    {"device": "/dev/mapper/vg-data", "mountpoint": "/data"}
                ]
            }
        }))
        .unwrap();
        assert_eq!(s.dev_named("/dev/vda1").as_deref(), Some("254,1"));
        assert_eq!(s.dev_named("loop1").as_deref(), Some("7,1"));
        assert_eq!(s.dev_named("/dev/mapper/vg-data").as_deref(), Some("253,0"));
        assert_eq!(s.dev_named("sdz"), None);
        assert_eq!(s.name_of("254,2"), Some("vda2"));
        assert_eq!(s.name_of("253,0"), Some("dm-0"));
        assert_eq!(
            s.lower_devices("7,0"),
            vec![(
                "254,0".to_string(),
                "loop0's file /srv/a/disk.img is on vda1, a partition of vda".to_string()
            )]
        );
        assert_eq!(
            s.lower_devices("7,1"),
            vec![(
                "253,0".to_string(),
                "loop1's file /data/b.img is on dm-0 (/dev/mapper/vg-data)".to_string()
            )]
        );
        assert_eq!(
            s.lower_devices("253,0"),
            vec![(
                "254,0".to_string(),
                "dm-0 is built on vda2, a partition of vda".to_string()
            )]
        );
    }
}
