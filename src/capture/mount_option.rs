//! A mount option a remount changes (`mount -o remount,dioread_lock
//! /data`), one family of them at a time: read from /proc/self/mountinfo,
//! changed through the kernel's reconfigure call (`fspick` +
//! `fsconfig(FSCONFIG_CMD_RECONFIGURE)`), which changes only the option
//! given: a legacy `mount(2)` remount resets every per-mount flag it is not
//! handed, and `mount -o remount DIR` adds the options fstab names.
//!
//! A family's state is named by the word that sets it (`dioread_lock`,
//! `commit=30`); the kernel shows only what differs from its default
//! (`nodioread_nolock` for dioread_lock), so an option not shown is the
//! default.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The remountable options `try` knows how to read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// ext4's unwritten-extent conversion at I/O completion (the default
    /// since 5.6): `dioread_nolock`, or `dioread_lock`.
    Dioread,
    /// ext4's journal commit interval in seconds (`commit=N`, 5).
    Commit,
    /// ext4's cache flushes at commit: `barrier` or `nobarrier`.
    Barrier,
    /// ext4's flush of a replaced file's data at rename/truncate.
    AutoDaAlloc,
    /// ext4's online discard.
    Discard,
    /// Any file system: timestamps kept in memory (`lazytime`).
    Lazytime,
    /// Any file system: every write synchronous (`sync`).
    Sync,
}

/// Each family: the file systems it applies to (empty: any), its words
/// (the first the default), and what the kernel shows for each state.
struct Spec {
    family: Family,
    fs: &'static [&'static str],
    words: &'static [&'static str],
    /// Shown option → the word of its state.
    shown: &'static [(&'static str, &'static str)],
}

/// ext4's defaults and what `_ext4_show_options` prints (fs/ext4/super.c),
/// the VFS's for `sync`/`lazytime` (fs/proc_namespace.c show_sb_opts).
const SPECS: [Spec; 7] = [
    Spec {
        family: Family::Dioread,
        fs: &["ext4"],
        words: &["dioread_nolock", "dioread_lock"],
        shown: &[
            ("nodioread_nolock", "dioread_lock"),
            ("dioread_lock", "dioread_lock"),
            ("dioread_nolock", "dioread_nolock"),
        ],
    },
    Spec {
        family: Family::Commit,
        fs: &["ext4"],
        words: &["commit=5"],
        shown: &[],
    },
    Spec {
        family: Family::Barrier,
        fs: &["ext4"],
        words: &["barrier", "nobarrier"],
        shown: &[("nobarrier", "nobarrier"), ("barrier=0", "nobarrier")],
    },
    Spec {
        family: Family::AutoDaAlloc,
        fs: &["ext4"],
        words: &["auto_da_alloc", "noauto_da_alloc"],
        shown: &[("noauto_da_alloc", "noauto_da_alloc")],
    },
    Spec {
        family: Family::Discard,
        fs: &["ext4"],
        words: &["nodiscard", "discard"],
        shown: &[("discard", "discard")],
    },
    Spec {
        family: Family::Lazytime,
        fs: &[],
        words: &["nolazytime", "lazytime"],
        shown: &[("lazytime", "lazytime")],
    },
    Spec {
        family: Family::Sync,
        fs: &[],
        words: &["async", "sync"],
        shown: &[("sync", "sync")],
    },
];

/// ext4's longest commit interval (JBD2's max commit age is an int of
/// seconds times HZ; ext4 refuses above INT_MAX / HZ).
const MAX_COMMIT_SECONDS: u32 = 24 * 3600;

fn spec(f: Family) -> &'static Spec {
    SPECS
        .iter()
        .find(|s| s.family == f)
        .expect("every family has a spec")
}

/// The word `value` as the family and its canonical word (`commit=0` is
/// ext4's default, `commit=5`).
pub fn parse(value: &str) -> Result<(Family, String), String> {
    let v = value.trim();
    if let Some(n) = v.strip_prefix("commit=") {
        let n: u32 = n
            .parse()
            .ok()
            .filter(|n| *n <= MAX_COMMIT_SECONDS)
            .ok_or_else(|| {
                format!("{v:?}: commit=N takes whole seconds, 0 to {MAX_COMMIT_SECONDS}")
            })?;
        return Ok((
            Family::Commit,
            format!("commit={}", if n == 0 { 5 } else { n }),
        ));
    }
    SPECS
        .iter()
        .find(|s| s.family != Family::Commit && s.words.contains(&v))
        .map(|s| (s.family, v.to_string()))
        .ok_or_else(|| {
            format!(
                "{v:?} is not a mount option try can change and read back (it knows {})",
                known_words()
            )
        })
}

