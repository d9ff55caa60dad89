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
    let mut bytes = Vec::with_capacity(m.len() as usize);
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(format!("grew past the {limit} bytes such a file can have"));
    }
    Ok(bytes)
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
