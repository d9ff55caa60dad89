//! docs/FORMATS.md against the code: every column of every Parquet table
//! written is documented, with its type and whether it may be NULL, and
//! every documented one is written; the DuckDB queries it gives run, as
//! written, on exported captures and answer what `report` says.

use crate::common;

use common::python::{python_with, run_json};
use common::*;
use parquet::basic::{LogicalType, Type as Physical};
use parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn formats() -> String {
    std::fs::read_to_string("docs/FORMATS.md").unwrap()
}

/// The part of `doc` from the heading `from` to the next heading of its
/// level.
fn section<'a>(doc: &'a str, from: &str) -> &'a str {
    let level = from.split(' ').next().unwrap();
    let start = doc.find(&format!("\n{from}\n")).expect(from) + from.len() + 2;
    let rest = &doc[start..];
    let end = rest.find(&format!("\n{level} ")).unwrap_or(rest.len());
    &rest[..end]
}

/// The first table's rows in `text`: column → (type, may be NULL).
fn columns(text: &str) -> BTreeMap<String, (String, bool)> {
    text.lines()
        .skip_while(|l| !l.starts_with("| `"))
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let name = cells[1].trim_matches('`').to_string();
            (name, (cells[2].to_string(), cells[3] == "yes"))
        })
        .collect()
}

/// Each documented table's columns, the columns every table starts with
/// first.
fn documented() -> BTreeMap<String, BTreeMap<String, (String, bool)>> {
    let doc = formats();
    let tables = section(&doc, "## Parquet tables");
    let common = columns(tables.split("\n### ").next().unwrap());
    assert!(common.contains_key("kernel"), "{common:?}");
    tables
        .split("\n### `")
        .skip(1)
        .map(|t| {
            let name = t.split('`').next().unwrap().to_string();
            let mut cols = common.clone();
            cols.extend(columns(t));
            (name, cols)
        })
        .collect()
}

/// A Parquet column's type as DuckDB names it.
fn duckdb_type(c: &parquet::schema::types::ColumnDescriptor) -> String {
    match (c.physical_type(), c.logical_type_ref()) {
        (Physical::INT64, Some(LogicalType::Timestamp { .. })) => "TIMESTAMP WITH TIME ZONE",
        (Physical::INT64, _) => "BIGINT",
        (Physical::DOUBLE, _) => "DOUBLE",
        (Physical::BYTE_ARRAY, _) => "VARCHAR",
        (other, _) => panic!("{}: unexpected type {other}", c.name()),
    }
    .to_string()
}

