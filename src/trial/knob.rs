//! A setting `iosleuth try` may change: a sysctl or a file under /sys,
//! read, written and read back as the kernel shows it.
//!
//! Two kinds of file: one value (`nomerges`, `vm/dirty_ratio`; the I/O
//! scheduler file lists them all and brackets the one in use), or one line
//! per device (a cgroup's `io.max`, cgroup v1's `blkio.throttle.*_device`),
//! where the value starts with the device (`7:0 rbps=max ...`) and only
//! that device's line is read, changed and restored.
//!
//! And a thread's scheduling settings (`task/TID/policy`,
//! `task/TID/affinity`, `task/TID/nice`), changed by system call as
//! `chrt -p`, `taskset -p` and `renice -p` change them.
//!
//! And a mount option a remount changes (`mount:/data` set to
//! `dioread_lock`), one family of options at a time.

use crate::capture::mount_option::MountOption;
use crate::capture::task_setting::{self, Task, TaskAttr};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    /// As the user (or the finding) named it.
    pub name: String,
    pub file: PathBuf,
    /// `Some(MAJ:MIN)` for a per-device line file: the device the value
    /// names.
    pub device_line: Option<String>,
    /// A thread's setting instead of a file (`file` is then its /proc
    /// directory, for the plan to show).
    pub task: Option<(Task, TaskAttr)>,
    /// A mount's option instead of a file (`file` is then its mount
    /// point).
    pub mount: Option<MountOption>,
}

/// `task/TID/policy` → the thread and the setting.
fn task_name(name: &str) -> Option<Result<(Task, TaskAttr), KnobError>> {
    let rest = name.strip_prefix("task/")?;
    let (tid, attr) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(attr) = TaskAttr::parse(attr) else {
        return Some(Err(format!(
            "{name}: a thread's setting is task/TID/policy, task/TID/affinity or task/TID/nice"
        )));
    };
    let Ok(tid) = tid.parse::<u32>() else {
        return Some(Err(format!("{name}: {tid:?} is not a thread id")));
    };
    Some(
        Task::find(tid)
            .map(|t| (t, attr))
            .map_err(|e| format!("{name}: {e}")),
    )
}

/// Why a knob cannot be used, said with its name.
pub type KnobError = String;

impl Knob {
    /// Resolves `name` (a sysctl such as `vm.dirty_ratio`, or a file
    /// under /sys or /proc/sys) for the value `value`. Refuses a name that
    /// is neither, a file that does not exist, and a per-device file whose
    /// value names no device.
    pub fn resolve(name: &str, value: &str) -> Result<Knob, KnobError> {
        if let Some(task) = task_name(name) {
            let (t, attr) = task?;
            task_setting::shown(attr, value).map_err(|e| format!("{name}: {e}"))?;
            return Ok(Knob {
                name: name.to_string(),
                file: PathBuf::from(format!("/proc/{}", t.tid)),
                device_line: None,
                task: Some((t, attr)),
                mount: None,
            });
        }
        if let Some(target) = name.strip_prefix("mount:") {
            let m =
                MountOption::find(Path::new(target), value).map_err(|e| format!("{name}: {e}"))?;
            return Ok(Knob {
                name: name.to_string(),
                file: PathBuf::from(target),
                device_line: None,
                task: None,
                mount: Some(m),
            });
        }
        let file = if name.starts_with('/') {
            let p = PathBuf::from(name);
            let under = |root: &str| p.starts_with(root);
            if !(under("/sys/") || under("/proc/sys/"))
                || name.contains("/../")
                || name.ends_with("/..")
            {
                return Err(format!(
                    "{name}: not a setting: try changes files under /sys or /proc/sys, or a sysctl by its name"
                ));
            }
            p
        } else {
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
                && !name.contains("..");
            if !ok {
                return Err(format!(
                    "{name}: not a sysctl name (such as vm.dirty_ratio) nor a path"
                ));
            }
            PathBuf::from("/proc/sys").join(name.replace('.', "/"))
        };
        if !file.is_file() {
            return Err(format!(
                "{name}: no such setting ({} does not exist)",
                file.display()
            ));
        }
        let device_line = if is_per_device(&file) {
            let dev = value.split_whitespace().next().unwrap_or("");
            if !is_maj_min(dev) {
                return Err(format!(
                    "{name}: a line per device: the value must start with the device as MAJ:MIN (\"7:0 ...\"), not {value:?}"
                ));
            }
            Some(dev.to_string())
        } else {
            None
        };
        Ok(Knob {
            name: name.to_string(),
            file,
            device_line,
            task: None,
            mount: None,
        })
    }

