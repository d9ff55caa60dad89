//! Each table's columns, and how a row of the analysis becomes a row of
//! the table. Times of the trace are `_ns` columns in the trace's clock
//! (CLOCK_MONOTONIC for iosleuth captures); `capture_time` is wall-clock.

use super::table::{
    float, int, opt_int, opt_text, text, timestamp, Cell, Column, Result, TableWriter,
};
use super::Partition;
use crate::analyze::block::iostat::OpKind;
use crate::analyze::rows::{OperationRow, RequestRow, ThreadState, ThreadStateRow};
use crate::analyze::Analysis;
use crate::diagnose::Finding;

/// Columns every table starts with.
macro_rules! common {
    ($($c:expr),* $(,)?) => {
        &[text("kernel"), timestamp("capture_time"), $($c),*]
    };
}

const REQUESTS: &[Column] = common![
    text("device"),
    int("major"),
    int("minor"),
    int("sector"),
    int("sectors"),
    int("bytes"),
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
    int("pid"),
    text("comm"),
    int("error"),
];

const OPERATIONS: &[Column] = common![
    text("kind"),
    int("pid"),
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

const SCHED_WAITS: &[Column] = common![
    int("pid"),
    text("comm"),
    text("state"),
    int("start_ns"),
    int("end_ns"),
    int("duration_ns"),
    opt_int("cpu"),
];

/// iostat's columns, by their name in iosleuth's JSON (`r/s`) and as a
/// column (`r_s`): SQL names cannot hold `/`, `-` or `%`.
pub const IOSTAT_FIELDS: &[(&str, &str)] = &[
    ("start_s", "start_s"),
    ("seconds", "seconds"),
    ("r/s", "r_s"),
    ("w/s", "w_s"),
    ("d/s", "d_s"),
    ("f/s", "f_s"),
    ("rkB/s", "rkb_s"),
    ("wkB/s", "wkb_s"),
    ("dkB/s", "dkb_s"),
    ("rrqm/s", "rrqm_s"),
    ("wrqm/s", "wrqm_s"),
    ("drqm/s", "drqm_s"),
    ("r_await", "r_await"),
    ("w_await", "w_await"),
    ("d_await", "d_await"),
    ("f_await", "f_await"),
    ("aqu-sz", "aqu_sz"),
    ("rareq-sz", "rareq_sz"),
    ("wareq-sz", "wareq_sz"),
    ("dareq-sz", "dareq_sz"),
    ("%util", "util"),
];

const IOSTAT: &[Column] = common![
    text("device"),
    float("start_s"),
    float("seconds"),
    float("r_s"),
    float("w_s"),
    float("d_s"),
    float("f_s"),
    float("rkb_s"),
    float("wkb_s"),
    float("dkb_s"),
    float("rrqm_s"),
    float("wrqm_s"),
    float("drqm_s"),
    float("r_await"),
    float("w_await"),
    float("d_await"),
    float("f_await"),
    float("aqu_sz"),
    float("rareq_sz"),
    float("wareq_sz"),
    float("dareq_sz"),
    float("util"),
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

const SETTINGS: &[Column] = common![text("key"), text("value")];

pub fn columns(table: &str) -> &'static [Column] {
    match table {
        "requests" => REQUESTS,
        "operations" => OPERATIONS,
        "sched_waits" => SCHED_WAITS,
        "iostat" => IOSTAT,
        "findings" => FINDINGS,
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
    let mut row = Vec::with_capacity(rest.len() + 2);
    row.push(Cell::Text(&p.kernel));
    row.push(Cell::Int(p.capture_time_us));
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
            Cell::Text(&o.kind),
            o.pid.into(),
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
            Cell::Text(s.comm.as_str()),
            Cell::Text(s.state.name()),
            s.start_ns.into(),
            s.end_ns.into(),
            (s.end_ns - s.start_ns).into(),
            s.cpu.into(),
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
