//! A file the user names for an output (`report -o`, `flamegraph -o`,
//! `diff -o` and `--flamegraph`, `export --perfetto`, `record --blk`).
//!
//! Checked before any work: a device node, a FIFO, a socket or a directory
//! is refused (writing into /dev/full or a FIFO is no output, and replacing
//! a node would destroy it), and so is one of the inputs, or a file inside
//! an input directory. Then written beside its place under a temporary
//! name and renamed over it once complete ([`Staged::commit`]): a failure
//! (an input that cannot be read, a full disk) leaves what was there as it
//! was, removing only the temporary file, and a reader never sees half a
//! file. A file replaced keeps its permissions (and its owner, as root).
//!
//! `-` names standard output where a command writes one file
//! ([`Destination`]); a page or a binary file is then refused on a
//! terminal. Where the output is a directory or must be a file, `-` is
//! refused rather than taken as a file named `-`.
//!
//! A capture directory to record into must be new or empty
//! ([`refuse_used_directory`]); an export directory must not hold an input
//! ([`refuse_inputs_in`]).
//!
//! A symlink is followed: the file it names is replaced, the link stays.
//! Except one that another user planted in a sticky world-writable
//! directory such as /tmp, which the kernel's protected_symlinks would not
//! let open(2) follow either (a rename does not ask it).

use crate::error::{Error, Result};
use crate::ingest::files;
use std::fs::{File, Metadata};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Where an output goes, checked by [`OutputFile::check`].
#[derive(Debug)]
pub struct OutputFile {
    /// As the user named it, for messages.
    named: PathBuf,
    /// The entry replaced: `named` after its symlinks.
    target: PathBuf,
    /// What `target` is now, if anything: its mode and owner carry over.
    existing: Option<Metadata>,
}

/// The temporary file an output is written to: renamed into place by
/// [`Staged::commit`], removed when dropped before.
#[derive(Debug)]
pub struct Staged {
    file: File,
    path: PathBuf,
    target: PathBuf,
    named: PathBuf,
    committed: bool,
}

/// The directory an entry is in (`.` for a bare name, whose
/// `Path::parent()` is empty).
fn parent(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// `named` after its symlinks (up to 40, as the kernel), refusing one
/// that protected_symlinks would refuse.
fn resolve(named: &Path) -> std::result::Result<PathBuf, String> {
    let mut p = named.to_path_buf();
    for _ in 0..40 {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            return Ok(p);
        };
        if !m.file_type().is_symlink() {
            return Ok(p);
        }
        let dir = parent(&p).to_path_buf();
        if let Ok(d) = std::fs::metadata(&dir) {
            let sticky_and_open = d.mode() & 0o1002 == 0o1002;
            // SAFETY: geteuid cannot fail.
            let euid = unsafe { libc::geteuid() };
            if sticky_and_open && m.uid() != euid && m.uid() != d.uid() {
                return Err(format!(
                    "is a symlink that another user (uid {}) owns in {}, a world-writable sticky directory: not followed",
                    m.uid(),
                    dir.display()
                ));
            }
        }
        let to = std::fs::read_link(&p).map_err(|e| format!("cannot read the symlink: {e}"))?;
        p = dir.join(to);
    }
    Err("too many levels of symbolic links".into())
}

/// True when `inside` is `dir` or below it (both existing).
fn is_within(inside: &Path, dir: &Path) -> bool {
    match (std::fs::canonicalize(inside), std::fs::canonicalize(dir)) {
        (Ok(i), Ok(d)) => i.starts_with(d),
        _ => false,
    }
}