    /// Its value now, as the kernel shows it: the selected entry of a
    /// list (`[mq-deadline] none` → `mq-deadline`), the device's line of
    /// a per-device file (empty when the device has none).
    pub fn read(&self) -> Result<String, KnobError> {
        if let Some((t, attr)) = &self.task {
            return t.read(*attr).map_err(|e| format!("{}: {e}", self.name));
        }
        if let Some(m) = &self.mount {
            return m.read().map_err(|e| format!("{}: {e}", self.name));
        }
        let text = std::fs::read_to_string(&self.file)
            .map_err(|e| format!("{}: cannot read {}: {e}", self.name, self.file.display()))?;
        Ok(match &self.device_line {
            Some(dev) => text
                .lines()
                .find(|l| l.split_whitespace().next() == Some(dev))
                .unwrap_or("")
                .trim()
                .to_string(),
            None => shown_value(&text),
        })
    }

    /// Writes `value`; the kernel's refusal (EINVAL and the like) is said
    /// with the knob and the value.
    pub fn write(&self, value: &str) -> Result<(), KnobError> {
        if let Some((t, attr)) = &self.task {
            return t
                .write(*attr, value)
                .map_err(|e| format!("{}: the kernel refused {value:?}: {e}", self.name));
        }
        if let Some(m) = &self.mount {
            return m
                .write(value)
                .map_err(|e| format!("{}: the kernel refused {value:?}: {e}", self.name));
        }
        std::fs::write(&self.file, value)
            .map_err(|e| format!("{}: the kernel refused {value:?}: {e}", self.name))
    }

    /// What to write to put back `was` (a value `read` returned): for a
    /// per-device line that did not exist, the line that lifts the limit.
    pub fn restore_value(&self, was: &str) -> String {
        match &self.device_line {
            Some(dev) if was.is_empty() => {
                if self.file.file_name().is_some_and(|n| n == "io.max") {
                    format!("{dev} rbps=max wbps=max riops=max wiops=max")
                } else {
                    format!("{dev} 0")
                }
            }
            _ => was.to_string(),
        }
    }

    /// Whether the value read back is `wanted` (compared as the kernel
    /// shows values: lists by their selected entry, lines by their words,
    /// a lifted per-device limit as no line).
    pub fn shows(&self, read: &str, wanted: &str) -> bool {
        let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        if let Some((_, attr)) = &self.task {
            return task_setting::canonical(*attr, read) == task_setting::canonical(*attr, wanted);
        }
        if self.mount.is_some() {
            return MountOption::shows(read, wanted);
        }
        if self.device_line.is_some() {
            let lifted = |s: &str| {
                let w = words(s);
                w.len() <= 1 || w[1..].iter().all(|x| x == "0" || x.ends_with("=max"))
            };
            return words(read) == words(wanted) || (lifted(read) && lifted(wanted));
        }
        if is_memory_limit(&self.file) {
            let read = read.trim();
            // Lifted: v1 takes -1 and shows its largest counter, v2
            // takes and shows `max`.
            if matches!(wanted.trim(), "-1" | "max") {
                return !crate::capture::memory_cgroups::is_limit(read);
            }
            // A size (`512M`) is shown in bytes, rounded down to pages.
            if let (Some(w), Ok(r)) = (memory_bytes(wanted), read.parse::<u64>()) {
                // SAFETY: sysconf has no preconditions.
                let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
                    .unwrap_or(4096)
                    .max(1);
                return r == w - w % page;
            }
        }
        words(read) == words(&shown_value(wanted))
    }

    /// The memory cgroup this knob is a limit of (its directory), when it
    /// is one's.
    pub fn memory_cgroup(&self) -> Option<&Path> {
        is_memory_limit(&self.file)
            .then(|| self.file.parent())
            .flatten()
    }

    /// The block device the knob belongs to, by name or MAJ:MIN, when it
    /// is one's (`/sys/block/NAME/...`, `/sys/dev/block/M:N/...`, or a
    /// per-device line).
    pub fn device(&self) -> Option<String> {
        if let Some(m) = &self.mount {
            return Some(m.device.clone());
        }
        if let Some(d) = &self.device_line {
            return Some(d.clone());
        }
        let rest = self
            .file
            .strip_prefix("/sys/block")
            .or_else(|_| self.file.strip_prefix("/sys/dev/block"))
            .ok()?;
        rest.iter().next().map(|c| c.to_string_lossy().into_owned())
    }