#[test]
fn every_column_written_is_documented_and_every_documented_one_written() {
    let d = tempdir();
    let root = d.path().join("tables");
    // A capture with a snapshot, requests, operations and thread states.
    let o = outcome(&[
        "export",
        "--parquet",
        root.to_str().unwrap(),
        "tests/fixtures/slowdev-fsync.cap",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let doc = documented();
    let mut written = Vec::new();
    for table in std::fs::read_dir(&root).unwrap() {
        let table = table.unwrap();
        let name = table.file_name().to_string_lossy().into_owned();
        let file = table
            .path()
            .join("host=__HIVE_DEFAULT_PARTITION__/capture=slowdev-fsync.cap/part-0.parquet");
        let r = SerializedFileReader::new(std::fs::File::open(&file).unwrap()).unwrap();
        let schema = r.metadata().file_metadata().schema_descr_ptr();
        let got: BTreeMap<String, (String, bool)> = schema
            .columns()
            .iter()
            .map(|c| {
                let optional = c.self_type().is_optional();
                (c.name().to_string(), (duckdb_type(c), optional))
            })
            .collect();
        let want = doc
            .get(&name)
            .unwrap_or_else(|| panic!("table {name} is written but not documented"));
        assert_eq!(&got, want, "table {name}: written vs documented");
        written.push(name);
    }
    written.sort();
    let documented: Vec<&String> = doc.keys().collect();
    assert_eq!(written.iter().collect::<Vec<_>>(), documented);
}

/// Captures of three hosts: two named by `--host`, one by its snapshot
/// (`vm`), one whose host is unknown (NULL).
const FLEET: &[(Option<&str>, &str)] = &[
    (Some("host-a"), "tests/fixtures/healthy-run1.cap"),
    (Some("host-a"), "tests/fixtures/queue-saturated.cap"),
    (None, "tests/fixtures/fuse-wait-bad.cap"),
    (None, "tests/fixtures/slowdev-fsync.cap"),
];

/// Runs each query (DIR replaced) and prints its rows as JSON, with the
/// column names.
const RUN: &str = r#"
import duckdb, json, sys
out = []
for sql in json.loads(sys.argv[1]):
    r = duckdb.sql(sql.replace("DIR", sys.argv[2]))
    out.append([dict(zip(r.columns, row)) for row in r.fetchall()])
print(json.dumps(out, default=str))
"#;

#[test]
#[ignore = "needs DuckDB: scripts/test installs it and runs it"]
fn the_documented_queries_answer_what_report_says() {
    let py = python_with(&["duckdb"]);
    let doc = formats();
    let queries: Vec<&str> = section(&doc, "## Queries")
        .split("```sql\n")
        .skip(1)
        .map(|q| q.split("```").next().unwrap())
        .collect();
    assert_eq!(
        queries.len(),
        3,
        "the slowest operations, p99 per device, worst hosts"
    );
    let d = tempdir();
    let root = d.path().join("tables");
    for (host, cap) in FLEET {
        let mut args = vec!["export", "--parquet", root.to_str().unwrap()];
        if let Some(h) = host {
            args.extend(["--host", h]);
        }
        args.push(cap);
        let o = outcome(&args);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    let got = run_json(
        &py,
        RUN,
        &[
            &serde_json::to_string(&queries).unwrap(),
            root.to_str().unwrap(),
        ],
    );
    let reports: Vec<(Option<&str>, &str, Value)> = FLEET
        .iter()
        .map(|(h, cap)| {
            let name = Path::new(cap).file_name().unwrap().to_str().unwrap();
            (*h, name, json_report(&[cap], &["--top", "5"]))
        })
        .collect();

    // The slowest operations: one row per stall, the slowest of all first,
    // with the requests it waited for.
    let slow = got[0].as_array().unwrap();
    assert_eq!(slow.len(), 10);
    let mut ids: Vec<(String, i64)> = slow
        .iter()
        .map(|r| (r["capture"].to_string(), r["op_id"].as_i64().unwrap()))
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 10, "distinct operations: {slow:?}");
    let (_, _, slowdev) = &reports[3];
    let slowest = &slowdev["outliers"]["by_kind"]["probe fsync"][0];
    let top = &slow[0];
    assert_eq!(top["capture"], "slowdev-fsync.cap");
    assert_eq!(
        top["host"],
        Value::Null,
        "no --host, no host name in its snapshot"
    );
    assert_eq!(top["kind"], "probe fsync");
    let ms = slowest["latency_ns"].as_f64().unwrap() / 1e6;
    assert!(
        (top["latency_ms"].as_f64().unwrap() - ms).abs() < 1e-9,
        "{top}"
    );
    assert!(top["requests_waited_for"].as_i64().unwrap() >= 1, "{top}");
    // Its longest request is the one report names, or a slower one.
    let main = slowest["main_request"]["d2c_ns"].as_f64().unwrap() / 1e6;
    assert!(
        top["slowest_request_d2c_ms"].as_f64().unwrap() >= main,
        "{top}"
    );
    // The syscall and ext4_sync_file inside a stall are not rows of their own.
    for r in slow.iter().filter(|r| r["capture"] == "slowdev-fsync.cap") {
        assert_eq!(r["kind"], "probe fsync", "{r}");
    }

    // p99 per device per capture: report's requests and maximum.
    let per_dev = got[1].as_array().unwrap();
    let mut seen = 0;
    for (_, name, rep) in &reports {
        for dev in rep["devices"].as_array().unwrap() {
            let d2c = &dev["d2c"];
            if d2c["count"].as_u64() == Some(0) {
                continue;
            }
            let row = per_dev
                .iter()
                .find(|r| r["capture"] == *name && r["device"] == dev["device"])
                .unwrap_or_else(|| panic!("{name} {}: no row", dev["device"]));
            assert_eq!(row["requests"], d2c["count"], "{name}");
            let max = d2c["max"].as_f64().unwrap() / 1e3;
            assert!((row["max_d2c_us"].as_f64().unwrap() - max).abs() < 1e-6);
            // One percentile definition (docs/report.md): the nearest
            // rank, which report prints as the middle of its bucket.
            let (got, want) = (
                row["p99_d2c_us"].as_f64().unwrap(),
                d2c["p99"].as_f64().unwrap() / 1e3,
            );
            assert!(
                (got - want).abs() <= got * 0.004 + 1e-3,
                "{name} {}: the documented query's p99 {got} µs, report's {want} µs",
                dev["device"]
            );
            seen += 1;
        }
    }
    assert_eq!(
        seen,
        per_dev.len(),
        "a row per device that completed requests"
    );

    // The worst hosts: every host once (the unknown one as NULL), worst
    // p99 first, each with its worst request.
    let hosts = got[2].as_array().unwrap();
    let names: Vec<&Value> = hosts.iter().map(|r| &r["host"]).collect();
    assert_eq!(hosts.len(), 3, "{names:?}");
    for h in ["host-a", "vm"] {
        assert!(names.contains(&&Value::from(h)), "{names:?}");
    }
    assert!(names.contains(&&Value::Null), "{names:?}");
    let p99: Vec<f64> = hosts
        .iter()
        .map(|r| r["p99_d2c_us"].as_f64().unwrap())
        .collect();
    assert!(p99.windows(2).all(|w| w[0] >= w[1]), "{p99:?}");
    for r in hosts {
        let mine: Vec<&Value> = reports
            .iter()
            .filter(|(h, name, _)| match r["host"].as_str() {
                Some("vm") => *name == "fuse-wait-bad.cap",
                Some(x) => *h == Some(x),
                None => *name == "slowdev-fsync.cap",
            })
            .map(|x| &x.2)
            .collect();
        let worst = mine
            .iter()
            .flat_map(|rep| rep["devices"].as_array().unwrap())
            .filter_map(|d| d["d2c"]["max"].as_f64())
            .fold(0.0, f64::max);
        assert_eq!(r["captures"].as_u64(), Some(mine.len() as u64), "{r}");
        assert!(
            (r["worst_d2c_ms"].as_f64().unwrap() - worst / 1e6).abs() < 1e-9,
            "{r}"
        );
    }
}
