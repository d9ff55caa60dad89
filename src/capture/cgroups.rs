//! Cgroups as the block layer sees them: which hierarchy holds the I/O
//! controller (v1 `blkio` or v2 `io`), the path of a cgroup id in it (the
//! id is the inode of its directory there), and whether writeback is
//! charged to the cgroup that dirtied the pages. Every walk is bounded: a
//! machine may have thousands of cgroups.

use crate::model::light::{keep_largest, LightCgroup, LightCgroups};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Directories visited at most by one walk, and how deep.
const MAX_DIRS: usize = 65_536;
const MAX_DEPTH: usize = 32;

/// Calls `f` on `root` and each directory under it, parents first, at
/// most `max_dirs` of them and `max_depth` deep; stops early when `f`
/// returns false. Symlinks (v1's cpu -> cpu,cpuacct) are not followed.
pub fn walk(root: &Path, max_dirs: usize, max_depth: usize, mut f: impl FnMut(&Path) -> bool) {
    let mut stack = vec![(root.to_path_buf(), 0usize)];
    let mut seen = 0;
    while let Some((dir, depth)) = stack.pop() {
        seen += 1;
        if seen > max_dirs || !f(&dir) {
            return;
        }
        if depth < max_depth {
            // The entry's type, not a stat per file: cgroup directories
            // hold dozens of files each.
            for e in fs::read_dir(&dir).into_iter().flatten().flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push((e.path(), depth + 1));
                }
            }
        }
    }
}

/// The files that hold a cgroup's I/O limits: v2's `io.max`, v1's
/// `blkio.throttle.*_device`.
pub const LIMIT_FILES: [&str; 5] = [
    "io.max",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
];

/// The lines of a limit file that set a limit: io.max lists every device
/// ("rbps=max wbps=max ..." is none), a v1 file only those with one (a
/// value of 0 removes it).
pub fn limit_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| {
            l.split_whitespace()
                .skip(1)
                .any(|kv| !kv.ends_with("=max") && kv.contains('='))
                || (!l.contains('=') && l.split_whitespace().nth(1).is_some_and(|v| v != "0"))
        })
        .collect()
}

/// Whether some cgroup of the I/O controller's hierarchy has an I/O
/// limit (blk-throttle holds bios only then). The walk stops at the
/// first, and is bounded like the others.
pub fn io_limits_set() -> bool {
    let Some(h) = io_hierarchy() else {
        return false;
    };
    let mut found = false;
    walk(&h.root, 4096, 8, |dir| {
        found = LIMIT_FILES
            .iter()
            .any(|f| fs::read_to_string(dir.join(f)).is_ok_and(|t| !limit_lines(&t).is_empty()));
        !found
    });
    found
}

/// A controller's hierarchy: the I/O controller's (whose cgroups the
/// block layer charges I/O to), the memory controller's.
#[derive(Clone, Debug, PartialEq)]
pub struct Hierarchy {
    /// Where it is mounted (`/sys/fs/cgroup/blkio`, `/sys/fs/cgroup`).
    pub root: PathBuf,
    /// cgroup v2 (the unified hierarchy) rather than v1's blkio.
    pub v2: bool,
}

/// The I/O controller's hierarchy, from /proc/cgroups (blkio's hierarchy
/// number: 0 when it sits on v2) and /proc/mounts; None when neither is
/// mounted.
pub fn io_hierarchy() -> Option<Hierarchy> {
    hierarchy("blkio")
}

/// The memory controller's hierarchy, found the same way.
pub fn memory_hierarchy() -> Option<Hierarchy> {
    hierarchy("memory")
}

fn hierarchy(v1_name: &str) -> Option<Hierarchy> {
    let cgroups = fs::read_to_string("/proc/cgroups").unwrap_or_default();
    let mounts = fs::read_to_string("/proc/mounts").ok()?;
    hierarchy_of(v1_name, &cgroups, &mounts)
}

fn hierarchy_of(v1_name: &str, cgroups: &str, mounts: &str) -> Option<Hierarchy> {
    let on_v1 = cgroups.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 4 && f[0] == v1_name && f[1] != "0" && f[3] == "1"
    });
    let mount = |want: &dyn Fn(&[&str]) -> bool| {
        mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && want(&f)).then(|| PathBuf::from(unescape_mount(f[1])))
        })
    };
    if on_v1 {
        let root = mount(&|f| f[2] == "cgroup" && f[3].split(',').any(|o| o == v1_name))?;
        return Some(Hierarchy { root, v2: false });
    }
    let root = mount(&|f| f[2] == "cgroup2")?;
    Some(Hierarchy { root, v2: true })
}

