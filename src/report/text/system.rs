//! The settings of the snapshot that matter for the reported devices. The
//! snapshot comes with the capture: its strings are printed escaped.

use super::*;

/// The settings that matter for the devices of this report.
pub(super) fn snapshot(out: &mut String, a: &Analysis) {
    let Some(s) = &a.snapshot else { return };
    let b = &s.before;
    let _ = writeln!(
        out,
        "==================== System (snapshot before the run) ====================\n"
    );
    if let Some(r) = &b.kernel.release {
        let _ = writeln!(
            out,
            "kernel {}, CPUs {}",
            Esc(r),
            Esc(b.cpus.online.as_deref().unwrap_or("?"))
        );
    }
    for d in &a.block.devices {
        let Some((name, info)) = s.device(&d.device) else {
            continue;
        };
        let get = |k: &str| escape(&info.setting(k).unwrap_or_else(|| "-".into())).into_owned();
        let _ = writeln!(
            out,
            "{} ({}): scheduler {}, nomerges {}, max_sectors_kb {}, read_ahead_kb {}, nr_requests {}, rotational {}, wbt_lat_usec {}, write_cache {}",
            Esc(name),
            Esc(&d.device),
            get("scheduler"),
            get("nomerges"),
            get("max_sectors_kb"),
            get("read_ahead_kb"),
            get("nr_requests"),
            get("rotational"),
            get("wbt_lat_usec"),
            get("write_cache")
        );
        for (list, label) in [(&info.holders, "used by"), (&info.slaves, "built on")] {
            if !list.is_empty() {
                let _ = writeln!(out, "  {label}: {}", join_escaped(list, ", "));
            }
        }
    }
    let vm = |k: &str| {
        b.vm.get(k)
            .cloned()
            .flatten()
            .map(|v| escape(&v).into_owned())
    };
    let sched = |k: &str| {
        b.sched
            .get(k)
            .cloned()
            .flatten()
            .map(|v| escape(&v).into_owned())
    };
    let _ = writeln!(
        out,
        "vm.dirty_ratio {}, dirty_background_ratio {}, dirty_bytes {}; sched_rt_runtime_us {} of {}",
        vm("dirty_ratio").as_deref().unwrap_or("-"),
        vm("dirty_background_ratio").as_deref().unwrap_or("-"),
        vm("dirty_bytes").as_deref().unwrap_or("-"),
        sched("sched_rt_runtime_us").as_deref().unwrap_or("-"),
        sched("sched_rt_period_us").as_deref().unwrap_or("-")
    );
    // Numbers the snapshot lacks show as JSON's `null`.
    let or_null = |v: Option<i64>| v.map_or("null".to_string(), |v| v.to_string());
    // Threads with the same name and settings are one line: a workload of
    // 64 writers is one setting, not 64.
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for t in &s.workload.threads {
        let key = format!(
            "{}: {} rt_priority {}, nice {}, CPUs {}",
            Esc(t.comm.as_deref().unwrap_or("")),
            Esc(t.policy.as_deref().unwrap_or("")),
            or_null(t.rt_priority),
            or_null(t.nice),
            Esc(t.cpus_allowed.as_deref().unwrap_or("?"))
        );
        let tid = or_null(t.tid.map(|v| v as i64));
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, tids)) => tids.push(tid),
            None => groups.push((key, vec![tid])),
        }
    }
    for (key, tids) in groups {
        let (name, settings) = key.split_once(": ").unwrap_or((&key, ""));
        if tids.len() == 1 {
            let _ = writeln!(out, "workload thread {} {name}: {settings}", tids[0]);
        } else {
            let _ = writeln!(
                out,
                "workload threads {name}, {} of them ({}): {settings}",
                tids.len(),
                tid_ranges(&tids)
            );
        }
    }
    out.push('\n');
}

/// `6146-6210, 7001`: thread ids, consecutive ones as ranges (ids that are
/// not numbers kept as they are).
fn tid_ranges(tids: &[String]) -> String {
    let mut nums: Vec<u64> = tids.iter().filter_map(|t| t.parse().ok()).collect();
    nums.sort_unstable();
    let mut parts = crate::model::units::ranges(&nums);
    parts.extend(tids.iter().filter(|t| t.parse::<u64>().is_err()).cloned());
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn thread_ids_read_as_ranges() {
        let t =
            |v: &[&str]| super::tid_ranges(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(t(&["3", "1", "2", "7", "null"]), "1-3, 7, null");
        assert_eq!(t(&["5"]), "5");
    }
}
