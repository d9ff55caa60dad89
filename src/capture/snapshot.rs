//! The settings the measured slow-downs hinged on, read from /proc and /sys: block
//! queue settings (nomerges, scheduler, …) and the device stack, mounts,
//! journals, dirty-page limits, real-time throttling, thread policies and
//! affinities, IRQ affinity, interrupt and disk counters, pressure, cgroup
//! I/O limits. Unreadable files are simply absent: a snapshot never fails.

use serde_json::{json, Map, Value};
use std::fs;
use std::path::Path;

fn read(p: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim_end().to_string())
}

fn names(dir: impl AsRef<Path>) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Every readable file of a directory (one level), as strings.
fn files(dir: &Path) -> Map<String, Value> {
    let mut m = Map::new();
    for n in names(dir) {
        let p = dir.join(&n);
        if p.is_file() {
            if let Some(v) = read(&p) {
                m.insert(n, Value::String(v));
            }
        }
    }
    m
}

fn block_devices() -> Value {
    let mut m = Map::new();
    for name in names("/sys/block") {
        let d = Path::new("/sys/block").join(&name);
        m.insert(
            name.clone(),
            json!({
                "dev": read(d.join("dev")).map(|s| s.replace(':', ",")),
                "size_sectors": read(d.join("size")).and_then(|s| s.parse::<u64>().ok()),
                "queue": files(&d.join("queue")),
                "holders": names(d.join("holders")),
                "slaves": names(d.join("slaves")),
                // A loop device's file: the device under it is the one
                // whose file system holds the file.
                "backing_file": read(d.join("loop/backing_file")),
                // Mounts and holders name partitions (`vda1`) and
                // device-mapper names (`/dev/mapper/NAME`); the block
                // trace names the disk and `dm-N`.
                "partitions": partitions(&d),
                "dm_name": read(d.join("dm/name")),
            }),
        );
    }
    Value::Object(m)
}

/// A disk's partitions (`/sys/block/DISK/PART/partition` exists): name →
/// `{"dev": "MAJ,MIN"}`.
fn partitions(disk: &Path) -> Value {
    let mut m = Map::new();
    for name in names(disk) {
        let p = disk.join(&name);
        if p.join("partition").is_file() {
            m.insert(
                name,
                json!({"dev": read(p.join("dev")).map(|s| s.replace(':', ","))}),
            );
        }
    }
    Value::Object(m)
}

fn mounts() -> Value {
    let text = read("/proc/self/mounts").unwrap_or_default();
    Value::Array(
        text.lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() >= 4).then(
                    || json!({"device": f[0], "mountpoint": f[1], "fstype": f[2], "options": f[3]}),
                )
            })
            .collect(),
    )
}

/// The journal size of each mounted ext4 (the measured fsync stall on a
/// 4 MiB journal hinged on it), by device name as jbd2 names it (`loop0`
/// for `loop0-8`; `mounts` has the rest), from the file system's superblock:
/// the kernel shows it nowhere else. One buffered read of the superblock,
/// which the mounted file system keeps in the page cache: no I/O with 4 KiB
/// blocks, one 1 KiB read of block 0 with 1 KiB blocks (the page is not
/// whole in the cache). `dumpe2fs -h`, used before, read five blocks and
/// fsynced the device when it closed it: a write and a cache flush on the
/// device being measured, each time a snapshot was taken.
fn ext4_journals(mounts: &Value) -> Value {
    let mut m = Map::new();
    for mnt in mounts.as_array().into_iter().flatten() {
        let Some(device) = mnt["device"].as_str() else {
            continue;
        };
        if mnt["fstype"] != "ext4" || !device.starts_with("/dev/") {
            continue;
        }
        let name = Path::new(device)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if m.contains_key(&name) {
            continue;
        }
        let entry = match ext4_journal(Path::new(device)) {
            Ok((journal_bytes, block_size)) => json!({
                "journal_kib": journal_bytes / 1024,
                "block_size": block_size,
            }),
            Err(why) => json!({ "unreadable": format!("{device}: {why}") }),
        };
        m.insert(name, entry);
    }
    Value::Object(m)
}