    /// The knobs the kernel changes when this one is written: each of
    /// vm.dirty_ratio and vm.dirty_bytes (and their background pair)
    /// zeroes the other (mm/page-writeback.c's handlers), so putting one
    /// back must put the other back too.
    pub fn partners(&self) -> Vec<Knob> {
        const PAIRS: [(&str, &str); 2] = [
            ("vm/dirty_ratio", "vm/dirty_bytes"),
            ("vm/dirty_background_ratio", "vm/dirty_background_bytes"),
        ];
        let Ok(rel) = self.file.strip_prefix("/proc/sys") else {
            return Vec::new();
        };
        let rel = rel.to_string_lossy();
        PAIRS
            .iter()
            .filter_map(|&(a, b)| match rel.as_ref() {
                r if r == a => Some(b),
                r if r == b => Some(a),
                _ => None,
            })
            .map(|other| Knob {
                name: other.replace('/', "."),
                file: PathBuf::from("/proc/sys").join(other),
                device_line: None,
                task: None,
                mount: None,
            })
            .collect()
    }

    /// A sysctl (global, no device).
    pub fn is_sysctl(&self) -> bool {
        self.task.is_none() && self.mount.is_none() && self.file.starts_with("/proc/sys")
    }

    /// The thread whose setting this is.
    pub fn thread(&self) -> Option<u32> {
        self.task.map(|(t, _)| t.tid)
    }
}

/// `[mq-deadline] none` → `mq-deadline`; any other value trimmed.
fn shown_value(text: &str) -> String {
    let t = text.trim();
    match (t.find('['), t.find(']')) {
        (Some(a), Some(b)) if a < b => t[a + 1..b].to_string(),
        _ => t.to_string(),
    }
}

/// A memory size as the cgroup files take it: bytes, or with a K, M, G
/// or T suffix (powers of 1024, as the kernel's memparse reads them).
fn memory_bytes(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, shift) = match s.char_indices().last()? {
        (i, c) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return None,
            };
            (&s[..i], shift)
        }
        _ => (s, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1u64 << shift)
}

fn is_memory_limit(file: &Path) -> bool {
    file.starts_with("/sys/fs/cgroup")
        && file.file_name().is_some_and(|n| {
            matches!(
                n.to_str(),
                Some(
                    "memory.max"
                        | "memory.high"
                        | "memory.limit_in_bytes"
                        | "memory.memsw.limit_in_bytes"
                )
            )
        })
}

fn is_per_device(file: &Path) -> bool {
    let name = file
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    name == "io.max" || (name.starts_with("blkio.throttle.") && name.ends_with("_device"))
}

