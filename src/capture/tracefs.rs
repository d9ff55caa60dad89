//! tracefs access with guaranteed restoration: every value iosleuth writes is
//! put back when its guard is dropped (normal exit, error or unwinding).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub const DEFAULT_ROOT: &str = "/sys/kernel/tracing";

/// Why a recording could not start or did not finish, and so how iosleuth
/// exits (error.rs).
#[derive(Debug)]
pub enum CaptureError {
    /// This machine or these options cannot record it: permissions, a
    /// kernel feature or event it lacks, a device that is not there. Says
    /// what is missing and how to get it; exits 2, as unusable input.
    Unusable(String),
    /// Recording failed while it ran or was written: a full disk, a
    /// kernel buffer that could not be read. Names the file; exits 1.
    Failed(String),
}

impl CaptureError {
    pub fn message(&self) -> &str {
        match self {
            CaptureError::Unusable(m) | CaptureError::Failed(m) => m,
        }
    }
}

impl std::fmt::Display for CaptureError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for CaptureError {}

/// An I/O error without its file: a failure, never "unusable input" (a
/// full disk while recording is not the user's doing).
impl From<io::Error> for CaptureError {
    fn from(e: io::Error) -> Self {
        CaptureError::Failed(e.to_string())
    }
}

/// A mounted tracefs; unmounted on drop if iosleuth mounted it.
/// A mounted tracefs. If iosleuth had to mount it, the last iosleuth user
/// (in any process) unmounts it: every user holds a shared lock, and a
/// marker says that iosleuth did the mount.
pub struct Tracefs {
    pub root: PathBuf,
    users: Option<fs::File>,
}

/// Where iosleuth keeps its journals and locks (`/run/iosleuth`).
pub(crate) fn state_dir() -> PathBuf {
    let run = Path::new("/run");
    if run.is_dir() {
        run.join("iosleuth")
    } else {
        std::env::temp_dir().join("iosleuth-journal")
    }
}

/// Opens (creating) a lock file in the state directory and locks it.
fn locked(name: &str, op: libc::c_int) -> Option<fs::File> {
    let _ = fs::create_dir_all(state_dir());
    fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state_dir().join(name))
        .ok()
        .filter(|f| flock(f, op))
}

fn flock(f: &fs::File, op: libc::c_int) -> bool {
    use std::os::unix::io::AsRawFd;
    unsafe { libc::flock(f.as_raw_fd(), op) == 0 }
}

fn find_mounted() -> Option<PathBuf> {
    let root = PathBuf::from(DEFAULT_ROOT);
    if root.join("trace").exists() {
        return Some(root);
    }
    let mounts = fs::read_to_string("/proc/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.len() > 2 && f[2] == "tracefs" && Path::new(f[1]).join("trace").exists())
            .then(|| PathBuf::from(f[1]))
    })
}

