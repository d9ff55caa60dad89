//! One truth in every output: for every committed fixture, the trace's
//! span and time zero, the events, the requests completed per device,
//! their D2C p50 and p99, and the operations per kind with their p50 and
//! p99 read the same in the text report, the JSON, the HTML page, the
//! Perfetto trace (decoded with Perfetto's messages) and the Parquet
//! tables (read by DuckDB).
//!
//! Percentiles have one definition (docs/report.md): the nearest rank.
//! Perfetto and Parquet hold each value, so their nearest rank is exact;
//! `report` prints the middle of the log-linear bucket that holds it,
//! within 1/256 of it.

use crate::common;
use crate::golden::fixtures;
use crate::perfetto_export::{export as perfetto, Decoded};
use common::python::{python_with, run_json};
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn stdout_of(args: &[&str]) -> String {
    let o = outcome(args);
    assert_eq!(o.code, 0, "{args:?}: {}", o.stderr);
    o.stdout
}

fn html_page(cap: &str) -> String {
    let d = tempdir();
    let out = d.path().join("page.html");
    let o = outcome(&[
        "report",
        cap,
        "--format",
        "html",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{cap}: {}", o.stderr);
    std::fs::read_to_string(out).unwrap()
}

/// `printed` is report's bucket middle for the exact nearest rank `exact`.
fn assert_percentile(exact: f64, printed: f64, what: &str) {
    assert!(
        (exact - printed).abs() <= exact / 256.0 + 1.0,
        "{what}: the exact nearest rank is {exact} ns, report says {printed} ns"
    );
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Everything DuckDB gives from the tables, per capture.
const DUCKDB: &str = r#"
import duckdb, json, sys
root = sys.argv[1]
def t(name):
    return f"read_parquet('{root}/{name}/*/*/*.parquet', hive_partitioning = true)"
q = lambda sql: duckdb.sql(sql).fetchall()
out = {"captures": {}, "devices": {}, "operations": {}}
for capture, origin, first, last, seconds, events, completed, table in q(f"""
    select capture, origin_ns, first_ns, last_ns, seconds, events, requests_completed, requests_table
    from {t('captures')}"""):
    out["captures"][capture] = dict(origin_ns=origin, first_ns=first, last_ns=last, seconds=seconds,
                                    events=events, requests_completed=completed, requests_table=table)
for capture, device, rows, d2c, p50, p99, first_q in q(f"""
    select capture, device, count(*), count(d2c_ns), quantile_disc(d2c_ns, 0.5),
           quantile_disc(d2c_ns, 0.99), min(queued_ns)
    from {t('requests')} group by all"""):
    out["devices"][f"{capture}/{device}"] = dict(rows=rows, d2c=d2c, p50=p50, p99=p99, first_queued_ns=first_q)
for capture, kind, n, p50, p99 in q(f"""
    select capture, kind, count(*), quantile_disc(latency_ns, 0.5), quantile_disc(latency_ns, 0.99)
    from {t('operations')} group by all"""):
    out["operations"][f"{capture}/{kind}"] = dict(n=n, p50=p50, p99=p99)
print(json.dumps(out))
"#;

/// The first line of the text report: seconds, events, the origin.
fn text_header(text: &str) -> (String, u64, String) {
    let line = text.lines().next().unwrap();
    let rest = line.strip_prefix("iosleuth report: ").unwrap();
    let (secs, rest) = rest.split_once(" s of trace, ").unwrap();
    let (events, rest) = rest.split_once(" events").unwrap();
    let origin = rest
        .split_once('(')
        .and_then(|(_, r)| r.split_once(" on the trace clock)"))
        .map(|(o, _)| o.to_string())
        .unwrap_or_else(|| panic!("no origin in {line:?}"));
    (secs.into(), events.parse().unwrap(), origin)
}

/// A device's section of the text report.
fn text_device<'a>(text: &'a str, dev: &str) -> &'a str {
    let head = format!("==================== Device {dev} ====================");
    let at = text
        .find(&head)
        .unwrap_or_else(|| panic!("no section {head}"));
    let body = &text[at + head.len()..];
    &body[..body.find("\n====================").unwrap_or(body.len())]
}

/// The first screen's operations table: kind → (count, p50 ms, p99 ms).
fn text_operations(text: &str) -> BTreeMap<String, (u64, String, String)> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines().skip_while(|l| !l.starts_with("operations "));
    lines.next();
    for l in lines.take_while(|l| l.starts_with("  ")) {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols[0] == "…" || cols.len() < 5 {
            continue;
        }
        let n = cols.len();
        out.insert(
            cols[..n - 4].join(" "),
            (
                cols[n - 4].parse().unwrap(),
                cols[n - 3].to_string(),
                cols[n - 2].to_string(),
            ),
        );
    }
    out
}