fn known_words() -> String {
    SPECS
        .iter()
        .flat_map(|s| match s.family {
            Family::Commit => vec!["commit=N"],
            _ => s.words.to_vec(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One mount of /proc/self/mountinfo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub id: u64,
    /// The device as MAJ:MIN.
    pub device: String,
    pub target: PathBuf,
    pub fstype: String,
    /// The per-mount and the superblock's options together.
    pub options: Vec<String>,
}

/// `\040` and the other octal escapes of mountinfo's paths.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match (b[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
                out.push(v as u8);
                i += 4;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mounts of a mountinfo text; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let (head, tail) = line.split_once(" - ")?;
            let h: Vec<&str> = head.split(' ').collect();
            let t: Vec<&str> = tail.split(' ').collect();
            let (id, device, target, mount_opts) = (h.first()?, h.get(2)?, h.get(4)?, h.get(5)?);
            let (fstype, super_opts) = (t.first()?, t.get(2).copied().unwrap_or(""));
            Some(Mount {
                id: id.parse().ok()?,
                device: device.to_string(),
                target: PathBuf::from(unescape(target)),
                fstype: fstype.to_string(),
                options: mount_opts
                    .split(',')
                    .chain(super_opts.split(','))
                    .filter(|o| !o.is_empty())
                    .map(str::to_string)
                    .collect(),
            })
        })
        .collect()
}

/// The mount on top at `target` (the last one mounted there).
pub fn mount_at(target: &Path) -> Result<Mount, String> {
    let text = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    parse_mountinfo(&text)
        .into_iter()
        .rev()
        .find(|m| m.target == target)
        .ok_or_else(|| format!("{} is not a mount point", target.display()))
}

/// The family's state as `options` show it (the default when not shown).
pub fn state(family: Family, options: &[String]) -> String {
    let s = spec(family);
    if family == Family::Commit {
        return options
            .iter()
            .rev()
            .find_map(|o| o.strip_prefix("commit="))
            .and_then(|n| n.parse::<u32>().ok())
            .map(|n| format!("commit={}", if n == 0 { 5 } else { n }))
            .unwrap_or_else(|| s.words[0].to_string());
    }
    options
        .iter()
        .rev()
        .find_map(|o| {
            s.shown
                .iter()
                .find(|(shown, _)| shown == o)
                .map(|(_, w)| *w)
        })
        .unwrap_or(s.words[0])
        .to_string()
}

/// One family of options of one mount, as it was when it was named.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountOption {
    pub target: PathBuf,
    /// The mounted device (MAJ:MIN): a different file system mounted at
    /// the same place since is not changed or put back.
    pub device: String,
    pub family: Family,
}

impl MountOption {
    /// The option `value` of the file system mounted at `target`; refuses
    /// a path that is no mount point and a family its type does not have.
    pub fn find(target: &Path, value: &str) -> Result<MountOption, String> {
        let (family, _) = parse(value)?;
        let m = mount_at(target)?;
        let fs = spec(family).fs;
        if !fs.is_empty() && !fs.contains(&m.fstype.as_str()) {
            return Err(format!(
                "{value:?} is an option of {}, and {} is {}",
                fs.join(", "),
                target.display(),
                m.fstype
            ));
        }
        Ok(MountOption {
            target: target.to_path_buf(),
            device: m.device,
            family,
        })
    }

    fn mounted(&self) -> Result<Mount, String> {
        let m = mount_at(&self.target)?;
        if m.device != self.device {
            return Err(format!(
                "{} now has another file system mounted ({}, was {})",
                self.target.display(),
                m.device,
                self.device
            ));
        }
        Ok(m)
    }

    /// The family's state now, by its word.
    pub fn read(&self) -> Result<String, String> {
        Ok(state(self.family, &self.mounted()?.options))
    }

    /// Remounts with `value` (one word of the family); the kernel's
    /// refusal is said with its own message when it gives one.
    pub fn write(&self, value: &str) -> Result<(), String> {
        let (family, word) = parse(value)?;
        if family != self.family {
            return Err(format!("{value:?} is not a {:?} option", self.family));
        }
        self.mounted()?;
        reconfigure(&self.target, &word)
    }

    /// Whether `read` shows the state `wanted` names.
    pub fn shows(read: &str, wanted: &str) -> bool {
        match (parse(read), parse(wanted)) {
            (Ok(a), Ok(b)) => a == b,
            _ => read.trim() == wanted.trim(),
        }
    }
}

/// include/uapi/linux/mount.h.
const FSPICK_CLOEXEC: libc::c_uint = 0x1;
const FSPICK_NO_AUTOMOUNT: libc::c_uint = 0x4;
const FSCONFIG_SET_FLAG: libc::c_uint = 0;
const FSCONFIG_SET_STRING: libc::c_uint = 1;
const FSCONFIG_CMD_RECONFIGURE: libc::c_uint = 7;