/// Creates and removes a file in `dir`.
fn probe_writable(dir: &Path) -> io::Result<()> {
    for n in 0..100 {
        let path = dir.join(format!(".iosleuth-{}-{n}.probe", std::process::id()));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(_) => return std::fs::remove_file(&path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other("no free name for a file"))
}

/// `-o -`: standard output.
pub fn is_stdout(p: &Path) -> bool {
    p.as_os_str() == "-"
}

/// A page or binary file, which a terminal would show as noise: refused
/// there (exit 2) when it would go to standard output.
#[derive(Debug, Clone, Copy)]
pub struct NotForTerminal {
    /// What it is: `HTML`, `SVG`, `a Perfetto trace`.
    pub what: &'static str,
    /// The option to suggest instead: `-o report.html`.
    pub instead: &'static str,
}

/// Where a command's one output file goes: a checked file, or standard
/// output (no `-o`, or `-o -`).
#[derive(Debug)]
pub enum Destination {
    Stdout,
    File(Box<OutputFile>),
}

impl Destination {
    /// `named` (`None` or `-`: standard output) checked before any work,
    /// as [`OutputFile::check`] checks a file; `kind` of output bound
    /// for a terminal is refused with a hint naming `command`.
    pub fn check(
        named: Option<&Path>,
        inputs: &[PathBuf],
        command: &str,
        kind: Option<NotForTerminal>,
    ) -> Result<Destination> {
        match named {
            Some(p) if !is_stdout(p) => {
                Ok(Destination::File(Box::new(OutputFile::check(p, inputs)?)))
            }
            _ => {
                use std::io::IsTerminal;
                if let Some(k) = kind {
                    if io::stdout().is_terminal() {
                        return Err(Error::bad_input(format!(
                            "{command} would print {} to the terminal: add {}, or pipe it",
                            k.what, k.instead
                        )));
                    }
                }
                Ok(Destination::Stdout)
            }
        }
    }

    /// The file, if not standard output.
    pub fn file(&self) -> Option<&OutputFile> {
        match self {
            Destination::Stdout => None,
            Destination::File(f) => Some(f),
        }
    }

    /// Writes `bytes` as the whole output; a file is said on stderr.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        match self {
            Destination::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(bytes)?;
                out.flush()?;
            }
            Destination::File(f) => {
                f.write(bytes)?;
                eprintln!("iosleuth: wrote {}", f.path().display());
            }
        }
        Ok(())
    }
}

impl OutputFile {
    /// Checks `named` as the output of a command that reads `inputs`
    /// (`-` for standard input is skipped): exit 2 with a message naming
    /// it when it cannot be one, before any work. Leaves nothing behind (a
    /// file is created and removed in its directory, to know it can be).
    pub fn check(named: &Path, inputs: &[PathBuf]) -> Result<OutputFile> {
        let bad = |why: String| Error::bad_input(format!("{}: {why}", named.display()));
        if is_stdout(named) {
            return Err(Error::bad_input(
                "-: this output cannot go to standard output; name a file",
            ));
        }
        let target = resolve(named).map_err(bad)?;
        let existing = match std::fs::symlink_metadata(&target) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(bad(format!("cannot write there: {e}"))),
        };
        if let Some(m) = &existing {
            if !m.is_file() {
                return Err(bad(format!(
                    "{}: an output is written to a new file or replaces a regular one",
                    files::not_regular(m)
                )));
            }
        }
        let dir = parent(&target);
        match std::fs::metadata(dir) {
            Ok(d) if d.is_dir() => {}
            Ok(_) => return Err(bad(format!("{} is not a directory", dir.display()))),
            Err(e) => return Err(bad(format!("cannot write in {}: {e}", dir.display()))),
        }
        if target.file_name().is_none() {
            return Err(bad("names no file".into()));
        }
        // Permissions, a read-only file system, /proc: only creating a
        // file tells, and it should fail now rather than after the work.
        probe_writable(dir).map_err(|e| bad(format!("cannot write in {}: {e}", dir.display())))?;
        for input in inputs.iter().filter(|p| !files::is_stdin(p)) {
            // An input that cannot be read fails on its own, later.
            let Ok(im) = std::fs::metadata(input) else {
                continue;
            };
            if let Some(m) = &existing {
                if (m.dev(), m.ino()) == (im.dev(), im.ino()) {
                    return Err(bad(format!(
                        "is the input {}: iosleuth does not write over what it reads; name another output",
                        input.display()
                    )));
                }
                if im.is_dir() && is_within(&target, input) {
                    return Err(bad(format!(
                        "is inside the input directory {}: iosleuth does not replace files in what it reads; name an output elsewhere",
                        input.display()
                    )));
                }
            }
        }
        Ok(OutputFile {
            named: named.to_path_buf(),
            target,
            existing,
        })
    }

    /// The path as the user named it.
    pub fn path(&self) -> &Path {
        &self.named
    }

    /// Creates the temporary file beside the target.
    pub fn stage(&self) -> Result<Staged> {
        let dir = parent(&self.target);
        // Named after the output (cut, to stay within NAME_MAX), hidden.
        let name: String = self
            .target
            .file_name()
            .expect("checked")
            .to_string_lossy()
            .chars()
            .take(64)
            .collect();
        for n in 0.. {
            let path = dir.join(format!(".{name}.iosleuth-{}-{n}.tmp", std::process::id()));
            let created = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o666)
                .open(&path);
            match created {
                Ok(file) => {
                    let staged = Staged {
                        file,
                        path,
                        target: self.target.clone(),
                        named: self.named.clone(),
                        committed: false,
                    };
                    if let Some(m) = &self.existing {
                        staged.keep_mode_and_owner(m);
                    }
                    return Ok(staged);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 100 => continue,
                Err(e) => {
                    return Err(Error::failed(format!(
                        "{}: cannot create a file in {}: {e}",
                        self.named.display(),
                        dir.display()
                    )))
                }
            }
        }
        unreachable!("the loop returns")
    }

    /// Writes `bytes` as the whole output.
    pub fn write(&self, bytes: &[u8]) -> Result<()> {
        let staged = self.stage()?;
        (&staged.file)
            .write_all(bytes)
            .map_err(|e| staged.failed(e))?;
        staged.commit()
    }
}