/// The JSON's latency figures of one kind of operation, as the first
/// screen and the Syscalls section name it.
fn json_latency<'a>(rep: &'a Value, kind: &str) -> Option<&'a Value> {
    let l = if let Some(call) = kind.strip_prefix("syscall ") {
        &rep["syscalls"]["by_name"][call]["latency"]
    } else if let Some(op) = kind.strip_prefix("probe ") {
        &rep["syscalls"]["operations"][op]["latency"]
    } else if let Some(op) = kind.strip_prefix("io_uring ") {
        &rep["outliers"]["io_uring"]["by_op"][op]["latency"]
    } else if let Some(k) = kind.strip_prefix("fault ") {
        &rep["outliers"]["faults"]["by_kind"][k]["latency"]
    } else if kind == "ext4_sync_file" || kind == "fsync in the filesystem" {
        &rep["fs"]["fsync"]["latency"]
    } else {
        return None;
    };
    (!l.is_null()).then_some(l)
}

/// A chart's bars: the sum of the counts their titles give.
fn html_histogram_total(html: &str, label: &str) -> Option<u64> {
    let at = html.find(&format!("aria-label=\"{label}\""))?;
    let chart = &html[at..at + html[at..].find("</svg>").unwrap()];
    Some(
        chart
            .split("<rect class=\"bar\"")
            .skip(1)
            .map(|b| {
                let title = b.split("<title>").nth(1).unwrap();
                let title = title.split("</title>").next().unwrap();
                title.rsplit(": ").next().unwrap().parse::<u64>().unwrap()
            })
            .sum(),
    )
}

/// Requests on one device's lanes in the Perfetto trace.
fn perfetto_requests<'a>(t: &'a Decoded, dev: &'a str) -> Vec<&'a crate::perfetto_export::Slice> {
    t.slices
        .iter()
        .filter(|s| {
            let p = t.path(s.0);
            p.len() == 3 && p[0] == "requests" && p[1].contains(dev) && p[2] == "Block devices"
        })
        .collect()
}

/// Operations of one kind in the Perfetto trace: syscalls on the thread
/// track itself, the others on a child track named by their kind.
fn perfetto_operations<'a>(
    t: &'a Decoded,
    kind: &'a str,
) -> Vec<&'a crate::perfetto_export::Slice> {
    match kind.strip_prefix("syscall ") {
        Some(call) => t
            .slices
            .iter()
            .filter(|s| s.3 == call && t.tracks[&s.0].2.is_some())
            .collect(),
        None => t
            .slices
            .iter()
            .filter(|s| t.path(s.0).first() == Some(&kind))
            .collect(),
    }
}

