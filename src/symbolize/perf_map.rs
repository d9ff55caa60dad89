//! The map a JIT writes for perf (`/tmp/perf-PID.map`: a `START SIZE
//! NAME` line per function, in hex), which names the frames of its
//! anonymous executable memory. It sits in /tmp, where any local user
//! can put a file of that name first, so it is read only as perf reads
//! it: a regular file, not a symbolic link, owned by root or by the user
//! iosleuth runs as.

use crate::ingest::files::{open_named, read_opened, Limit, Links};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// A JIT's map of a long-running program is a few MiB.
const MAX_FILE: Limit = Limit {
    bytes: 64 << 20,
    what: "a perf map can have",
};

/// A function of the map: its start address, size and name.
pub type Function = (u64, u64, String);

/// Whether `path` names a JIT's perf map (as perf's
/// `is_perf_pid_map_name` tells them).
pub fn is_perf_map(path: &str) -> bool {
    path.strip_prefix("/tmp/perf-")
        .and_then(|p| p.strip_suffix(".map"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

/// The functions of the map at `path` (start, size, name): `Ok(None)`
/// when there is none, `Err(why)` when it is there but refused.
pub fn load(path: &Path) -> Result<Option<Vec<Function>>, String> {
    // Not through a link: the file opened is the path's own, whose owner
    // perf checks.
    let Some((f, m)) = open_named(path, MAX_FILE, Links::Refuse)? else {
        return Ok(None);
    };
    check_owner(m.uid(), unsafe { libc::geteuid() })?;
    let bytes = read_opened(f, &m, MAX_FILE)?;
    Ok(Some(parse(&String::from_utf8_lossy(&bytes))))
}

/// The map of a process of another user: that user could have written
/// anything in it (perf: "not owned by current user or root, ignoring it").
fn check_owner(owner: u32, me: u32) -> Result<(), String> {
    if owner == 0 || owner == me {
        return Ok(());
    }
    Err(format!(
        "is owned by uid {owner}, neither root nor the user iosleuth runs as (uid {me}): ignored, as perf ignores it"
    ))
}

/// `START SIZE NAME` lines, in hex with or without `0x` (perf reads them
/// with strtoull); other lines are skipped.
fn parse(text: &str) -> Vec<Function> {
    let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok();
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let start = hex(f.next()?)?;
            let size = hex(f.next()?)?;
            let name = f.next()?.trim_end();
            (!name.is_empty()).then(|| (start, size, name.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_perf_reads_them() {
        let m = parse("7f00 10 py::f:/x.py\n0x7f10 0x20 a b c\nbad line\n7f30 8 \n");
        assert_eq!(
            m,
            vec![
                (0x7f00, 0x10, "py::f:/x.py".to_string()),
                (0x7f10, 0x20, "a b c".to_string())
            ]
        );
        assert!(is_perf_map("/tmp/perf-123.map"));
        assert!(!is_perf_map("/tmp/perf-.map"));
        assert!(!is_perf_map("/tmp/perf-1/x.map"));
    }

    #[test]
    fn another_users_map_is_refused() {
        assert!(check_owner(0, 1000).is_ok());
        assert!(check_owner(1000, 1000).is_ok());
        let e = check_owner(65534, 0).unwrap_err();
        assert!(e.contains("uid 65534"), "{e}");
    }
}
