//! What a recording session changed, written down before it changes it,
//! so that a session killed with SIGKILL can be undone by the next one
//! (`iosleuth record --cleanup`, also run at the start of every record).

use super::mount_option::MountOption;
use super::task_setting::{Task, TaskAttr};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A thread's setting changed, and the value that puts it back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TaskEntry {
    pub task: Task,
    pub attr: TaskAttr,
    pub old: String,
}

/// A mount option changed by a remount, and the word that puts it back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MountEntry {
    pub option: MountOption,
    pub old: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Journal {
    pub pid: u32,
    /// A private instance to remove.
    pub instance: Option<PathBuf>,
    /// Files and their original values, in the order they were changed.
    pub knobs: Vec<(PathBuf, String)>,
    /// Threads' scheduling settings and their original values (`try`).
    #[serde(default)]
    pub tasks: Vec<TaskEntry>,
    /// Mount options and their original words (`try`).
    #[serde(default)]
    pub mounts: Vec<MountEntry>,
    #[serde(skip)]
    file: Option<PathBuf>,
}

fn dir() -> PathBuf {
    super::tracefs::state_dir()
}

/// The file that marks a process's scratch directory as iosleuth's own:
/// only a directory holding it is ever removed by `record --cleanup`.
const SCRATCH_MARKER: &str = ".iosleuth-scratch";

/// A fresh scratch directory of this process under the temporary
/// directory (`iosleuth-WHAT-PID`), marked so that `record --cleanup`
/// removes it once the process is gone, even after a SIGKILL.
pub fn scratch_dir(what: &str) -> std::io::Result<PathBuf> {
    let p = std::env::temp_dir().join(format!("iosleuth-{what}-{}", std::process::id()));
    if p.join(SCRATCH_MARKER).exists() {
        std::fs::remove_dir_all(&p)?;
    }
    std::fs::create_dir(&p)?;
    std::fs::write(p.join(SCRATCH_MARKER), b"")?;
    Ok(p)
}

/// The kernel's largest process id (PID_MAX_LIMIT on 64-bit machines).
const PID_MAX_LIMIT: u32 = 4 << 20;

/// The scratch directories in `tmp` of processes gone: removed.
fn remove_stale_scratch(tmp: &Path, done: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("iosleuth-")
            .and_then(|rest| rest.rsplit('-').next())
            .and_then(|p| p.parse::<u32>().ok())
            .filter(|pid| (1..=PID_MAX_LIMIT).contains(pid))
        else {
            continue;
        };
        let p = e.path();
        if alive(pid) || !p.join(SCRATCH_MARKER).is_file() {
            continue;
        }
        if std::fs::remove_dir_all(&p).is_ok() {
            done.push(format!("removed scratch directory {}", p.display()));
        }
    }
}

