//! The daemon's own CPU time and memory, read from /proc/self as
//! Prometheus' process collector reads them.

use crate::report::prometheus::ProcessFigures;

/// `None` when /proc is not readable.
pub fn figures() -> Option<ProcessFigures> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name (which may hold spaces and
    // parentheses: it ends at the last ')').
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14, 15 (utime, stime), 22 (starttime), 23 (vsize), 24 (rss),
    // numbered from 1 with the pid; `rest` starts at field 3.
    let field = |n: usize| -> Option<u64> { f.get(n - 3)?.parse().ok() };
    // SAFETY: sysconf has no preconditions.
    let (tick, page) = unsafe {
        (
            libc::sysconf(libc::_SC_CLK_TCK),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    let (tick, page) = (tick.max(1) as f64, page.max(1) as u64);
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<u64>().ok())?;
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    Some(ProcessFigures {
        cpu_seconds: (field(14)? + field(15)?) as f64 / tick,
        resident_bytes: field(24)? * page,
        virtual_bytes: field(23)?,
        open_fds,
        start_time_seconds: boot as f64 + field(22)? as f64 / tick,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_its_own_process() {
        let p = super::figures().expect("/proc/self");
        assert!(p.resident_bytes > 1 << 20, "{}", p.resident_bytes);
        assert!(p.virtual_bytes >= p.resident_bytes);
        assert!(p.open_fds >= 3);
        // Started after 2020 and not in the future.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(p.start_time_seconds > 1.5e9 && p.start_time_seconds <= now + 1.0);
    }
}
