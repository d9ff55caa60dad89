//! Opening what the user named: regular files only (a FIFO, a device or a
//! socket would block or never end), and `-` for standard input.

use std::fs::{File, FileType, Metadata};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The path that names standard input.
pub const STDIN_ARG: &str = "-";
/// How standard input is named in messages and in the report.
pub const STDIN_NAME: &str = "<stdin>";

/// True for the `-` argument.
pub fn is_stdin(p: &Path) -> bool {
    p.as_os_str() == STDIN_ARG
}

/// The name standard input goes by in messages.
pub fn stdin_path() -> PathBuf {
    PathBuf::from(STDIN_NAME)
}

fn kind(t: FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// Why a file that is not regular is refused.
pub fn not_regular(m: &Metadata) -> String {
    format!("is {}, not a regular file", kind(m.file_type()))
}

/// What to read instead, after `not_regular` for an input the user named.
pub const READ_INSTEAD: &str =
    "iosleuth reads trace files and directories of them (to read a pipe, redirect it to standard input and give `-`)";

/// Opens `path` for reading without blocking (a FIFO would block the open
/// until a writer came), with what it is after following symlinks: the
/// caller refuses what is not a regular file before reading.
pub fn open_checked(path: &Path) -> Result<(File, Metadata), String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("cannot open: {e}"))?;
    let m = f.metadata().map_err(|e| format!("cannot open: {e}"))?;
    Ok((f, m))
}

/// [`open_checked`], refusing what is not a regular file.
pub fn open_regular(path: &Path) -> Result<(File, Metadata), String> {
    let (f, m) = open_checked(path)?;
    if !m.is_file() {
        return Err(not_regular(&m));
    }
    Ok((f, m))
}

/// Reads a small regular file whole (a manifest, a format file, a
/// snapshot), refusing one larger than `limit` bytes.
pub fn read_small(path: &Path, limit: u64) -> Result<String, String> {
    String::from_utf8(read_small_bytes(path, limit)?)
        .map_err(|_| "cannot read: stream did not contain valid UTF-8".into())
}

/// [`read_small`] for binary files.
pub fn read_small_bytes(path: &Path, limit: u64) -> Result<Vec<u8>, String> {
    let (f, m) = open_regular(path)?;
    if m.len() > limit {
        return Err(format!(
            "is {} bytes, more than the {limit} such a file can have",
            m.len()
        ));
    }
    read_at_most(f, &m, limit, || {
        format!("grew past the {limit} bytes such a file can have")
    })
}

/// The whole of an opened regular file, at most `limit` bytes: `Err` of
/// `too_much` when it holds more (it grew since its size was checked, or
/// it is a kernel file whose size says nothing).
fn read_at_most(
    f: File,
    m: &Metadata,
    limit: u64,
    too_much: impl FnOnce() -> String,
) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::with_capacity(m.len().min(limit) as usize);
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_much());
    }
    Ok(bytes)
}

/// How large a file an input names may be, and what that bound is for
/// in messages ("is 3 GiB, more than the 1 GiB iosleuth reads symbols
/// from").
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    pub bytes: u64,
    pub what: &'static str,
}

/// Whether a file an input names may be reached through a symbolic link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Links {
    Follow,
    /// As perf takes a JIT's map in /tmp: a link there may be anyone's.
    Refuse,
}

