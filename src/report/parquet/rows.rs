//! Each table's columns, and how a row of the analysis becomes a row of
//! the table. Times of the trace are `_ns` columns in the trace's clock
//! (CLOCK_MONOTONIC for iosleuth captures); `capture_time` is wall-clock.

use super::table::{
    float, int, opt_int, opt_text, opt_timestamp, text, Cell, Column, Result, TableWriter,
};
use super::Partition;
use crate::analyze::block::iostat::OpKind;
use crate::analyze::rows::{OperationRow, RequestRow, ThreadState, ThreadStateRow};
use crate::analyze::Analysis;
use crate::diagnose::Finding;

/// Columns every table starts with.
macro_rules! common {
    ($($c:expr),* $(,)?) => {
        &[
            opt_text("kernel"),
            opt_timestamp("capture_time"),
            opt_text("capture_time_source"),
            $($c),*
        ]
    };
}

const REQUESTS: &[Column] = common![
    int("request_id"),
    text("device"),
    int("major"),
    int("minor"),
    int("sector"),
    int("sectors"),
    int("size_bytes"),
    text("op"),
    text("rwbs"),
    int("queued_ns"),
    opt_int("allocated_ns"),
    opt_int("inserted_ns"),
    opt_int("issued_ns"),
    int("completed_ns"),
    int("q2c_ns"),
    opt_int("d2c_ns"),
    int("bios"),
    int("tid"),
    opt_int("pid"),
    text("comm"),
    int("error"),
];

const OPERATIONS: &[Column] = common![
    int("op_id"),
    opt_int("parent_op_id"),
    text("kind"),
    int("tid"),
    opt_int("pid"),
    text("comm"),
    int("start_ns"),
    int("end_ns"),
    int("latency_ns"),
    opt_text("device"),
    opt_int("on_cpu_ns"),
    opt_int("runnable_ns"),
    int("not_recorded_ns"),
    int("device_ns"),
    int("queued_ns"),
    int("journal_ns"),
    int("journal_space_ns"),
    int("other_wait_ns"),
    int("asleep_ns"),
    int("cpu_idle_ns"),
];

const WAITED_FOR: &[Column] = common![int("op_id"), int("request_id"), int("waited_ns")];

const SCHED_WAITS: &[Column] = common![
    int("tid"),
    opt_int("pid"),
    text("comm"),
    text("state"),
    int("start_ns"),
    int("end_ns"),
    int("duration_ns"),
    opt_int("cpu"),
];

/// iostat's columns, by their name in iosleuth's JSON (`r/s`) and as a
/// column, with its unit (`reads_per_s`): SQL names cannot hold `/`, `-`
/// or `%`, and a name without its unit is a guess.
pub const IOSTAT_FIELDS: &[(&str, &str)] = &[
    ("start_s", "start_s"),
    ("seconds", "interval_s"),
    ("r/s", "reads_per_s"),
    ("w/s", "writes_per_s"),
    ("d/s", "discards_per_s"),
    ("f/s", "flushes_per_s"),
    ("rkB/s", "read_kib_per_s"),
    ("wkB/s", "write_kib_per_s"),
    ("dkB/s", "discard_kib_per_s"),
    ("rrqm/s", "read_merges_per_s"),
    ("wrqm/s", "write_merges_per_s"),
    ("drqm/s", "discard_merges_per_s"),
    ("r_await", "read_await_ms"),
    ("w_await", "write_await_ms"),
    ("d_await", "discard_await_ms"),
    ("f_await", "flush_await_ms"),
    ("aqu-sz", "avg_queue_requests"),
    ("rareq-sz", "read_request_kib"),
    ("wareq-sz", "write_request_kib"),
    ("dareq-sz", "discard_request_kib"),
    ("%util", "util_pct"),
];

const CAPTURES: &[Column] = common![
    int("origin_ns"),
    int("first_ns"),
    int("last_ns"),
    float("seconds"),
    int("events"),
    int("requests_completed"),
    text("requests_table"),
];

