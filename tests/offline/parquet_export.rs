//! `export --parquet`: tables that DuckDB and Spark read as one dataset
//! over many hosts and captures, and that give `report`'s numbers.

use crate::common;

use common::python::{python_with, run_json};
use common::*;
use serde_json::Value;
use std::path::Path;

/// Captures of two kernels, exported as if from two hosts.
const FLEET: &[(&str, &str)] = &[
    ("host-a", "tests/fixtures/healthy-run1.cap"),
    ("host-a", "tests/fixtures/queue-saturated.cap"),
    ("host-b", "tests/fixtures/cpu-contention-hogs.cap"),
    ("host-b", "tests/fixtures/rt-burner.cap"),
    ("host-b", "tests/fixtures/split-maxsectors16.cap"),
];

fn export_fleet(dir: &Path) {
    for (host, cap) in FLEET {
        let o = outcome(&[
            "export",
            "--parquet",
            dir.to_str().unwrap(),
            "--host",
            host,
            cap,
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
}

/// Everything the tests compare, computed by DuckDB from the tables.
const DUCKDB: &str = r#"
import duckdb, json, sys
root = sys.argv[1]
def t(name):
    return f"read_parquet('{root}/{name}/*/*/*.parquet', hive_partitioning = true)"
q = lambda sql: duckdb.sql(sql).fetchall()
out = {"devices": {}, "operations": {}, "runnable": {}, "iostat": {}, "findings": {}, "p99_by_host_kernel": []}
for host, capture, device, n, n_d2c, lo, hi, avg in q(f"""
    select host, capture, device, count(*), count(d2c_ns), min(d2c_ns), max(d2c_ns), avg(d2c_ns)
    from {t('requests')} group by all"""):
    # Nearest rank, as iosleuth's percentiles are defined.
    rank = q(f"""select d2c_ns from {t('requests')}
        where host = '{host}' and capture = '{capture}' and device = '{device}' and d2c_ns is not null
        order by d2c_ns limit 1 offset cast(ceil(0.99 * {n_d2c}) as bigint) - 1""")
    out["devices"][f"{capture}/{device}"] = dict(host=host, rows=n, d2c=n_d2c, min=lo, max=hi, avg=avg, p99=rank[0][0] if rank else None)
for capture, kind, n, total in q(f"select capture, kind, count(*), sum(latency_ns) from {t('operations')} group by all"):
    out["operations"][f"{capture}/{kind}"] = [n, int(total)]
for capture, tid, ns in q(f"select capture, tid, sum(duration_ns) from {t('sched_waits')} where state = 'runnable' group by all"):
    out["runnable"][f"{capture}/{tid}"] = int(ns)
for capture, device, n, util in q(f"select capture, device, count(*), sum(util_pct) from {t('iostat')} group by all"):
    out["iostat"][f"{capture}/{device}"] = [n, util]
for capture, ids in q(f"select capture, list(id order by rank) from {t('findings')} group by all"):
    out["findings"][capture] = ids
# docs/exports.md's query: p99 D2C by host and kernel version over all captures.
out["p99_by_host_kernel"] = q(f"""
    select host, kernel, count(*) as requests, quantile_disc(d2c_ns, 0.99) / 1e3 as p99_d2c_us
    from {t('requests')} where d2c_ns is not null group by host, kernel order by host, kernel""")
print(json.dumps(out))
"#;

/// The same query on Spark (local mode): docs/exports.md's Spark version.
const SPARK: &str = r#"
import json, sys
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master("local[1]").appName("iosleuth-test")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.read.parquet(sys.argv[1] + "/requests").createOrReplaceTempView("requests")
rows = spark.sql("""
    select host, kernel, count(*) as requests,
           percentile_disc(0.99) within group (order by d2c_ns) / 1e3 as p99_d2c_us
    from requests where d2c_ns is not null group by host, kernel order by host, kernel""").collect()
print(json.dumps([[r.host, r.kernel, r.requests, r.p99_d2c_us] for r in rows]))
spark.stop()
"#;

fn capture_name(cap: &str) -> &str {
    Path::new(cap).file_name().unwrap().to_str().unwrap()
}

#[test]
#[ignore = "needs DuckDB and pyspark: scripts/test installs them and runs it"]
fn duckdb_reads_reports_numbers_from_the_tables() {
    let py = python_with(&["duckdb"]);
    let d = tempdir();
    export_fleet(d.path());
    let got = run_json(&py, DUCKDB, &[d.path().to_str().unwrap()]);
    for (host, cap) in FLEET {
        let name = capture_name(cap);
        let rep = json_report(&[cap], &["--top", "5"]);
        for dev in rep["devices"].as_array().unwrap() {
            let key = format!("{name}/{}", dev["device"].as_str().unwrap());
            let completed: u64 = dev["completed"]
                .as_object()
                .unwrap()
                .values()
                .map(|v| v.as_u64().unwrap())
                .sum();
            let g = &got["devices"][&key];
            assert_eq!(g["host"], *host, "{key}");
            assert_eq!(
                g["rows"].as_u64(),
                Some(completed),
                "{key}: one row per completed request"
            );
            let d2c = &dev["d2c"];
            assert_eq!(g["d2c"], d2c["count"], "{key}");
            if d2c["count"].as_u64().unwrap() == 0 {
                continue;
            }
            assert_eq!(g["min"], d2c["min"], "{key}");
            assert_eq!(g["max"], d2c["max"], "{key}");
            let (ga, ra) = (g["avg"].as_f64().unwrap(), d2c["avg"].as_f64().unwrap());
            assert!((ga - ra).abs() <= ra * 1e-9, "{key}: avg {ga} vs {ra}");
            // report's percentiles are the middle of a log-linear bucket
            // (at most 1/128 wide) around the nearest-rank value.
            let (gp, rp) = (g["p99"].as_f64().unwrap(), d2c["p99"].as_f64().unwrap());
            assert!(
                (gp - rp).abs() <= gp * 0.004 + 1.0,
                "{key}: p99 {gp} vs {rp}"
            );
            let rows = dev["iostat"].as_array().unwrap();
            let util: f64 = rows.iter().map(|r| r["%util"].as_f64().unwrap()).sum();
            let gi = &got["iostat"][&key];
            assert_eq!(gi[0].as_u64(), Some(rows.len() as u64), "{key}");
            assert!((gi[1].as_f64().unwrap() - util).abs() < 1e-9, "{key}");
        }
        for (kind, t) in rep["outliers"]["totals"].as_object().unwrap() {
            let g = &got["operations"][format!("{name}/{kind}")];
            assert_eq!(g[0], t["count"], "{name} {kind}");
            assert_eq!(g[1], t["latency_ns"], "{name} {kind}");
        }
        // Without scheduler events the section is null: nothing to match.
        for th in rep["sched"]["threads"].as_array().into_iter().flatten() {
            let ns = th["runnable_ns"].as_u64().unwrap();
            let g = got["runnable"][format!("{name}/{}", th["pid"])]
                .as_u64()
                .unwrap_or(0);
            assert_eq!(g, ns, "{name} pid {}: runnable time", th["pid"]);
        }
        let ids: Vec<&Value> = rep["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| &f["id"])
            .collect();
        let gids: Vec<&Value> = got["findings"][name]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default();
        assert_eq!(gids, ids, "{name}: findings in order");
    }
    // One row per host and kernel that did I/O: host-a ran one kernel,
    // host-b two (rt-burner did no I/O).
    let by = got["p99_by_host_kernel"].as_array().unwrap();
    let groups: Vec<(&str, &str, u64)> = by
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap(),
                r[1].as_str().unwrap(),
                r[2].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(groups.len(), 3, "{groups:?}");
    assert_eq!(
        groups.iter().filter(|g| g.0 == "host-b").count(),
        2,
        "{groups:?}"
    );
}

#[test]
#[ignore = "needs DuckDB and pyspark: scripts/test installs them and runs it"]
fn spark_gives_duckdbs_answer_to_the_fleet_query() {
    let py = python_with(&["duckdb", "pyspark"]);
    let d = tempdir();
    export_fleet(d.path());
    let root = d.path().to_str().unwrap();
    let duck = run_json(&py, DUCKDB, &[root]);
    let spark = run_json(&py, SPARK, &[root]);
    let duck = duck["p99_by_host_kernel"].as_array().unwrap();
    let spark = spark.as_array().unwrap();
    assert_eq!(spark.len(), duck.len(), "{spark:?} vs {duck:?}");
    for (s, k) in spark.iter().zip(duck) {
        assert_eq!(s[0], k[0]);
        assert_eq!(s[1], k[1]);
        assert_eq!(s[2], k[2], "requests of {} {}", k[0], k[1]);
        // Both take the nearest rank (docs/report.md's one definition).
        let (a, b) = (s[3].as_f64().unwrap(), k[3].as_f64().unwrap());
        assert!(
            (a - b).abs() <= b * 1e-9,
            "p99 of {} {}: spark {a}, duckdb {b}",
            k[0],
            k[1]
        );
    }
}

#[test]
fn exporting_a_capture_again_replaces_it_and_names_collide_safely() {
    let d = tempdir();
    let dir = d.path().join("tables");
    let cap = "tests/fixtures/queue-saturated.cap";
    for _ in 0..2 {
        let o = outcome(&[
            "export",
            "--parquet",
            dir.to_str().unwrap(),
            "--host",
            "h",
            cap,
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    let parts = std::fs::read_dir(dir.join("requests/host=h"))
        .unwrap()
        .count();
    assert_eq!(parts, 1, "the second export replaced the first");
    // No scratch directory is left behind.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(left.iter().all(|n| !n.starts_with('.')), "{left:?}");
    // Two inputs of one name in one export: the second is NAME-2.
    let other = d.path().join("b");
    std::fs::create_dir_all(&other).unwrap();
    copy_dir(Path::new(cap), &other.join("queue-saturated.cap"));
    let o = outcome(&[
        "export",
        "--parquet",
        dir.to_str().unwrap(),
        "--host",
        "h",
        cap,
        other.join("queue-saturated.cap").to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(dir
        .join("requests/host=h/capture=queue-saturated.cap-2/part-0.parquet")
        .is_file());
}

#[test]
fn bad_inputs_write_nothing_and_exit_2() {
    let d = tempdir();
    let dir = d.path().join("tables");
    let garbage = d.path().join("garbage.txt");
    std::fs::write(&garbage, "not a trace\n").unwrap();
    let o = outcome(&[
        "export",
        "--parquet",
        dir.to_str().unwrap(),
        garbage.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("garbage.txt"), "{}", o.stderr);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .map(|r| r.count())
        .into_iter()
        .collect();
    assert!(left.iter().all(|n| *n == 0), "nothing written: {left:?}");
    let o = outcome(&["export", "--parquet", dir.to_str().unwrap(), "-"]);
    assert_eq!(o.code, 2, "{}", o.stderr);
}

/// One column of a table's file, by name: integers, NULL as `None`.
fn ints(file: &Path, column: &str) -> Vec<Option<i64>> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let r = SerializedFileReader::new(std::fs::File::open(file).unwrap()).unwrap();
    r.get_row_iter(None)
        .unwrap()
        .map(|row| {
            let row = row.unwrap();
            let (_, v) = row
                .get_column_iter()
                .find(|(n, _)| *n == column)
                .unwrap_or_else(|| panic!("no column {column}"));
            match v {
                Field::Long(n) => Some(*n),
                Field::Null => None,
                other => panic!("{column}: {other:?}"),
            }
        })
        .collect()
}

/// The ids join: every operation and request has its own, an operation's
/// parent is an operation of the capture that encloses it on its thread,
/// and every request an operation waited for is a row of `requests`; the
/// workload's threads have their process, the others NULL, never their
/// thread id made up as one.
#[test]
fn ids_link_operations_to_their_parents_and_requests() {
    let d = tempdir();
    let root = d.path().join("tables");
    let o = outcome(&[
        "export",
        "--parquet",
        root.to_str().unwrap(),
        "tests/fixtures/slowdev-fsync.cap",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let file = |t: &str| {
        root.join(t)
            .join("host=__HIVE_DEFAULT_PARTITION__/capture=slowdev-fsync.cap/part-0.parquet")
    };
    let ops = file("operations");
    let op_ids: Vec<i64> = ints(&ops, "op_id")
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let unique: std::collections::HashSet<i64> = op_ids.iter().copied().collect();
    assert_eq!(unique.len(), op_ids.len(), "an id per operation");
    let (starts, ends, tids) = (
        ints(&ops, "start_ns"),
        ints(&ops, "end_ns"),
        ints(&ops, "tid"),
    );
    let at: std::collections::HashMap<i64, usize> =
        op_ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let parents = ints(&ops, "parent_op_id");
    assert!(
        parents.iter().any(Option::is_some),
        "fsyncs inside probe operations"
    );
    for (i, p) in parents.iter().enumerate() {
        let Some(p) = p else { continue };
        let j = at[p];
        assert_eq!(
            tids[j], tids[i],
            "op {}: its parent is of its thread",
            op_ids[i]
        );
        assert!(
            starts[j] <= starts[i] && ends[i] <= ends[j],
            "op {}: inside its parent",
            op_ids[i]
        );
    }
    let requests: std::collections::HashSet<i64> = ints(&file("requests"), "request_id")
        .into_iter()
        .map(Option::unwrap)
        .collect();
    let waited = file("waited_for");
    let (w_ops, w_reqs) = (ints(&waited, "op_id"), ints(&waited, "request_id"));
    assert!(!w_ops.is_empty(), "the stalled fsyncs waited for requests");
    for (o, r) in w_ops.iter().zip(&w_reqs) {
        assert!(unique.contains(&o.unwrap()), "{o:?} is an operation");
        assert!(requests.contains(&r.unwrap()), "{r:?} is a request");
    }
    // Processes: known for the workload's threads (from the snapshot),
    // NULL for threads it does not list, never a copy of the thread id.
    let waits = file("sched_waits");
    let (tids, pids) = (ints(&waits, "tid"), ints(&waits, "pid"));
    assert!(pids.iter().any(Option::is_some));
    assert!(pids.iter().any(Option::is_none));
    let rep = json_report(&["tests/fixtures/slowdev-fsync.cap"], &[]);
    let listed: std::collections::HashMap<i64, i64> = rep["snapshot"]["workload"]["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["tid"].as_i64().unwrap(), t["pid"].as_i64().unwrap()))
        .collect();
    for (t, p) in tids.iter().zip(&pids) {
        if let Some(p) = p {
            assert!(
                listed.get(&t.unwrap()) == Some(p) || kernel_thread(&rep, t.unwrap()),
                "tid {t:?} pid {p}"
            );
        }
    }
}

/// Whether the snapshot lists `tid` among the kernel threads.
fn kernel_thread(rep: &Value, tid: i64) -> bool {
    rep["snapshot"]["before"]["kernel_threads"]
        .as_array()
        .is_some_and(|a| a.iter().any(|t| t["tid"].as_i64() == Some(tid)))
}

/// ftrace's text with its TGID column (options/record-tgid): each row's
/// `pid` is the tgid the text prints beside its thread, NULL where ftrace
/// printed `(-------)` (it had none), never the thread id; a thread of a
/// process has the process's id (db-wal, 501, of db, 500). The text has
/// no snapshot: the trace alone says it.
#[test]
fn pid_is_the_tgid_ftrace_text_prints() {
    let text = "tests/fixtures/ftrace-tgid.synthetic.txt";
    // `comm-tid (tgid) [cpu]`, as the text prints each thread.
    let mut printed: std::collections::HashMap<i64, Option<i64>> = Default::default();
    for line in std::fs::read_to_string(text).unwrap().lines() {
        if line.starts_with('#') {
            continue;
        }
        let (task, rest) = line.split_once('(').unwrap();
        let tid: i64 = task.trim().rsplit_once('-').unwrap().1.parse().unwrap();
        let tgid = rest.split_once(')').unwrap().0.trim().parse().ok();
        assert_eq!(*printed.entry(tid).or_insert(tgid), tgid, "{line}");
    }
    assert_eq!(printed[&501], Some(500));
    assert_eq!(printed[&900], None);
    let d = tempdir();
    let root = d.path().join("tables");
    let o = outcome(&["export", "--parquet", root.to_str().unwrap(), text]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let mut pids = Vec::new();
    for table in ["requests", "operations", "sched_waits"] {
        let file = root.join(table).join(
            "host=__HIVE_DEFAULT_PARTITION__/capture=ftrace-tgid.synthetic.txt/part-0.parquet",
        );
        let (tids, got) = (ints(&file, "tid"), ints(&file, "pid"));
        assert!(!tids.is_empty(), "{table}: rows");
        for (t, p) in tids.iter().zip(&got) {
            let t = t.unwrap();
            assert_eq!(*p, printed[&t], "{table}: tid {t}");
            pids.push((t, *p));
        }
    }
    assert!(pids.contains(&(501, Some(500))), "{pids:?}");
    assert!(pids.contains(&(900, None)), "{pids:?}");
}

/// perf.data carries each thread's process (a sample's pid, a COMM or
/// FORK record's): read, it is passed on as the trace's, as `perf script
/// --show-task-events -F comm,pid,tid` prints it (72 threads in
/// perf-record-g.data, three of them not their process's first: 25670
/// and 25671 of 559, 25682 of 25679; dd, 22643, alone in
/// perf-urandom.data). No table row comes of cpu-clock samples; the rows
/// of tracepoints take it as ftrace text's tgid (above).
#[test]
fn perf_data_threads_carry_their_process() {
    use iosleuth::testing::Event;
    let processes = |path: &str| {
        let mut s = iosleuth::testing::open_file(Path::new(path)).unwrap();
        let mut by: std::collections::BTreeMap<u32, u32> = Default::default();
        let mut seen_before_its_samples = true;
        while let Some(e) = s.next_event() {
            match e {
                Event::ThreadGroup { tid, tgid } => {
                    by.insert(tid, tgid);
                }
                Event::Stack(k) if k.pid != 0 => {
                    seen_before_its_samples &= by.contains_key(&k.pid);
                }
                _ => {}
            }
        }
        assert!(
            seen_before_its_samples,
            "{path}: a thread's process comes first"
        );
        by
    };
    let g = processes("tests/fixtures/perf-record-g.data");
    assert_eq!(g.len(), 72, "{g:?}");
    let others: Vec<(u32, u32)> = g
        .iter()
        .filter(|(t, p)| t != p)
        .map(|(t, p)| (*t, *p))
        .collect();
    assert_eq!(others, [(25670, 559), (25671, 559), (25682, 25679)]);
    assert_eq!((g[&25683], g[&25684]), (25683, 25684), "dd and ls");
    let u = processes("tests/fixtures/perf-urandom.data");
    assert_eq!(u.into_iter().collect::<Vec<_>>(), [(22643, 22643)]);
}

/// A light capture's slow requests carry the issuing thread's process
/// (the BPF program's pid beside its tid): every request row's pid is the
/// one the JSON report's slowest requests give its thread, threads the
/// snapshot does not list included.
#[test]
fn pid_of_a_light_captures_requests_is_the_recorded_one() {
    let cap = "tests/fixtures/light-dd.cap";
    let d = tempdir();
    let root = d.path().join("tables");
    let o = outcome(&["export", "--parquet", root.to_str().unwrap(), cap]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rep = json_report(&[cap], &[]);
    let recorded: std::collections::HashMap<i64, i64> = rep["light"]["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["tid"].as_i64().unwrap(), s["pid"].as_i64().unwrap()))
        .collect();
    let file = root.join("requests/host=vm/capture=light-dd.cap/part-0.parquet");
    let (tids, pids) = (ints(&file, "tid"), ints(&file, "pid"));
    assert!(!tids.is_empty());
    for (t, p) in tids.iter().zip(&pids) {
        let t = t.unwrap();
        assert_eq!(*p, Some(recorded[&t]), "tid {t}");
    }
}