#[test]
#[ignore = "needs DuckDB: scripts/test installs it and runs it"]
fn every_output_gives_the_same_counts_percentiles_and_spans() {
    let py = python_with(&["duckdb"]);
    let d = tempdir();
    let root = d.path().join("tables");
    let caps: Vec<String> = fixtures()
        .iter()
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    let mut args = vec!["export", "--parquet", root.to_str().unwrap()];
    args.extend(caps.iter().map(String::as_str));
    stdout_of(&args);
    let duck = run_json(&py, DUCKDB, &[root.to_str().unwrap()]);
    let mut checked = (0, 0, 0);
    for cap in &caps {
        let name = Path::new(cap).file_name().unwrap().to_str().unwrap();
        let rep = json_report(&[cap], &[]);
        let text = stdout_of(&["report", cap]);
        let html = html_page(cap);
        let pf = perfetto(cap);
        let light = !rep["light"].is_null();
        let span = &rep["span"];
        let (origin, last) = (u(&span["origin_ns"]), u(&span["last_ns"]));

        // The span and the time zero.
        let (secs, events, text_origin) = text_header(&text);
        assert_eq!(
            secs,
            format!("{:.3}", span["seconds"].as_f64().unwrap()),
            "{name}"
        );
        assert_eq!(events, u(&rep["events"]), "{name}: events");
        assert_eq!(
            text_origin,
            format!("{}.{:09}", origin / 1_000_000_000, origin % 1_000_000_000),
            "{name}: the origin"
        );
        assert!(
            html.contains(&format!("{events} events over {secs} s")),
            "{name}: the page's span"
        );
        let trace: Vec<_> = pf.on(&["Trace"]).collect();
        assert_eq!(trace.len(), 1, "{name}: one trace slice");
        assert_eq!(
            (trace[0].1, trace[0].2),
            (origin, last),
            "{name}: Perfetto's span"
        );
        let early: Vec<_> = pf.slices.iter().filter(|s| s.1 < origin).take(3).collect();
        assert_eq!(
            pf.first_ts,
            Some(origin),
            "{name}: Perfetto's zero is the report's; slices before it: {early:?}"
        );
        let dc = &duck["captures"][name];
        assert_eq!(u(&dc["origin_ns"]), origin, "{name}");
        assert_eq!(dc["first_ns"], span["first_ns"], "{name}");
        assert_eq!(dc["last_ns"], span["last_ns"], "{name}");
        assert_eq!(dc["events"], rep["events"], "{name}");
        assert!((dc["seconds"].as_f64().unwrap() - span["seconds"].as_f64().unwrap()).abs() < 1e-9);

        // Requests per device, and their D2C.
        let devices = rep["devices"].as_array().unwrap();
        let completed_all: u64 = devices
            .iter()
            .map(|d| {
                d["completed"]
                    .as_object()
                    .unwrap()
                    .values()
                    .map(u)
                    .sum::<u64>()
            })
            .sum();
        assert_eq!(u(&dc["requests_completed"]), completed_all, "{name}");
        for dev in devices {
            let id = dev["device"].as_str().unwrap();
            let what = format!("{name} {id}");
            let completed: u64 = dev["completed"].as_object().unwrap().values().map(u).sum();
            let section = text_device(&text, id);
            assert!(
                section.contains(&format!("requests completed: {completed} (")),
                "{what}: text says otherwise"
            );
            assert!(
                html.contains(&format!("<h2>Device {id}</h2>")),
                "{what}: no page section"
            );
            let on_lanes = perfetto_requests(&pf, id);
            let rows = &duck["devices"][format!("{name}/{id}")];
            let rows_n = rows["rows"].as_u64().unwrap_or(0);
            if light {
                // Counted in the kernel; only the slow requests are rows.
                let slow = rep["light"]["devices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|d| d["device"] == dev["device"])
                    .map(|d| u(&d["counters"]["slow_sent"]))
                    .unwrap_or_else(|| panic!("{what}: no light counters"));
                assert!(
                    text.contains(&format!("slow requests: {slow} recorded")),
                    "{what}: text's slow requests"
                );
                assert_eq!(
                    on_lanes.len() as u64,
                    slow,
                    "{what}: Perfetto's slow requests"
                );
                assert_eq!(rows_n, slow, "{what}: Parquet's slow requests");
                assert_eq!(dc["requests_table"], "slow requests only (light capture)");
            } else {
                assert_eq!(
                    on_lanes.len() as u64,
                    completed,
                    "{what}: Perfetto's requests"
                );
                assert_eq!(rows_n, completed, "{what}: Parquet's requests");
                assert_eq!(dc["requests_table"], "every request");
            }
            let d2c = &dev["d2c"];
            let n = d2c["count"].as_u64().unwrap_or(0);
            if n == 0 {
                continue;
            }
            checked.0 += 1;
            let chart = format!("{id}: D2C latency histogram");
            assert_eq!(
                html_histogram_total(&html, &chart),
                Some(n),
                "{what}: the page's D2C histogram"
            );
            if light {
                // Per operation, from the kernel's histograms.
                let rows: u64 = section
                    .lines()
                    .filter(|l| l.contains(" device (D2C) "))
                    .map(|l| l.split(" device (D2C) ").nth(1).unwrap())
                    .map(|r| r.split_whitespace().next().unwrap().parse::<u64>().unwrap())
                    .sum();
                assert_eq!(rows, n, "{what}: text's D2C rows");
                continue;
            }
            let row: Vec<&str> = section
                .lines()
                .find(|l| l.starts_with("  D2C "))
                .unwrap_or_else(|| panic!("{what}: no D2C row"))
                .split_whitespace()
                .collect();
            let us = |v: &Value| format!("{:.1}", v.as_f64().unwrap() / 1e3);
            assert_eq!(row[1], n.to_string(), "{what}: text's D2C count");
            assert_eq!(row[3], us(&d2c["p50"]), "{what}: text's D2C p50");
            assert_eq!(row[5], us(&d2c["p99"]), "{what}: text's D2C p99");
            let mut exact: Vec<u64> = on_lanes
                .iter()
                .filter_map(|s| s.4.get("d2c_ns").map(|&v| v as u64))
                .collect();
            assert_eq!(exact.len() as u64, n, "{what}: Perfetto's D2C");
            assert_eq!(u(&rows["d2c"]), n, "{what}: Parquet's D2C");
            for (p, key) in [(50.0, "p50"), (99.0, "p99")] {
                let printed = d2c[key].as_f64().unwrap();
                let pf = nearest_rank(&mut exact, p).unwrap() as f64;
                assert_percentile(pf, printed, &format!("{what}: Perfetto's D2C {key}"));
                let pq = rows[key].as_f64().unwrap();
                assert_eq!(pq, pf, "{what}: DuckDB's and Perfetto's D2C {key}");
            }
            assert!(
                u(&rows["first_queued_ns"]) >= origin,
                "{what}: a request before the origin"
            );
        }

        // Operations per kind.
        for (kind, total) in rep["outliers"]["totals"].as_object().unwrap() {
            let what = format!("{name} {kind}");
            let n = u(&total["count"]);
            let slices = perfetto_operations(&pf, kind);
            assert_eq!(slices.len() as u64, n, "{what}: Perfetto's operations");
            let ops = &duck["operations"][format!("{name}/{kind}")];
            assert_eq!(ops["n"].as_u64(), Some(n), "{what}: Parquet's operations");
            let Some(lat) = json_latency(&rep, kind) else {
                continue;
            };
            checked.1 += 1;
            assert_eq!(u(&lat["count"]), n, "{what}: the Syscalls section's count");
            let mut exact: Vec<u64> = slices.iter().map(|s| s.2 - s.1).collect();
            for (p, key) in [(50.0, "p50"), (99.0, "p99")] {
                let printed = lat[key].as_f64().unwrap();
                let pf = nearest_rank(&mut exact, p).unwrap() as f64;
                assert_percentile(pf, printed, &format!("{what}: Perfetto's {key}"));
                assert_eq!(ops[key].as_f64(), Some(pf), "{what}: DuckDB's {key}");
            }
        }
        // The first screen's rows say what the JSON says.
        for (kind, (count, p50, p99)) in text_operations(&text) {
            let lat = json_latency(&rep, &kind)
                .unwrap_or_else(|| panic!("{name}: {kind} on the first screen, not in the JSON"));
            checked.2 += 1;
            let ms = |v: &Value| format!("{:.3}", v.as_f64().unwrap() / 1e6);
            assert_eq!(count, u(&lat["count"]), "{name} {kind}");
            assert_eq!(p50, ms(&lat["p50"]), "{name} {kind}: p50");
            assert_eq!(p99, ms(&lat["p99"]), "{name} {kind}: p99");
        }
    }
    // Most fixtures have requests, and many have operations.
    assert!(checked.0 >= 40, "devices with D2C compared: {}", checked.0);
    assert!(
        checked.1 >= 15,
        "kinds of operations compared: {}",
        checked.1
    );
    assert!(checked.2 >= 30, "first-screen rows compared: {}", checked.2);
}