const IOSTAT: &[Column] = common![
    text("device"),
    float("start_s"),
    float("interval_s"),
    float("reads_per_s"),
    float("writes_per_s"),
    float("discards_per_s"),
    float("flushes_per_s"),
    float("read_kib_per_s"),
    float("write_kib_per_s"),
    float("discard_kib_per_s"),
    float("read_merges_per_s"),
    float("write_merges_per_s"),
    float("discard_merges_per_s"),
    float("read_await_ms"),
    float("write_await_ms"),
    float("discard_await_ms"),
    float("flush_await_ms"),
    float("avg_queue_requests"),
    float("read_request_kib"),
    float("write_request_kib"),
    float("discard_request_kib"),
    float("util_pct"),
];

const FINDINGS: &[Column] = common![
    int("rank"),
    text("id"),
    text("severity"),
    text("title"),
    text("explanation"),
    text("workaround"),
    text("evidence_json"),
];

/// The queue settings the rules read, typed: one row per block device
/// of the snapshot (`/sys/block/DEV/queue/KEY`, sysfs's `kb` is KiB).
pub const DEVICE_KNOBS: &[(&str, &str)] = &[
    ("nomerges", "nomerges"),
    ("max_sectors_kb", "max_sectors_kib"),
    ("max_hw_sectors_kb", "max_hw_sectors_kib"),
    ("read_ahead_kb", "read_ahead_kib"),
    ("nr_requests", "nr_requests"),
    ("wbt_lat_usec", "wbt_lat_us"),
    ("rotational", "rotational"),
];

const DEVICE_SETTINGS: &[Column] = common![
    opt_text("device"),
    text("name"),
    opt_text("scheduler"),
    opt_int("nomerges"),
    opt_int("max_sectors_kib"),
    opt_int("max_hw_sectors_kib"),
    opt_int("read_ahead_kib"),
    opt_int("nr_requests"),
    opt_int("wbt_lat_us"),
    opt_int("rotational"),
];

/// The system settings the rules read, typed: `/proc/sys/vm/KEY` and
/// `/proc/sys/kernel/KEY`, and what a value is multiplied by for the
/// column's unit (centiseconds become ms).
pub const SYSTEM_KNOBS: &[(&str, &str, &str, i64)] = &[
    ("vm", "dirty_ratio", "dirty_ratio_pct", 1),
    ("vm", "dirty_bytes", "dirty_bytes", 1),
    (
        "vm",
        "dirty_background_ratio",
        "dirty_background_ratio_pct",
        1,
    ),
    ("vm", "dirty_background_bytes", "dirty_background_bytes", 1),
    ("vm", "dirty_expire_centisecs", "dirty_expire_ms", 10),
    ("vm", "dirty_writeback_centisecs", "dirty_writeback_ms", 10),
    ("sched", "sched_rt_runtime_us", "sched_rt_runtime_us", 1),
    ("sched", "sched_rt_period_us", "sched_rt_period_us", 1),
];

const SYSTEM_SETTINGS: &[Column] = common![
    opt_int("dirty_ratio_pct"),
    opt_int("dirty_bytes"),
    opt_int("dirty_background_ratio_pct"),
    opt_int("dirty_background_bytes"),
    opt_int("dirty_expire_ms"),
    opt_int("dirty_writeback_ms"),
    opt_int("sched_rt_runtime_us"),
    opt_int("sched_rt_period_us"),
];

const SETTINGS: &[Column] = common![text("key"), text("value")];

pub fn columns(table: &str) -> &'static [Column] {
    match table {
        "requests" => REQUESTS,
        "operations" => OPERATIONS,
        "waited_for" => WAITED_FOR,
        "sched_waits" => SCHED_WAITS,
        "captures" => CAPTURES,
        "iostat" => IOSTAT,
        "findings" => FINDINGS,
        "device_settings" => DEVICE_SETTINGS,
        "system_settings" => SYSTEM_SETTINGS,
        "settings" => SETTINGS,
        _ => unreachable!("unknown table {table}"),
    }
}

fn op_name(op: OpKind) -> &'static str {
    match op {
        OpKind::Read => "read",
        OpKind::Write => "write",
        OpKind::Discard => "discard",
        OpKind::Flush => "flush",
    }
}

/// A row: the common cells, then `rest`.
fn push(w: &mut TableWriter, p: &Partition, rest: &[Cell]) -> Result<()> {
    let mut row = Vec::with_capacity(rest.len() + 3);
    row.push(p.kernel.as_deref().into());
    row.push(p.capture_time_us.into());
    row.push(p.capture_time_source.map(|s| s.name()).into());
    row.extend_from_slice(rest);
    w.push(&row)
}