/// Opens a file that an input names (a binary a perf.data file mapped, a
/// debug file an ELF file links to, a capture's `build-ids.json`), which
/// may be anything: only a regular file of at most `limit` bytes on a
/// real file system is opened. What the path is gets checked before the
/// open (opening a device can have effects: a watchdog, a tape) and the
/// open file again after it (the path may have changed meanwhile); the
/// open does not block (a FIFO would block it until a writer came).
/// `Ok(None)` when there is no such file (a recording names binaries
/// removed since: nothing to say); `Err(why)` when there is one but it
/// is refused or cannot be opened.
pub fn open_named(
    path: &Path,
    limit: Limit,
    links: Links,
) -> Result<Option<(File, Metadata)>, String> {
    let before = match links {
        Links::Follow => std::fs::metadata(path),
        Links::Refuse => std::fs::symlink_metadata(path),
    };
    match before {
        Ok(m) => acceptable(&m, limit)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open: {e}")),
    }
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if links == Links::Refuse {
        flags |= libc::O_NOFOLLOW;
    }
    let f = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) && links == Links::Refuse => {
            return Err(SYMLINK_REFUSED.into())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open: {e}")),
    };
    let m = f.metadata().map_err(|e| format!("cannot open: {e}"))?;
    acceptable(&m, limit)?;
    if let Some(fs) = pseudo_file_system(&f) {
        return Err(format!(
            "is on {fs}, a kernel file system whose files are not what their size says, not a file iosleuth reads"
        ));
    }
    Ok(Some((f, m)))
}

/// [`open_named`], then the whole file (at most `limit.bytes`).
pub fn read_named(path: &Path, limit: Limit, links: Links) -> Result<Option<Vec<u8>>, String> {
    let Some((f, m)) = open_named(path, limit, links)? else {
        return Ok(None);
    };
    read_opened(f, &m, limit).map(Some)
}

/// The whole of a file [`open_named`] opened (at most `limit.bytes`).
pub fn read_opened(f: File, m: &Metadata, limit: Limit) -> Result<Vec<u8>, String> {
    read_at_most(f, m, limit.bytes, || {
        format!("grew past the {} {}", size_text(limit.bytes), limit.what)
    })
}

const SYMLINK_REFUSED: &str = "is a symbolic link, which iosleuth does not follow there";

/// Refuses what is not a regular file, or is larger than `limit`.
fn acceptable(m: &Metadata, limit: Limit) -> Result<(), String> {
    if m.file_type().is_symlink() {
        return Err(SYMLINK_REFUSED.into());
    }
    if !m.is_file() {
        return Err(not_regular(m));
    }
    if m.len() > limit.bytes {
        return Err(format!(
            "is {}, more than the {} {}",
            size_text(m.len()),
            size_text(limit.bytes),
            limit.what
        ));
    }
    Ok(())
}

/// The name of the kernel's pseudo-file system `f` is on (/proc, /sys,
/// tracefs...), whose regular files have a size of 0 or 4096 whatever
/// they hold, and some of which never end or have effects when read.
fn pseudo_file_system(f: &File) -> Option<&'static str> {
    use std::os::fd::AsRawFd;
    const PSEUDO: [(u32, &str); 11] = [
        (0x9fa0, "procfs (/proc)"),
        (0x6265_6572, "sysfs (/sys)"),
        (0x6462_6720, "debugfs"),
        (0x7472_6163, "tracefs"),
        (0x7363_6673, "securityfs"),
        (0x0027_e0eb, "cgroupfs"),
        (0x6367_7270, "cgroup2fs"),
        (0x6265_6570, "configfs"),
        (0xcafe_4a11, "bpffs"),
        (0xde5e_81e4, "efivarfs"),
        (0x6165_676c, "pstore"),
    ];
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is a valid statfs for the call to fill.
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    PSEUDO
        .iter()
        .find(|(magic, _)| st.f_type as u32 == *magic)
        .map(|(_, name)| *name)
}

/// A size as people read it: `3.0 GiB`, `256 MiB`, `512 bytes`.
pub fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes >= 1 << shift {
            return if bytes.is_multiple_of(1 << shift) {
                format!("{} {unit}", bytes >> shift)
            } else {
                format!("{:.1} {unit}", bytes as f64 / (1u64 << shift) as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// Standard input as a file (a pipe or a redirected file); a terminal is
/// refused, since no trace is typed in.
pub fn open_stdin() -> Result<File, String> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("cannot read standard input: {e}"))?;
    if unsafe { libc::isatty(0) } == 1 {
        return Err(
            "standard input is a terminal: pipe a trace into it (`cat trace.txt | iosleuth report -`)"
                .into(),
        );
    }
    Ok(File::from(fd))
}