/// An ext4 superblock's journal size (bytes) and block size, from the copy
/// of the journal inode's size the superblock keeps (`s_jnl_blocks`, as
/// e2fsprogs and the kernel's ext4_fs.h lay it out).
pub fn ext4_journal(device: &Path) -> Result<(u64, u64), String> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(device).map_err(|e| e.to_string())?;
    let mut sb = [0u8; 1024];
    f.read_exact_at(&mut sb, 1024).map_err(|e| e.to_string())?;
    ext4_journal_in(&sb)
}

fn ext4_journal_in(sb: &[u8; 1024]) -> Result<(u64, u64), String> {
    let u32_at = |o: usize| u32::from_le_bytes([sb[o], sb[o + 1], sb[o + 2], sb[o + 3]]);
    const MAGIC: u16 = 0xEF53;
    const HAS_JOURNAL: u32 = 0x4;
    const JNL_BACKUP_BLOCKS: u8 = 1;
    if u16::from_le_bytes([sb[0x38], sb[0x39]]) != MAGIC {
        return Err("no ext4 superblock".into());
    }
    let log_block = u32_at(0x18);
    if log_block > 6 {
        return Err(format!("block size 1024 << {log_block} in the superblock"));
    }
    let block_size = 1024u64 << log_block;
    if u32_at(0x5C) & HAS_JOURNAL == 0 {
        return Err("no journal".into());
    }
    if u32_at(0xE0) == 0 {
        return Err("an external journal (its size is on its own device)".into());
    }
    if sb[0xFD] != JNL_BACKUP_BLOCKS {
        return Err("no copy of the journal inode in the superblock".into());
    }
    // s_jnl_blocks[15] and [16]: the journal inode's i_size_high and i_size.
    let size = (u64::from(u32_at(0x10C + 15 * 4)) << 32) | u64::from(u32_at(0x10C + 16 * 4));
    Ok((size, block_size))
}

/// Cgroup I/O limits that are set: v2 `io.max` lines with a limit, v1
/// `blkio.throttle.*_device` lines, by cgroup path. The walk is bounded:
/// a machine may have thousands of cgroups.
fn cgroup_io_limits() -> Value {
    use super::cgroups::{limit_lines, walk, LIMIT_FILES};
    let mut out = Map::new();
    walk(Path::new("/sys/fs/cgroup"), 4096, 8, |dir| {
        let mut limits = Map::new();
        for f in LIMIT_FILES {
            let Some(text) = read(dir.join(f)) else {
                continue;
            };
            let set = limit_lines(&text);
            if !set.is_empty() {
                limits.insert(f.to_string(), Value::String(set.join("\n")));
            }
        }
        if !limits.is_empty() {
            out.insert(dir.display().to_string(), Value::Object(limits));
        }
        true
    });
    Value::Object(out)
}

fn jbd2() -> Value {
    let mut m = Map::new();
    for j in names("/proc/fs/jbd2") {
        if let Some(info) = read(Path::new("/proc/fs/jbd2").join(&j).join("info")) {
            m.insert(j, Value::String(info));
        }
    }
    Value::Object(m)
}

/// The kernel's own page-cache and reclaim counters (`/proc/vmstat`):
/// before and after a recording, their difference is the kernel's count
/// for the whole machine over it.
pub const VMSTAT: &[&str] = &[
    "pgpgin",
    "pgmajfault",
    "workingset_refault_file",
    "workingset_activate_file",
    "pgsteal_kswapd",
    "pgsteal_direct",
    "pgscan_kswapd",
    "pgscan_direct",
];

fn vmstat() -> Value {
    let text = read("/proc/vmstat").unwrap_or_default();
    let m: Map<String, Value> = text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(k, _)| VMSTAT.contains(k))
        .filter_map(|(k, v)| Some((k.to_string(), Value::from(v.trim().parse::<u64>().ok()?))))
        .collect();
    Value::Object(m)
}

