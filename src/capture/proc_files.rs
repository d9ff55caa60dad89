//! The lines of procfs files the capture reads about processes, parsed
//! once: a mapping of `/proc/PID/maps` and the parent in `/proc/PID/stat`;
//! and a process's descendants, from their parents.

use std::collections::{HashMap, VecDeque};

/// One line of `/proc/PID/maps`:
/// `start-end perms offset major:minor inode path` (the path may hold
/// spaces, and is empty for anonymous memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping<'a> {
    pub start: u64,
    pub end: u64,
    pub executable: bool,
    /// Into the file, bytes.
    pub offset: u64,
    /// The file's device: major, minor.
    pub dev: (u32, u32),
    /// 0: no file.
    pub inode: u64,
    pub path: &'a str,
}

pub fn mapping(line: &str) -> Option<Mapping<'_>> {
    let mut f = line.splitn(6, ' ');
    let (range, perms, offset, dev, inode) =
        (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    let path = f.next().unwrap_or("").trim_start();
    let (start, end) = range.split_once('-')?;
    let (major, minor) = dev.split_once(':')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok().filter(|&e| e >= start)?;
    Some(Mapping {
        start,
        end,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        dev: (
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        ),
        inode: inode.parse().ok()?,
        path,
    })
}

/// The parent pid in a `/proc/PID/stat` text: the name may hold spaces and
/// parentheses, so it follows the last `)` and the state.
pub fn parent(stat: &str) -> Option<u32> {
    let close = stat.rfind(')')?;
    stat[close + 1..].split_whitespace().nth(1)?.parse().ok()
}

/// Processes of a tree read at most: a command that forks thousands
/// keeps what was found first.
const MAX_PROCESSES: usize = 256;

/// `root` and its descendants (from each process's parent in
/// `/proc/PID/stat`), `root` first, at most MAX_PROCESSES: one walk of
/// /proc, which the samplers of a recorded command share.
pub fn process_tree(root: u32) -> Vec<u32> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some(ppid) = parent(&stat) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = Vec::new();
    let mut queue = VecDeque::from([root]);
    while let Some(pid) = queue.pop_front() {
        if out.len() >= MAX_PROCESSES {
            break;
        }
        out.push(pid);
        queue.extend(children.get(&pid).into_iter().flatten());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maps_line_and_a_stat_line_as_the_kernel_prints_them() {
        let m = mapping("7f00-7f10 r-xp 00001000 fd:01 12          /mnt/a b (deleted)").unwrap();
        assert_eq!(
            m,
            Mapping {
                start: 0x7f00,
                end: 0x7f10,
                executable: true,
                offset: 0x1000,
                dev: (0xfd, 1),
                inode: 12,
                path: "/mnt/a b (deleted)",
            }
        );
        let anon = mapping("55d0-55f0 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!((anon.inode, anon.path, anon.executable), (0, "", false));
        assert_eq!(mapping("garbage"), None);
        assert_eq!(parent("17 (a) b) c) S 4 17 17 0"), Some(4));
        assert_eq!(parent("17 (a"), None);
    }
}