pub fn alive(pid: u32) -> bool {
    // Signal 0 checks existence; EPERM still means it exists.
    let r = unsafe { libc::kill(pid as i32, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl Journal {
    pub fn new() -> Journal {
        let d = dir();
        let _ = std::fs::create_dir_all(&d);
        Journal {
            pid: std::process::id(),
            instance: None,
            knobs: Vec::new(),
            tasks: Vec::new(),
            mounts: Vec::new(),
            file: Some(d.join(format!("{}.json", super::unique_name()))),
        }
    }

    /// Persists the journal (called before each change it records).
    pub fn save(&self) {
        if let Some(f) = &self.file {
            if let Ok(s) = serde_json::to_string(self) {
                let tmp = f.with_extension("tmp");
                if std::fs::write(&tmp, s).is_ok() {
                    let _ = std::fs::rename(&tmp, f);
                }
            }
        }
    }

    pub fn record_knob(&mut self, path: &Path, old: &str) {
        self.knobs.push((path.to_path_buf(), old.to_string()));
        self.save();
    }

    /// A knob put back by its owner: no longer to undo.
    pub fn forget_knob(&mut self, path: &Path) {
        if let Some(i) = self.knobs.iter().rposition(|(p, _)| p == path) {
            self.knobs.remove(i);
            self.save();
        }
    }

    pub fn record_task(&mut self, task: Task, attr: TaskAttr, old: &str) {
        self.tasks.push(TaskEntry {
            task,
            attr,
            old: old.to_string(),
        });
        self.save();
    }

    /// A thread's setting put back by its owner.
    pub fn forget_task(&mut self, task: Task, attr: TaskAttr) {
        if let Some(i) = self
            .tasks
            .iter()
            .rposition(|e| e.task == task && e.attr == attr)
        {
            self.tasks.remove(i);
            self.save();
        }
    }

    pub fn record_mount(&mut self, option: &MountOption, old: &str) {
        self.mounts.push(MountEntry {
            option: option.clone(),
            old: old.to_string(),
        });
        self.save();
    }

    /// A mount option put back by its owner.
    pub fn forget_mount(&mut self, option: &MountOption) {
        if let Some(i) = self.mounts.iter().rposition(|e| &e.option == option) {
            self.mounts.remove(i);
            self.save();
        }
    }

    pub fn record_instance(&mut self, path: &Path) {
        self.instance = Some(path.to_path_buf());
        self.save();
    }

    /// The session ended cleanly: nothing to undo.
    pub fn close(&mut self) {
        if let Some(f) = self.file.take() {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Drop for Journal {
    /// Dropped after the guards it records have restored their values
    /// (declared before them, so dropped after): nothing is left to undo.
    /// Only SIGKILL (or a power cut) leaves the file behind.
    fn drop(&mut self) {
        self.close();
    }
}

/// Removes an instance: events off first, or the kernel refuses.
pub fn remove_instance(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    let _ = std::fs::write(dir.join("tracing_on"), "0");
    let _ = std::fs::write(dir.join("events/enable"), "0");
    // The kernel refuses while any file of the instance is open; a reader
    // that is just closing is worth a short wait.
    for _ in 0..100 {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            other => return other,
        }
    }
    std::fs::remove_dir(dir)
}

/// Undoes what dead sessions left: restores their knobs (last change first)
/// and removes their instances, including `iosleuth-PID-*` instances of
/// dead processes that never got as far as a journal. Returns one line per
/// thing undone.
pub fn cleanup_stale(tracefs_root: Option<&Path>) -> Vec<String> {
    let mut done = Vec::new();
    // Knobs of the top-level instance may only be put back while no live
    // session owns it.
    let lock = super::tracefs::GlobalLock::try_acquire();
    if let Ok(entries) = std::fs::read_dir(dir()) {
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "json") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let Ok(j) = serde_json::from_str::<Journal>(&text) else {
                let _ = std::fs::remove_file(&p);
                continue;
            };
            let changed = !j.knobs.is_empty() || !j.tasks.is_empty() || !j.mounts.is_empty();
            if alive(j.pid) || (changed && lock.is_none()) {
                continue;
            }
            if let Some(inst) = &j.instance {
                if inst.exists() && remove_instance(inst).is_ok() {
                    done.push(format!(
                        "removed instance {} of dead process {}",
                        inst.display(),
                        j.pid
                    ));
                }
            }
            for (knob, old) in j.knobs.iter().rev() {
                if std::fs::write(knob, old).is_ok() {
                    done.push(format!("restored {} to {old:?}", knob.display()));
                }
            }
            // A thread that ended, or whose id a new thread has, is left.
            for e in j.tasks.iter().rev() {
                if e.task.write(e.attr, &e.old).is_ok() {
                    done.push(format!(
                        "restored thread {}'s {} to {:?}",
                        e.task.tid,
                        e.attr.name(),
                        e.old
                    ));
                }
            }
            // A file system unmounted, or another mounted in its place, is
            // left.
            for e in j.mounts.iter().rev() {
                if e.option.write(&e.old).is_ok() {
                    done.push(format!(
                        "restored {}'s mount option {:?}",
                        e.option.target.display(),
                        e.old
                    ));
                }
            }
            let _ = std::fs::remove_file(&p);
        }
    }
    remove_stale_scratch(&std::env::temp_dir(), &mut done);
    if let Some(root) = tracefs_root {
        if let Ok(entries) = std::fs::read_dir(root.join("instances")) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(rest) = name.strip_prefix("iosleuth-") else {
                    continue;
                };
                let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
                    continue;
                };
                if !alive(pid) && remove_instance(&e.path()).is_ok() {
                    done.push(format!("removed stale instance {name}"));
                }
            }
        }
    }
    done
}

#[cfg(test)]
mod scratch_tests {
    use super::*;

    #[test]
    fn only_a_marked_scratch_directory_of_a_process_gone_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let make = |name: &str, marked: bool| {
            let d = tmp.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join("data"), b"x").unwrap();
            if marked {
                std::fs::write(d.join(SCRATCH_MARKER), b"").unwrap();
            }
            d
        };
        let stale = make(&format!("iosleuth-watch-{gone}"), true);
        let unmarked = make(&format!("iosleuth-try-{gone}"), false);
        let running = make(&format!("iosleuth-watch-{}", std::process::id()), true);
        let not_a_pid = make("iosleuth-watch-4294967295", true);
        let other = make(&format!("other-{gone}"), true);
        let mut done = Vec::new();
        remove_stale_scratch(tmp.path(), &mut done);
        assert!(!stale.exists());
        assert_eq!(
            done,
            [format!("removed scratch directory {}", stale.display())]
        );
        for kept in [unmarked, running, not_a_pid, other] {
            assert!(kept.join("data").exists(), "{}", kept.display());
        }
    }
}