fn sysctls(dir: &str, prefix: &str) -> Value {
    let mut m = Map::new();
    for n in names(dir) {
        if n.starts_with(prefix) {
            if let Some(v) = read(Path::new(dir).join(&n)) {
                m.insert(n, Value::String(v));
            }
        }
    }
    Value::Object(m)
}

/// Policy, RT priority, nice and allowed CPUs of one thread.
fn thread(pid: u32, tid: u32) -> Option<Value> {
    let base = Path::new("/proc")
        .join(pid.to_string())
        .join("task")
        .join(tid.to_string());
    let stat = read(base.join("stat"))?;
    // The name is in parentheses and may hold spaces: split after it.
    let close = stat.rfind(')')?;
    let comm = &stat[stat.find('(')? + 1..close];
    let rest: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    // Fields after the name start at 3 (state); nice is 19, rt_priority 40,
    // policy 41 (proc(5)).
    let field = |n: usize| rest.get(n - 3).copied();
    let status = read(base.join("status")).unwrap_or_default();
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim);
    let policy = match field(41).and_then(|p| p.parse::<u32>().ok()) {
        Some(0) => "SCHED_OTHER",
        Some(1) => "SCHED_FIFO",
        Some(2) => "SCHED_RR",
        Some(3) => "SCHED_BATCH",
        Some(5) => "SCHED_IDLE",
        Some(6) => "SCHED_DEADLINE",
        _ => "unknown",
    };
    Some(json!({
        "pid": pid,
        "tid": tid,
        "comm": comm,
        "policy": policy,
        "rt_priority": field(40).and_then(|v| v.parse::<u32>().ok()),
        "nice": field(19).and_then(|v| v.parse::<i32>().ok()),
        "cpus_allowed": cpus,
    }))
}

fn threads_of(pid: u32) -> Vec<Value> {
    names(format!("/proc/{pid}/task"))
        .iter()
        .filter_map(|t| t.parse().ok())
        .filter_map(|tid| thread(pid, tid))
        .collect()
}

/// Kernel threads: children of kthreadd (pid 2).
fn kernel_threads() -> Value {
    let mut out = Vec::new();
    for p in names("/proc") {
        let Ok(pid) = p.parse::<u32>() else { continue };
        let Some(stat) = read(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if pid == 2 || super::proc_files::parent(&stat) == Some(2) {
            out.extend(threads_of(pid));
        }
    }
    Value::Array(out)
}

fn irq_affinity() -> Value {
    let mut m = Map::new();
    for irq in names("/proc/irq") {
        if let Some(a) = read(Path::new("/proc/irq").join(&irq).join("smp_affinity_list")) {
            m.insert(irq, Value::String(a));
        }
    }
    Value::Object(m)
}

/// The workload's cgroup and its I/O controls (cgroup v2).
pub fn cgroup_of(pid: u32) -> Value {
    let Some(cg) = read(format!("/proc/{pid}/cgroup")) else {
        return Value::Null;
    };
    let path = cg
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(str::to_string);
    let root = read("/proc/self/mounts").and_then(|m| {
        m.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && f[2] == "cgroup2").then(|| f[1].to_string())
        })
    });
    let mut io = Map::new();
    if let (Some(p), Some(r)) = (&path, &root) {
        let dir = Path::new(r).join(p.trim_start_matches('/'));
        for f in [
            "io.max",
            "io.latency",
            "io.weight",
            "io.pressure",
            "io.stat",
        ] {
            if let Some(v) = read(dir.join(f)) {
                io.insert(f.to_string(), Value::String(v));
            }
        }
    }
    json!({"cgroup": path, "cgroup2_mount": root, "io": io})
}

/// The workload's threads and cgroup, sampled just after it started.
pub fn workload(pid: u32) -> Value {
    // Let the workload start its threads before sampling them.
    std::thread::sleep(std::time::Duration::from_millis(50));
    json!({"pid": pid, "threads": threads_of(pid), "cgroup": cgroup_of(pid)})
}

