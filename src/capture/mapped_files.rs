//! The files the recorded command maps, by device and inode. A page
//! fault's events name its file only by device and inode
//! (`mm_filemap_fault`); the mappings of the command's processes, read
//! from `/proc/PID/maps` while they run, give the path.

use serde_json::{json, Value};
use std::collections::BTreeMap;

/// At most this many files are kept: a command that maps thousands keeps
/// what was found first.
const MAX_FILES: usize = 4096;

#[derive(Default)]
pub struct MappedFiles {
    /// (`MAJ,MIN`, inode) → path.
    files: BTreeMap<(String, u64), String>,
}

impl MappedFiles {
    /// Adds the file mappings of the processes `tree` (a command and its
    /// descendants, `proc_files::process_tree`) now.
    pub fn sample(&mut self, tree: &[u32]) {
        for &pid in tree {
            let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
                continue;
            };
            for (dev, inode, path) in maps.lines().filter_map(mapping) {
                if self.files.len() >= MAX_FILES {
                    return;
                }
                self.files.entry((dev, inode)).or_insert(path);
            }
        }
    }

    /// `[{dev, inode, path}]`, as the snapshot keeps them.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.files
                .iter()
                .map(|((dev, inode), path)| json!({"dev": dev, "inode": inode, "path": path}))
                .collect(),
        )
    }
}

/// A line of `/proc/PID/maps` that maps a file: its device (`MAJ,MIN` in
/// decimal, as the trace prints devices), inode and path.
fn mapping(line: &str) -> Option<(String, u64, String)> {
    let m = super::proc_files::mapping(line).filter(|m| m.inode != 0 && m.path.starts_with('/'))?;
    Some((
        format!("{},{}", m.dev.0, m.dev.1),
        m.inode,
        m.path.to_string(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maps_line_names_its_file_by_decimal_device_and_inode() {
        assert_eq!(
            mapping("7f1c2a000000-7f1c2a400000 r--s 00000000 fd:01 1311 /data/x.mdb"),
            Some(("253,1".into(), 1311, "/data/x.mdb".into()))
        );
        // A path with spaces, and a deleted file, as the kernel prints it.
        assert_eq!(
            mapping("7f00-7f10 r--p 00001000 07:00 12          /mnt/a b (deleted)"),
            Some(("7,0".into(), 12, "/mnt/a b (deleted)".into()))
        );
        // Anonymous memory, the heap, the vDSO: no file.
        assert_eq!(
            mapping("55d0-55f0 rw-p 00000000 00:00 0          [heap]"),
            None
        );
        assert_eq!(mapping("7ffd-7ffe r-xp 00000000 00:00 0 [vdso]"), None);
        assert_eq!(mapping("garbage"), None);
    }

    #[test]
    fn this_process_maps_its_own_binary() {
        let mut m = MappedFiles::default();
        m.sample(&crate::capture::proc_files::process_tree(std::process::id()));
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let found = m.to_json();
        assert!(
            found
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["path"] == exe.to_string_lossy().as_ref()),
            "{exe:?} not in {found}"
        );
    }
}