/// Reconfigures the superblock mounted at `target` with one option
/// (`dioread_lock`, `commit=30`), as `mount -o remount` does for it alone.
fn reconfigure(target: &Path, word: &str) -> Result<(), String> {
    use std::ffi::CString;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    let path = CString::new(target.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a path with a NUL byte", target.display()))?;
    // SAFETY: a plain system call with a NUL-terminated path.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_fspick,
            libc::AT_FDCWD,
            path.as_ptr(),
            FSPICK_CLOEXEC | FSPICK_NO_AUTOMOUNT,
        )
    };
    if fd < 0 {
        return Err(format!(
            "{}: cannot open its file system for reconfiguring: {}",
            target.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: fspick returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    use std::os::fd::AsRawFd;
    let (key, value) = match word.split_once('=') {
        Some((k, v)) => (k, Some(v)),
        None => (word, None),
    };
    let key = CString::new(key).map_err(|_| "an option with a NUL byte".to_string())?;
    let value = value
        .map(CString::new)
        .transpose()
        .map_err(|_| "an option with a NUL byte".to_string())?;
    let call = |cmd: libc::c_uint, key: *const libc::c_char, value: *const libc::c_char| {
        // SAFETY: fsconfig with a descriptor from fspick and NUL-terminated
        // strings (or nulls where the command takes none).
        unsafe { libc::syscall(libc::SYS_fsconfig, fd.as_raw_fd(), cmd, key, value, 0) }
    };
    let r = match &value {
        Some(v) => call(FSCONFIG_SET_STRING, key.as_ptr(), v.as_ptr()),
        None => call(FSCONFIG_SET_FLAG, key.as_ptr(), std::ptr::null()),
    };
    let r = if r == 0 {
        call(FSCONFIG_CMD_RECONFIGURE, std::ptr::null(), std::ptr::null())
    } else {
        r
    };
    if r != 0 {
        let err = std::io::Error::last_os_error();
        let said = kernel_messages(&fd);
        return Err(format!(
            "{err}{}",
            if said.is_empty() {
                String::new()
            } else {
                format!(" ({said})")
            }
        ));
    }
    Ok(())
}

/// What the kernel said about a refused option: the file system context
/// keeps its messages ("e ext4: ...") for a read of the descriptor.
fn kernel_messages(fd: &std::os::fd::OwnedFd) -> String {
    use std::os::fd::AsRawFd;
    let mut said = Vec::new();
    let mut buf = [0u8; 1024];
    for _ in 0..8 {
        // SAFETY: reads into a buffer of its size.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        let line = String::from_utf8_lossy(&buf[..n as usize])
            .trim()
            .to_string();
        said.push(line.get(2..).unwrap_or(&line).to_string());
    }
    said.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 7:0 / /data rw,relatime shared:1 - ext4 /dev/loop0 rw,nodioread_nolock,commit=30
23 1 7:1 / /my\\040disk rw,noatime - ext4 /dev/loop1 rw,lazytime
24 22 0:5 / /data/x rw - tmpfs tmpfs rw
garbage line
";

    fn opts(s: &str) -> Vec<String> {
        s.split(',').map(str::to_string).collect()
    }

    #[test]
    fn mountinfo_gives_each_mounts_device_place_and_options() {
        let m = parse_mountinfo(MOUNTINFO);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].device, "7:0");
        assert_eq!(m[0].target, PathBuf::from("/data"));
        assert_eq!(m[0].fstype, "ext4");
        assert!(m[0].options.contains(&"nodioread_nolock".to_string()));
        assert_eq!(m[1].target, PathBuf::from("/my disk"));
        assert!(m[1].options.contains(&"lazytime".to_string()));
    }

    #[test]
    fn a_state_not_shown_is_the_default() {
        let o = opts("rw,relatime,nodioread_nolock,commit=30");
        assert_eq!(state(Family::Dioread, &o), "dioread_lock");
        assert_eq!(state(Family::Commit, &o), "commit=30");
        assert_eq!(state(Family::Barrier, &o), "barrier");
        let plain = opts("rw,relatime");
        assert_eq!(state(Family::Dioread, &plain), "dioread_nolock");
        assert_eq!(state(Family::Commit, &plain), "commit=5");
        assert_eq!(state(Family::Sync, &plain), "async");
        assert_eq!(state(Family::Barrier, &opts("rw,nobarrier")), "nobarrier");
        assert_eq!(state(Family::Lazytime, &opts("rw,lazytime")), "lazytime");
    }

    #[test]
    fn words_name_their_family_and_others_are_refused() {
        assert_eq!(
            parse("dioread_lock").unwrap(),
            (Family::Dioread, "dioread_lock".into())
        );
        assert_eq!(
            parse("commit=0").unwrap(),
            (Family::Commit, "commit=5".into())
        );
        assert!(parse("commit=-1").is_err() && parse("commit=99999999").is_err());
        let e = parse("data=writeback").unwrap_err();
        assert!(e.contains("dioread_lock") && e.contains("commit=N"), "{e}");
        assert!(MountOption::shows("commit=5", "commit=0"));
        assert!(!MountOption::shows("dioread_nolock", "dioread_lock"));
    }

    #[test]
    fn a_path_that_is_no_mount_point_is_refused() {
        let e = MountOption::find(Path::new("/proc/self"), "lazytime").unwrap_err();
        assert!(e.contains("not a mount point"), "{e}");
        // /proc is proc, which has no ext4 options.
        let e = MountOption::find(Path::new("/proc"), "dioread_lock").unwrap_err();
        assert!(e.contains("is proc"), "{e}");
    }
}