/// A recording's snapshot document: settings before, the workload's
/// sample, and settings now (after).
pub fn document(before: Value, workload: Value) -> Value {
    json!({"before": before, "workload": workload, "after": take()})
}

/// Everything, now.
pub fn take() -> Value {
    let mounts = mounts();
    json!({
        "taken_at_mono_ns": mono_ns(),
        // Wall-clock time and host name: to tell captures of many machines
        // and days apart (exported tables' columns).
        "taken_at_unix_ns": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
        "hostname": read("/proc/sys/kernel/hostname"),
        "kernel": {
            "release": read("/proc/sys/kernel/osrelease"),
            "version": read("/proc/sys/kernel/version"),
            "cmdline": read("/proc/cmdline"),
        },
        "cpus": {
            "online": read("/sys/devices/system/cpu/online"),
            "model": read("/proc/cpuinfo").and_then(|c| c.lines().find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))),
        },
        "block_devices": block_devices(),
        "ext4_journals": ext4_journals(&mounts),
        "mounts": mounts,
        "jbd2": jbd2(),
        "cgroup_io_limits": cgroup_io_limits(),
        "vm": sysctls("/proc/sys/vm", "dirty"),
        "vmstat": vmstat(),
        "sched": {
            "sched_rt_runtime_us": read("/proc/sys/kernel/sched_rt_runtime_us"),
            "sched_rt_period_us": read("/proc/sys/kernel/sched_rt_period_us"),
            "features": read("/sys/kernel/debug/sched/features"),
        },
        "kernel_threads": kernel_threads(),
        "irq_affinity": irq_affinity(),
        "proc": {
            "softirqs": read("/proc/softirqs"),
            "interrupts": read("/proc/interrupts"),
            "diskstats": read("/proc/diskstats"),
            "pressure_io": read("/proc/pressure/io"),
        },
    })
}

/// CLOCK_MONOTONIC in ns: the trace clock `mono` that captures use.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_of_this_machine() {
        let s = take();
        assert!(s["kernel"]["release"]
            .as_str()
            .is_some_and(|r| !r.is_empty()));
        // Every machine has at least one block device with queue settings.
        assert!(s["ext4_journals"].is_object());
        // Whatever this machine mounts, no ext4 journal is read by running
        // a program (dumpe2fs fsynced the device).
        for (dev, j) in s["ext4_journals"].as_object().unwrap() {
            assert!(
                j["journal_kib"].is_u64() || j["unreadable"].is_string(),
                "{dev}: {j}"
            );
        }
        let devs = s["block_devices"].as_object().unwrap();
        assert!(
            devs.values().any(|d| d["queue"]["nomerges"].is_string()),
            "{devs:?}"
        );
        let me = workload(std::process::id());
        assert!(me["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["policy"] == "SCHED_OTHER"));
    }

    /// Superblocks that are not what is looked for say so.
    #[test]
    fn a_superblock_without_a_journal_copy_says_why() {
        let mut sb = [0u8; 1024];
        assert_eq!(ext4_journal_in(&sb).unwrap_err(), "no ext4 superblock");
        sb[0x38..0x3A].copy_from_slice(&0xEF53u16.to_le_bytes());
        sb[0x18] = 2;
        assert_eq!(ext4_journal_in(&sb).unwrap_err(), "no journal");
        sb[0x5C] = 0x4;
        assert!(ext4_journal_in(&sb)
            .unwrap_err()
            .contains("external journal"));
        sb[0xE0] = 8;
        assert!(ext4_journal_in(&sb).unwrap_err().contains("no copy"));
        sb[0xFD] = 1;
        sb[0x10C + 16 * 4..0x10C + 17 * 4].copy_from_slice(&(4u32 << 20).to_le_bytes());
        assert_eq!(ext4_journal_in(&sb), Ok((4 << 20, 4096)));
        sb[0x18] = 40;
        assert!(ext4_journal_in(&sb).unwrap_err().contains("block size"));
    }
}