impl Staged {
    /// The temporary file, to write to.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Where it is written until [`Staged::commit`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The error of a failed write, naming the output.
    pub fn failed(&self, e: io::Error) -> Error {
        Error::failed(format!("writing {}: {e}", self.named.display()))
    }

    /// The permissions of the file replaced, and its owner when root may
    /// give it (best effort: the output is written either way).
    fn keep_mode_and_owner(&self, m: &Metadata) {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            let _ = std::os::unix::fs::fchown(&self.file, Some(m.uid()), Some(m.gid()));
        }
        let mode = std::fs::Permissions::from_mode(m.mode() & 0o777);
        let _ = self.file.set_permissions(mode);
    }

    /// Puts the complete file in place (on disk first: a crash never
    /// leaves an empty file where the old one was).
    pub fn commit(mut self) -> Result<()> {
        self.file.sync_all().map_err(|e| self.failed(e))?;
        std::fs::rename(&self.path, &self.target).map_err(|e| self.failed(e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Refuses an output directory (`export --blktrace`, `--parquet`) that is
/// one of the inputs or holds one: the export replaces files in it.
pub fn refuse_inputs_in(dir: &Path, inputs: &[PathBuf]) -> Result<()> {
    refuse_stdout_for_directory(dir)?;
    // A file named as the directory is refused for what it is first.
    if std::fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
        return Err(Error::bad_input(format!(
            "{}: exists and is not a directory: an export writes its files into a new or empty directory",
            dir.display()
        )));
    }
    match inputs
        .iter()
        .find(|i| !files::is_stdin(i) && is_within(i, dir))
    {
        Some(i) => Err(Error::bad_input(format!(
            "{}: holds the input {}: an export replaces files in its directory, and iosleuth does not write over what it reads; name another directory",
            dir.display(),
            i.display()
        ))),
        None => Ok(()),
    }
}

/// `-` for an output that is a directory: not a file named `-`.
fn refuse_stdout_for_directory(dir: &Path) -> Result<()> {
    match is_stdout(dir) {
        true => Err(Error::bad_input(
            "-: this output is a directory of files and cannot go to standard output; name a directory",
        )),
        false => Ok(()),
    }
}

/// Refuses a capture directory to record into that exists and is not an
/// empty directory: the recorder would write over its files, and a capture
/// mixed with an earlier one's files reports neither.
pub fn refuse_used_directory(dir: &Path) -> Result<()> {
    refuse_stdout_for_directory(dir)?;
    let bad = |why: String| Error::bad_input(format!("{}: {why}", dir.display()));
    let m = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(bad(format!("cannot write there: {e}"))),
    };
    if !m.is_dir() {
        return Err(bad(
            "exists and is not a directory: a capture is written to a new or empty directory"
                .into(),
        ));
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| bad(format!("cannot read the directory: {e}")))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    let n = names.len();
    names.truncate(3);
    Err(bad(format!(
        "the directory is not empty ({n} {}: {}{}): a capture is written to a new or empty directory",
        if n == 1 { "entry" } else { "entries" },
        names.join(", "),
        if n > names.len() { ", ..." } else { "" }
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(e: Error) -> String {
        match e {
            Error::BadInput(m) | Error::Failed(m) => m,
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_failure_leaves_it() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out.txt");
        std::fs::write(&out, "old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
        let o = OutputFile::check(&out, &[]).unwrap();
        {
            let s = o.stage().unwrap();
            s.file().write_all(b"half").unwrap();
            // Dropped without a commit: an error on the way.
        }
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        o.write(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "new");
        let mode = std::fs::metadata(&out).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o640);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_symlink_is_followed_and_stays() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/real"), "old").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink("sub/real", &link).unwrap();
        OutputFile::check(&link, &[])
            .unwrap()
            .write(b"new")
            .unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(d.path().join("sub/real")).unwrap(),
            "new"
        );
        // A dangling one creates the file it names.
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink("sub/new", &dangling).unwrap();
        OutputFile::check(&dangling, &[])
            .unwrap()
            .write(b"x")
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("sub/new")).unwrap(),
            "x"
        );
    }

    #[test]
    fn nodes_directories_and_inputs_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = msg(OutputFile::check(d.path(), &[]).unwrap_err());
        assert!(e.ends_with("is a directory, not a regular file: an output is written to a new file or replaces a regular one"), "{e}");
        let e = msg(OutputFile::check(Path::new("/dev/null"), &[]).unwrap_err());
        assert_eq!(e, "/dev/null: is a character device, not a regular file: an output is written to a new file or replaces a regular one");
        let e = msg(OutputFile::check(&d.path().join("no/such"), &[]).unwrap_err());
        assert!(e.contains("cannot write in"), "{e}");
        let input = d.path().join("t.txt");
        std::fs::write(&input, "trace").unwrap();
        let hard = d.path().join("hard");
        std::fs::hard_link(&input, &hard).unwrap();
        let e = msg(OutputFile::check(&hard, std::slice::from_ref(&input)).unwrap_err());
        assert!(e.contains("hard: is the input"), "{e}");
        let e = msg(OutputFile::check(&input, &[d.path().to_path_buf()]).unwrap_err());
        assert!(e.contains("is inside the input directory"), "{e}");
        // A new file inside an input directory replaces nothing.
        assert!(OutputFile::check(&d.path().join("new"), &[d.path().to_path_buf()]).is_ok());
        let e = msg(refuse_inputs_in(d.path(), std::slice::from_ref(&input)).unwrap_err());
        assert!(e.contains("holds the input"), "{e}");
    }

    #[test]
    fn another_users_symlink_in_a_sticky_directory_is_not_followed() {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return; // lchown to another user needs root
        }
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let link = d.path().join("planted");
        std::os::unix::fs::symlink("/etc/some-file", &link).unwrap();
        std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).unwrap();
        let e = msg(OutputFile::check(&link, &[]).unwrap_err());
        assert!(
            e.contains("planted: is a symlink that another user (uid 65534) owns in"),
            "{e}"
        );
    }

    #[test]
    fn a_capture_is_recorded_into_a_new_or_empty_directory() {
        let d = tempfile::tempdir().unwrap();
        assert!(refuse_used_directory(&d.path().join("new")).is_ok());
        assert!(refuse_used_directory(d.path()).is_ok());
        std::fs::write(d.path().join("cpu0.bin"), "old").unwrap();
        let e = msg(refuse_used_directory(d.path()).unwrap_err());
        assert!(e.ends_with(": the directory is not empty (1 entry: cpu0.bin): a capture is written to a new or empty directory"), "{e}");
        let e = msg(refuse_used_directory(&d.path().join("cpu0.bin")).unwrap_err());
        assert!(e.ends_with("cpu0.bin: exists and is not a directory: a capture is written to a new or empty directory"), "{e}");
        assert_eq!(
            std::fs::read_to_string(d.path().join("cpu0.bin")).unwrap(),
            "old"
        );
    }

    #[test]
    fn a_bare_name_is_written_in_the_current_directory() {
        assert_eq!(parent(Path::new("out.txt")), Path::new("."));
        assert_eq!(parent(Path::new("a/out.txt")), Path::new("a"));
    }
}