/// /proc/mounts writes a space as `\040` (and tab, newline, backslash).
fn unescape_mount(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

impl Hierarchy {
    /// Whether the kernel charges a writeback bio to the cgroup that
    /// dirtied its pages: cgroup v2 with both the memory and the io
    /// controllers. Otherwise the flusher's writes are charged to the
    /// root cgroup, and a writer's own cgroup shows only what it wrote
    /// back itself (fsync, O_SYNC, O_DIRECT).
    pub fn writeback_charged(&self) -> bool {
        self.v2
            && fs::read_to_string(self.root.join("cgroup.subtree_control")).is_ok_and(|c| {
                let c: Vec<&str> = c.split_whitespace().collect();
                c.contains(&"io") && c.contains(&"memory")
            })
    }

    /// The paths (from the hierarchy's root: `/`, `/system.slice/x`) of
    /// the cgroup ids asked for that still exist; the walk stops when all
    /// are found.
    pub fn paths(&self, ids: &BTreeSet<u64>) -> BTreeMap<u64, String> {
        let mut out = BTreeMap::new();
        if ids.is_empty() {
            return out;
        }
        walk(&self.root, MAX_DIRS, MAX_DEPTH, |dir| {
            if let Ok(m) = fs::metadata(dir) {
                if ids.contains(&m.ino()) {
                    let rel = dir.strip_prefix(&self.root).unwrap_or(dir);
                    out.insert(m.ino(), format!("/{}", rel.display()));
                }
            }
            out.len() < ids.len()
        });
        out
    }
}

/// A capture's per-cgroup table: the `keep` largest entries with their
/// paths, the rest summed, and how this machine charges writeback.
pub fn table(entries: Vec<LightCgroup>, keep: usize) -> LightCgroups {
    let (mut top, rest) = keep_largest(entries, keep);
    let hierarchy = io_hierarchy();
    if let Some(h) = &hierarchy {
        let ids: BTreeSet<u64> = top.iter().map(|c| c.id).filter(|&id| id != 0).collect();
        let paths = h.paths(&ids);
        for c in &mut top {
            c.path = paths.get(&c.id).cloned();
        }
    }
    LightCgroups {
        counted: true,
        hierarchy: hierarchy
            .as_ref()
            .map(|h| h.root.display().to_string())
            .unwrap_or_default(),
        writeback_charged: hierarchy.as_ref().is_some_and(Hierarchy::writeback_charged),
        top,
        rest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTS_HYBRID: &str = "\
tmpfs /sys/fs/cgroup tmpfs rw 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";

    #[test]
    fn blkio_on_a_v1_hierarchy_is_found_there_else_on_v2() {
        let v1 = "#subsys_name\thierarchy\tnum_cgroups\tenabled\nblkio\t7\t1\t1\n";
        assert_eq!(
            hierarchy_of("blkio", v1, MOUNTS_HYBRID),
            Some(Hierarchy {
                root: "/sys/fs/cgroup/blkio".into(),
                v2: false
            })
        );
        let v2 = "blkio\t0\t40\t1\n";
        assert_eq!(
            hierarchy_of("blkio", v2, MOUNTS_HYBRID),
            Some(Hierarchy {
                root: "/sys/fs/cgroup/unified".into(),
                v2: true
            })
        );
        // A kernel without v1 lists no blkio at all.
        let pure = "cgroup2 /sys/fs/cgroup\\040x cgroup2 rw 0 0\n";
        assert_eq!(
            hierarchy_of("blkio", "", pure).map(|h| h.root),
            Some(PathBuf::from("/sys/fs/cgroup x"))
        );
        assert_eq!(hierarchy_of("blkio", "", "proc /proc proc rw 0 0\n"), None);
        // The memory controller's the same way: on v1 where it is mounted.
        let memory = "memory\t4\t55\t1\nblkio\t7\t1\t1\n";
        let mounts = format!("{MOUNTS_HYBRID}cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n");
        assert_eq!(
            hierarchy_of("memory", memory, &mounts).map(|h| (h.root, h.v2)),
            Some((PathBuf::from("/sys/fs/cgroup/memory"), false))
        );
        assert_eq!(
            hierarchy_of("memory", "memory\t0\t1\t1\n", &mounts).map(|h| h.v2),
            Some(true)
        );
    }

    #[test]
    fn ids_resolve_to_paths_from_the_root_and_the_walk_is_bounded() {
        let t = tempfile::tempdir().unwrap();
        fs::create_dir_all(t.path().join("a/b")).unwrap();
        fs::create_dir_all(t.path().join("c")).unwrap();
        let ino = |p: &str| fs::metadata(t.path().join(p)).unwrap().ino();
        let h = Hierarchy {
            root: t.path().into(),
            v2: true,
        };
        let want: BTreeSet<u64> = [ino(""), ino("a/b"), ino("c"), u64::MAX].into();
        let got = h.paths(&want);
        assert_eq!(got.get(&ino("")).map(String::as_str), Some("/"));
        assert_eq!(got.get(&ino("a/b")).map(String::as_str), Some("/a/b"));
        assert_eq!(got.get(&ino("c")).map(String::as_str), Some("/c"));
        assert_eq!(got.len(), 3, "an id with no directory has no path");
        let mut visited = 0;
        walk(t.path(), 2, MAX_DEPTH, |_| {
            visited += 1;
            true
        });
        assert_eq!(visited, 2);
        assert!(!h.writeback_charged(), "no io or memory controller here");
        assert!(limit_lines("7:0 rbps=max wbps=max riops=max wiops=max\n").is_empty());
        assert_eq!(
            limit_lines("7:0 rbps=max riops=100\n8:0 rbps=max\n"),
            ["7:0 rbps=max riops=100"]
        );
        assert_eq!(limit_lines("7:0 100\n8:0 0\n"), ["7:0 100"]);
    }
}