fn is_maj_min(s: &str) -> bool {
    let mut it = s.split(':');
    matches!((it.next(), it.next(), it.next()), (Some(a), Some(b), None)
        if !a.is_empty() && !b.is_empty() && a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_memory_limit_reads_back_lifted_or_in_bytes() {
        let k = Knob {
            name: "m".into(),
            file: "/sys/fs/cgroup/memory/x/memory.limit_in_bytes".into(),
            device_line: None,
            task: None,
            mount: None,
        };
        assert!(k.shows("9223372036854771712", "-1"));
        assert!(k.shows("max", "max"));
        assert!(!k.shows("12582912", "-1"));
        assert!(k.shows("536870912", "512M"));
        assert!(k.shows("536870912", "536870912"));
        assert!(k.shows("8192", "10000"), "rounded down to pages");
        assert!(!k.shows("9223372036854771712", "512M"));
        assert_eq!(memory_bytes("2g"), Some(2 << 30));
        assert_eq!(memory_bytes("1X"), None);
        assert_eq!(memory_bytes("99999999999T"), None);
    }
    use super::*;

    #[test]
    fn names_resolve_to_files_and_others_are_refused() {
        let k = Knob::resolve("vm.dirty_ratio", "20").unwrap();
        assert_eq!(k.file, PathBuf::from("/proc/sys/vm/dirty_ratio"));
        assert!(k.is_sysctl() && k.device().is_none());
        for bad in [
            "/etc/passwd",
            "/sys/../etc/passwd",
            "vm..x",
            "vm.dirty ratio",
            "",
        ] {
            assert!(Knob::resolve(bad, "1").is_err(), "{bad}");
        }
        let e = Knob::resolve("vm.no_such_knob", "1").unwrap_err();
        assert!(e.contains("no such setting"), "{e}");
    }

    #[test]
    fn lists_show_their_selected_entry() {
        assert_eq!(shown_value("[mq-deadline] kyber none\n"), "mq-deadline");
        assert_eq!(shown_value("none [bfq]"), "bfq");
        assert_eq!(shown_value(" 128\n"), "128");
    }

    #[test]
    fn per_device_lines_name_their_device_and_lift_when_absent() {
        let k = Knob {
            name: "/sys/fs/cgroup/a/io.max".into(),
            file: "/sys/fs/cgroup/a/io.max".into(),
            device_line: Some("7:0".into()),
            task: None,
            mount: None,
        };
        assert_eq!(
            k.restore_value(""),
            "7:0 rbps=max wbps=max riops=max wiops=max"
        );
        assert_eq!(
            k.restore_value("7:0 rbps=4096 wbps=max riops=max wiops=max"),
            "7:0 rbps=4096 wbps=max riops=max wiops=max"
        );
        assert!(k.shows("", "7:0 rbps=max wbps=max riops=max wiops=max"));
        assert!(!k.shows("7:0 rbps=4096 wbps=max riops=max wiops=max", ""));
        assert_eq!(k.device().as_deref(), Some("7:0"));
        assert!(
            is_maj_min("259:12") && !is_maj_min("7:") && !is_maj_min("sda") && !is_maj_min("1:2:3")
        );
        let v1 = Knob {
            device_line: Some("7:0".into()),
            file: "/sys/fs/cgroup/blkio/x/blkio.throttle.read_bps_device".into(),
            ..k
        };
        assert_eq!(v1.restore_value(""), "7:0 0");
        assert!(is_per_device(&v1.file));
    }

    #[test]
    fn the_dirty_limits_come_in_pairs() {
        let k = Knob::resolve("vm.dirty_ratio", "20").unwrap();
        let p = k.partners();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].file, PathBuf::from("/proc/sys/vm/dirty_bytes"));
        assert_eq!(p[0].name, "vm.dirty_bytes");
        let b = Knob::resolve("vm.dirty_background_bytes", "0").unwrap();
        assert_eq!(b.partners()[0].name, "vm.dirty_background_ratio");
        assert!(Knob::resolve("vm.swappiness", "1")
            .unwrap()
            .partners()
            .is_empty());
    }

    #[test]
    fn a_threads_setting_is_named_by_its_id() {
        let me = unsafe { libc::gettid() } as u32;
        let k = Knob::resolve(&format!("task/{me}/affinity"), "0").unwrap();
        assert_eq!(k.thread(), Some(me));
        assert!(!k.is_sysctl() && k.device().is_none());
        assert!(k.shows("0-1", "1,0") && !k.shows("0", "0-1"));
        let now = k.read().unwrap();
        assert_eq!(k.restore_value(&now), now);
        let p = Knob::resolve(&format!("task/{me}/policy"), "SCHED_OTHER").unwrap();
        assert!(p.shows("other", "SCHED_OTHER"));
        for (name, value, says) in [
            (format!("task/{me}/weight"), "0", "task/TID/policy"),
            (format!("task/{me}/nice"), "-21", "-20 to 19"),
            ("task/x/policy".to_string(), "other", "not a thread id"),
            (format!("task/{me}/policy"), "fifo", "needs a priority"),
            (format!("task/{me}/affinity"), "a", "not a CPU list"),
            ("task/4294967295/policy".to_string(), "other", "no thread"),
        ] {
            let e = Knob::resolve(&name, value).unwrap_err();
            assert!(e.contains(says) && e.starts_with(&name), "{name}: {e}");
        }
    }

    #[test]
    fn a_queue_file_belongs_to_its_device() {
        let k = Knob {
            name: "x".into(),
            file: "/sys/block/loop3/queue/nomerges".into(),
            device_line: None,
            task: None,
            mount: None,
        };
        assert_eq!(k.device().as_deref(), Some("loop3"));
        assert!(k.shows("2", "2\n") && !k.shows("2", "0"));
    }
}
