//! The memory cgroups the recorded command ran in, and the limits set on
//! them and their ancestors: what bounds the page cache the workload may
//! use (a cgroup at its limit reclaims its own pages, the cache's first).
//! Read while the command runs, from `/proc/PID/cgroup`, as its mappings
//! are: a command may move itself into a cgroup after it starts.

use super::cgroups::{memory_hierarchy, Hierarchy};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

/// Cgroups kept at most (the command's and their ancestors).
const MAX_CGROUPS: usize = 64;

/// v1's limit and its memory+swap limit (which the first may not
/// exceed), v2's hard limit and its throttling one.
const LIMIT_FILES: [&str; 4] = [
    "memory.memsw.limit_in_bytes",
    "memory.limit_in_bytes",
    "memory.max",
    "memory.high",
];

/// A value at or above this is no limit: v1 shows "unlimited" as the
/// largest page counter in bytes (9223372036854771712 with 4 KiB pages).
const UNLIMITED: u64 = 1 << 62;

#[derive(Default)]
pub struct MemoryCgroups {
    hierarchy: Option<Option<Hierarchy>>,
    /// Directories whose limits were read.
    read: BTreeSet<PathBuf>,
    /// `{cgroup, file, value, own}` of each limit set.
    limits: Vec<Value>,
}

impl MemoryCgroups {
    /// Reads the limits of the memory cgroups the processes `tree` (a
    /// command and its descendants, `proc_files::process_tree`) are in now
    /// (and of those cgroups' ancestors), where not read yet.
    pub fn sample(&mut self, tree: &[u32]) {
        for &pid in tree {
            self.sample_one(pid);
        }
    }

    /// The same for the process `pid` alone: one file read when its
    /// cgroup is known already, cheap enough for every look at it.
    pub fn sample_one(&mut self, pid: u32) {
        let Some(h) = self.hierarchy.get_or_insert_with(memory_hierarchy).as_ref() else {
            return;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            return;
        };
        let Some(dir) = cgroup_path(&text, h.v2).and_then(|p| under(&h.root, p)) else {
            return;
        };
        let mut own = true;
        let mut at = Some(dir.as_path());
        while let Some(d) = at.filter(|d| d.starts_with(&h.root) && *d != h.root) {
            if self.read.contains(d) {
                // Its ancestors were read with it.
                return;
            }
            if self.read.len() >= MAX_CGROUPS {
                return;
            }
            self.read.insert(d.to_path_buf());
            self.limits.extend(limits_of(d, own));
            own = false;
            at = d.parent();
        }
    }

    /// `[{cgroup, file, value, own}]`, as the snapshot keeps them: `own`
    /// when the command's processes were in that cgroup, not above it.
    pub fn to_json(&self) -> Value {
        Value::Array(self.limits.clone())
    }
}

/// The limits set in the cgroup directory `dir`.
fn limits_of(dir: &Path, own: bool) -> Vec<Value> {
    LIMIT_FILES
        .iter()
        .filter_map(|f| {
            let value = std::fs::read_to_string(dir.join(f)).ok()?;
            let value = value.trim();
            is_limit(value).then(|| {
                json!({"cgroup": dir.display().to_string(), "file": f, "value": value, "own": own})
            })
        })
        .collect()
}

/// Whether a limit file's value sets a limit.
pub fn is_limit(value: &str) -> bool {
    value.parse::<u64>().is_ok_and(|v| v < UNLIMITED)
}

/// The memory cgroup's path in a `/proc/PID/cgroup` text: on v1 the line
/// whose controllers include `memory`, on v2 the `0::` line.
fn cgroup_path(text: &str, v2: bool) -> Option<&str> {
    text.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (id, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let ours = if v2 {
            id == "0" && controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == "memory")
        };
        ours.then_some(path)
    })
}

/// `path` (`/a/b`) under the hierarchy's `root`; none when it leaves it.
fn under(root: &Path, path: &str) -> Option<PathBuf> {
    let rel = Path::new(path.trim_start_matches('/'));
    rel.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| root.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memory_line_of_each_version_and_no_way_out_of_the_hierarchy() {
        let v1 = "12:pids:/x\n4:memory:/iosleuth-lab-1\n0::/user.slice\n";
        assert_eq!(cgroup_path(v1, false), Some("/iosleuth-lab-1"));
        assert_eq!(cgroup_path(v1, true), Some("/user.slice"));
        assert_eq!(cgroup_path("3:cpu,memory:/a:b\n", false), Some("/a:b"));
        assert_eq!(cgroup_path("1:name=systemd:/s\n", false), None);
        let root = Path::new("/sys/fs/cgroup/memory");
        assert_eq!(
            under(root, "/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/a/b"))
        );
        assert_eq!(under(root, "/"), Some(root.to_path_buf()));
        assert_eq!(under(root, "/a/../../etc"), None);
    }

    #[test]
    fn unlimited_is_no_limit_in_either_version() {
        assert!(is_limit("12582912"));
        assert!(!is_limit("9223372036854771712"));
        assert!(!is_limit("max"));
        assert!(!is_limit(""));
    }

    #[test]
    fn limits_read_from_a_cgroup_directory_and_its_ancestors() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("a/b");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("memory.max"), "12582912\n").unwrap();
        std::fs::write(dir.join("memory.high"), "max\n").unwrap();
        std::fs::write(t.path().join("a/memory.max"), "max\n").unwrap();
        let got = limits_of(&dir, true);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["file"], "memory.max");
        assert_eq!(got[0]["value"], "12582912");
        assert_eq!(got[0]["own"], true);
        assert!(limits_of(&t.path().join("a"), false).is_empty());
    }
}