pub fn request(w: &mut TableWriter, p: &Partition, r: &RequestRow) -> Result<()> {
    let device = format!("{},{}", r.dev.major(), r.dev.minor());
    let rwbs = r.rwbs.to_string();
    push(
        w,
        p,
        &[
            r.id.into(),
            Cell::Text(&device),
            r.dev.major().into(),
            r.dev.minor().into(),
            r.sector.into(),
            r.sectors.into(),
            (r.sectors * 512).into(),
            Cell::Text(op_name(r.op)),
            Cell::Text(&rwbs),
            r.queued_ns.into(),
            r.allocated_ns.into(),
            r.inserted_ns.into(),
            r.issued_ns.into(),
            r.completed_ns.into(),
            r.completed_ns.saturating_sub(r.queued_ns).into(),
            r.issued_ns.map(|d| r.completed_ns.saturating_sub(d)).into(),
            r.bios.into(),
            r.pid.into(),
            p.process_of(r.pid, r.process).into(),
            Cell::Text(r.comm.as_str()),
            r.error.into(),
        ],
    )
}

pub fn operation(w: &mut TableWriter, p: &Partition, o: &OperationRow) -> Result<()> {
    let b = &o.breakdown;
    let device = o.dev.map(|d| format!("{},{}", d.major(), d.minor()));
    push(
        w,
        p,
        &[
            o.id.into(),
            o.parent.into(),
            Cell::Text(&o.kind),
            o.pid.into(),
            p.process_of(o.pid, o.process).into(),
            Cell::Text(&o.comm),
            o.start_ns.into(),
            (o.start_ns + o.latency_ns).into(),
            o.latency_ns.into(),
            device.as_deref().into(),
            // Unknown is not zero: no CPU figures where the thread's
            // state was not recorded.
            (b.not_recorded_ns == 0).then_some(b.on_cpu_ns).into(),
            (b.not_recorded_ns == 0).then_some(b.runnable_ns).into(),
            b.not_recorded_ns.into(),
            b.device_ns.values().sum::<u64>().into(),
            b.queued_ns.into(),
            b.journal_ns.into(),
            b.journal_space_ns.into(),
            b.other_wait_ns.into(),
            b.asleep_ns.into(),
            b.cpu_idle_ns.into(),
        ],
    )
}

/// An operation's requests: a row per request it waited for.
pub fn waited_for(w: &mut TableWriter, p: &Partition, o: &OperationRow) -> Result<()> {
    for &(request, ns) in &o.waited_for {
        push(w, p, &[o.id.into(), request.into(), ns.into()])?;
    }
    Ok(())
}

/// Waits only: running stretches are the CPU profile's business, and
/// would be most of the rows.
pub fn sched_wait(w: &mut TableWriter, p: &Partition, s: &ThreadStateRow) -> Result<()> {
    if s.state == ThreadState::Running {
        return Ok(());
    }
    push(
        w,
        p,
        &[
            s.pid.into(),
            p.process_of(s.pid, s.process).into(),
            Cell::Text(s.comm.as_str()),
            Cell::Text(s.state.name()),
            s.start_ns.into(),
            s.end_ns.into(),
            (s.end_ns - s.start_ns).into(),
            s.cpu.into(),
        ],
    )
}

/// The capture itself: its clock (the origin every relative time of
/// `report` counts from) and how many requests completed, as `report`
/// counts them (a light capture's `requests` rows are its slow ones only).
pub fn capture(w: &mut TableWriter, p: &Partition, a: &Analysis) -> Result<()> {
    let completed: u64 = a.block.devices.iter().map(|d| d.completed.total()).sum();
    let span = a.span;
    push(
        w,
        p,
        &[
            crate::report::origin_ns(a).into(),
            span.first_ns.into(),
            span.last_ns.into(),
            Cell::Float(span.last_ns.saturating_sub(span.first_ns) as f64 / 1e9),
            a.events.into(),
            completed.into(),
            Cell::Text(if a.light.is_some() {
                "slow requests only (light capture)"
            } else {
                "every request"
            }),
        ],
    )
}