impl Tracefs {
    /// Finds tracefs, mounting it at the standard place if it is not mounted.
    pub fn open() -> Result<Tracefs, CaptureError> {
        let dir = state_dir();
        let _ = fs::create_dir_all(&dir);
        let users = locked("tracefs-users.lock", libc::LOCK_SH);
        if let Some(root) = find_mounted() {
            return Ok(Tracefs { root, users });
        }
        // One mounter at a time, across threads and processes.
        let mount_lock = locked("tracefs-mount.lock", libc::LOCK_EX);
        if let Some(root) = find_mounted() {
            drop(mount_lock);
            return Ok(Tracefs { root, users });
        }
        if unsafe { libc::geteuid() } != 0 {
            return Err(CaptureError::Unusable(
                "tracing needs root: tracefs is not mounted and only root can mount it (run with sudo)".into(),
            ));
        }
        // The system call, not mount(8): a Ctrl-C that killed a mount
        // process halfway could leave tracefs mounted without our marker.
        let root = PathBuf::from(DEFAULT_ROOT);
        match sys_mount(&root) {
            Ok(()) if root.join("trace").exists() => {
                let _ = fs::write(dir.join("tracefs-mounted-by-iosleuth"), DEFAULT_ROOT);
                Ok(Tracefs { root, users })
            }
            // Someone else mounted it meanwhile (outside our lock).
            _ if find_mounted().is_some() => Ok(Tracefs {
                root: find_mounted().unwrap_or(root),
                users,
            }),
            _ => Err(CaptureError::Unusable(format!(
                "tracefs is not available: mounting it at {DEFAULT_ROOT} failed (the kernel needs CONFIG_FTRACE; try `mount -t tracefs nodev {DEFAULT_ROOT}`)"
            ))),
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        let Some(users) = self.users.take() else {
            return;
        };
        // The last user (exclusive lock granted at once) undoes our mount.
        let marker = state_dir().join("tracefs-mounted-by-iosleuth");
        if flock(&users, libc::LOCK_EX | libc::LOCK_NB) && marker.exists() && sys_umount(&self.root)
        {
            let _ = fs::remove_file(marker);
        }
    }
}

fn c_path(p: &Path) -> std::ffi::CString {
    use std::os::unix::ffi::OsStrExt;
    std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap_or_default()
}

fn sys_mount(at: &Path) -> io::Result<()> {
    let (src, fstype, target) = (c"nodev", c"tracefs", c_path(at));
    let r = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Unmounts; a file still open for a moment (a reader thread closing) is
/// worth a short wait, then the mount is detached lazily. False if it is
/// still mounted.
fn sys_umount(at: &Path) -> bool {
    let target = c_path(at);
    for _ in 0..50 {
        if unsafe { libc::umount2(target.as_ptr(), 0) } == 0 {
            return true;
        }
        if io::Error::last_os_error().raw_os_error() != Some(libc::EBUSY) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) == 0 }
}

/// A file whose content is restored on drop.
pub struct Knob {
    path: PathBuf,
    old: Option<String>,
}

/// Reads a tracefs/sysfs value the way it must be written back: the
/// bracketed choice of `[a] b c` lists, the first line otherwise.
pub use crate::model::snapshot::current_value;

impl Knob {
    pub fn set(path: impl Into<PathBuf>, value: &str) -> Result<Knob, CaptureError> {
        let path = path.into();
        let raw = fs::read_to_string(&path)
            .map_err(|e| CaptureError::Unusable(format!("cannot read {}: {e}", path.display())))?;
        let old = current_value(&raw);
        fs::write(&path, value).map_err(|e| {
            CaptureError::Unusable(format!("cannot write {value:?} to {}: {e}", path.display()))
        })?;
        Ok(Knob {
            path,
            old: Some(old),
        })
    }

    /// Like `set`, writing the original value into `journal` first, so
    /// that a killed session can be undone.
    pub fn set_recorded(
        path: impl Into<PathBuf>,
        value: &str,
        journal: &mut super::journal::Journal,
    ) -> Result<Knob, CaptureError> {
        let path = path.into();
        let raw = fs::read_to_string(&path)
            .map_err(|e| CaptureError::Unusable(format!("cannot read {}: {e}", path.display())))?;
        journal.record_knob(&path, &current_value(&raw));
        Knob::set(path, value)
    }

    /// Restores now, reporting failure.
    pub fn restore(mut self) -> io::Result<()> {
        match self.old.take() {
            Some(v) => fs::write(&self.path, v),
            None => Ok(()),
        }
    }
}

impl Drop for Knob {
    fn drop(&mut self) {
        if let Some(v) = self.old.take() {
            let _ = fs::write(&self.path, v);
        }
    }
}

/// A lock that serialises users of global tracing state (the top-level
/// instance, the `blk` tracer) across processes. Released on drop.
pub struct GlobalLock {
    _file: fs::File,
}

impl GlobalLock {
    const FILE: &'static str = "global-tracing.lock";

    /// The lock if nobody holds it now.
    pub fn try_acquire() -> Option<GlobalLock> {
        locked(Self::FILE, libc::LOCK_EX | libc::LOCK_NB).map(|f| GlobalLock { _file: f })
    }

    /// Waits for the lock.
    pub fn acquire() -> Result<GlobalLock, CaptureError> {
        locked(Self::FILE, libc::LOCK_EX)
            .map(|f| GlobalLock { _file: f })
            .ok_or_else(|| {
                CaptureError::Unusable(format!(
                    "cannot lock {}",
                    state_dir().join(Self::FILE).display()
                ))
            })
    }
}
