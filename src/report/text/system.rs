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
    for t in &s.workload.threads {
        let _ = writeln!(
            out,
            "workload thread {} {}: {} rt_priority {}, nice {}, CPUs {}",
            or_null(t.tid.map(|v| v as i64)),
            Esc(t.comm.as_deref().unwrap_or("")),
            Esc(t.policy.as_deref().unwrap_or("")),
            or_null(t.rt_priority),
            or_null(t.nice),
            Esc(t.cpus_allowed.as_deref().unwrap_or("?"))
        );
    }
    out.push('\n');
}