pub fn iostat(w: &mut TableWriter, p: &Partition, a: &Analysis) -> Result<()> {
    for d in &a.block.devices {
        for row in &d.iostat {
            let v = serde_json::to_value(row).expect("iostat rows serialize");
            let mut cells = vec![Cell::Text(&d.device)];
            for (json, _) in IOSTAT_FIELDS {
                cells.push(Cell::Float(v[json].as_f64().unwrap_or(f64::NAN)));
            }
            push(w, p, &cells)?;
        }
    }
    Ok(())
}

pub fn findings(w: &mut TableWriter, p: &Partition, found: &[Finding]) -> Result<()> {
    for (i, f) in found.iter().enumerate() {
        let evidence = f.evidence.to_string();
        push(
            w,
            p,
            &[
                (i as u64 + 1).into(),
                Cell::Text(f.id),
                Cell::Text(f.severity.name()),
                Cell::Text(&f.title),
                Cell::Text(&f.explanation),
                Cell::Text(&f.workaround),
                Cell::Text(&evidence),
            ],
        )?;
    }
    Ok(())
}

/// The snapshot as key/value rows: `before.vm.dirty_ratio` → `20`.
pub fn settings(
    w: &mut TableWriter,
    p: &Partition,
    snap: Option<&crate::model::snapshot::Snapshot>,
) -> Result<()> {
    let Some(s) = snap else { return Ok(()) };
    let mut flat = Vec::new();
    flatten("", &s.raw, &mut flat);
    for (k, v) in &flat {
        push(w, p, &[Cell::Text(k), Cell::Text(v)])?;
    }
    Ok(())
}

/// A setting as an integer; unknown (unreadable, or not a number) is NULL.
fn number(v: Option<&str>) -> Option<i64> {
    v?.trim().parse().ok()
}

/// A row per block device of the snapshot, its queue settings typed.
pub fn device_settings(
    w: &mut TableWriter,
    p: &Partition,
    snap: Option<&crate::model::snapshot::Snapshot>,
) -> Result<()> {
    let Some(s) = snap else { return Ok(()) };
    for (name, d) in &s.before.block_devices {
        let device = d.dev.as_deref().map(|v| v.replace(':', ","));
        let scheduler = d.setting("scheduler");
        let mut cells: Vec<Cell> = vec![
            device.as_deref().into(),
            Cell::Text(name),
            scheduler.as_deref().into(),
        ];
        for (key, _) in DEVICE_KNOBS {
            cells.push(number(d.setting(key).as_deref()).into());
        }
        push(w, p, &cells)?;
    }
    Ok(())
}

/// One row: the system settings the rules read, typed, in their column's
/// unit.
pub fn system_settings(
    w: &mut TableWriter,
    p: &Partition,
    snap: Option<&crate::model::snapshot::Snapshot>,
) -> Result<()> {
    let Some(s) = snap else { return Ok(()) };
    let b = &s.before;
    let cells: Vec<Cell> = SYSTEM_KNOBS
        .iter()
        .map(|(group, key, _, times)| {
            let map = if *group == "vm" { &b.vm } else { &b.sched };
            let v = map.get(*key).and_then(|v| v.as_deref());
            number(v).map(|n| n.saturating_mul(*times)).into()
        })
        .collect();
    push(w, p, &cells)
}

fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    use serde_json::Value;
    let key = |k: &str| {
        if prefix.is_empty() {
            k.to_string()
        } else {
            format!("{prefix}.{k}")
        }
    };
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| flatten(&key(k), v, out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| flatten(&key(&i.to_string()), v, out)),
        Value::Null => {}
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_iostat_field_has_a_column() {
        let row = crate::analyze::block::iostat::IostatRow::default();
        let v = serde_json::to_value(row).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), IOSTAT_FIELDS.len(), "{keys:?}");
        for (json, col) in IOSTAT_FIELDS {
            assert!(v.get(json).is_some(), "{json}");
            assert!(IOSTAT.iter().any(|c| c.name == *col), "{col}");
        }
    }

    #[test]
    fn nested_settings_become_dotted_keys() {
        let mut out = Vec::new();
        flatten(
            "",
            &serde_json::json!({"before": {"vm": {"dirty_ratio": "20"}, "cpus": [1, 2]}}),
            &mut out,
        );
        assert!(out.contains(&("before.vm.dirty_ratio".into(), "20".into())));
        assert!(out.contains(&("before.cpus.1".into(), "2".into())));
    }
}
