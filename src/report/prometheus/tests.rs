//! The exposition of each family, checked on hand-made readings.
use super::exposition::cumulative_le;
use super::*;
use crate::model::light::{bucket_range, NBUCKET};

/// The log-linear bucket holding `ns`.
fn bucket_of(ns: u64) -> u32 {
    (0..NBUCKET)
        .find(|&i| {
            let (lo, hi) = bucket_range(i);
            lo <= ns && ns <= hi
        })
        .unwrap() as u32
}

#[test]
fn a_bucket_counts_under_the_first_bound_at_or_above_its_highest_value() {
    // 9 µs: under 10 µs. 10 000 ns sits in a bucket whose highest value
    // is above 10 µs: under 25 µs, never under a bound it may exceed.
    // 3 ms: under 5 ms.
    let (_, hi) = bucket_range(bucket_of(10_000) as usize);
    assert!(hi > 10_000, "10 µs shares a bucket with larger values");
    let h = StageHist {
        n: 3,
        sum_ns: 9_000 + 10_000 + 3_000_000,
        buckets: vec![
            (bucket_of(9_000), 1),
            (bucket_of(10_000), 1),
            (bucket_of(3_000_000), 1),
        ],
    };
    let c = cumulative_le(&h);
    assert_eq!(c[0], 1, "le 10 µs");
    assert_eq!(c[1], 2, "le 25 µs");
    assert_eq!(c[7], 2, "le 2.5 ms");
    assert_eq!(c[8], 3, "le 5 ms");
    assert_eq!(c[18], 3, "le 10 s");
}

#[test]
fn families_come_once_each_with_escaped_labels_and_consistent_histograms() {
    let mut ops = std::collections::BTreeMap::new();
    let h = StageHist {
        n: 2,
        sum_ns: 1_500_000,
        buckets: vec![(bucket_of(500_000), 1), (bucket_of(1_000_000), 1)],
    };
    ops.insert(
        "read".to_string(),
        LightOp {
            ios: 2,
            bytes: 8192,
            queued: StageHist::default(),
            device: h.clone(),
            total: h,
            size_log2: vec![],
        },
    );
    let devices = [LightDevice {
        dev: "7,0".into(),
        ops,
        ..Default::default()
    }];
    let names = [("7,0".to_string(), "lo\"op0".to_string())];
    let text = render(&Scrape {
        devices: &devices,
        names: &names,
        ..Default::default()
    });
    let mut types = std::collections::HashSet::new();
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        assert!(types.insert(line.to_string()), "twice: {line}");
    }
    assert!(text.contains(
        "iosleuth_block_device_seconds_bucket{device=\"lo\\\"op0\",op=\"read\",le=\"0.0005\"} 0\n"
    ));
    assert!(text.contains(
        "iosleuth_block_device_seconds_bucket{device=\"lo\\\"op0\",op=\"read\",le=\"0.001\"} 1\n"
    ));
    assert!(text.contains(
        "iosleuth_block_device_seconds_bucket{device=\"lo\\\"op0\",op=\"read\",le=\"1.0\"} 2\n"
    ));
    assert!(text.contains(
        "iosleuth_block_device_seconds_bucket{device=\"lo\\\"op0\",op=\"read\",le=\"+Inf\"} 2\n"
    ));
    assert!(text
        .contains("iosleuth_block_device_seconds_sum{device=\"lo\\\"op0\",op=\"read\"} 0.0015\n"));
    assert!(text.contains("iosleuth_block_bytes_total{device=\"lo\\\"op0\",op=\"read\"} 8192\n"));
}

#[test]
fn programs_say_their_skipped_runs_always_and_run_time_when_kept() {
    let programs = [
        ProgramStats {
            name: "iosl_complete_st".into(),
            run_count: Some(1000),
            run_time_ns: Some(250_000),
            missed: Some(3),
        },
        ProgramStats {
            name: "iosl_issue_st".into(),
            missed: Some(0),
            ..Default::default()
        },
    ];
    let text = render(&Scrape {
        programs: &programs,
        ..Default::default()
    });
    for want in [
        "iosleuth_bpf_program_missed_total{program=\"iosl_complete_st\"} 3\n",
        "iosleuth_bpf_program_missed_total{program=\"iosl_issue_st\"} 0\n",
        "iosleuth_bpf_program_runs_total{program=\"iosl_complete_st\"} 1000\n",
        "iosleuth_bpf_program_run_seconds_total{program=\"iosl_complete_st\"} 0.00025\n",
    ] {
        assert!(text.contains(want), "no {want} in\n{text}");
    }
    // Not kept: no sample, not a 0.
    assert!(!text.contains("iosleuth_bpf_program_runs_total{program=\"iosl_issue_st\"}"));
    assert!(!text.contains("iosleuth_bpf_program_run_seconds_total{program=\"iosl_issue_st\"}"));
}

#[test]
fn a_cgroups_histogram_is_its_kernel_counts_made_cumulative() {
    let mut le = vec![0; LE_NS.len() + 1];
    le[3] = 5; // over 50 µs, at most 100 µs
    le[9] = 2; // at most 10 ms
    le[LE_NS.len()] = 1; // over 10 s
    let cg = LightCgroup {
        id: 42,
        dev: "7,0".into(),
        op: "write".into(),
        ios: 9,
        bytes: 9 * 4096,
        timed: 8,
        time_ns: 12_000_000_000,
        le,
        ..Default::default()
    };
    let names = [("7,0".to_string(), "loop0".to_string())];
    let text = render(&Scrape {
        names: &names,
        cgroups: &[("/a".into(), &cg)],
        ..Default::default()
    });
    let l = "cgroup=\"/a\",device=\"loop0\",op=\"write\"";
    for want in [
        format!("iosleuth_cgroup_requests_total{{{l}}} 9\n"),
        format!("iosleuth_cgroup_bytes_total{{{l}}} 36864\n"),
        format!("iosleuth_cgroup_request_seconds_bucket{{{l},le=\"5e-5\"}} 0\n")
            .replace("5e-5", "0.00005"),
        format!("iosleuth_cgroup_request_seconds_bucket{{{l},le=\"0.0001\"}} 5\n"),
        format!("iosleuth_cgroup_request_seconds_bucket{{{l},le=\"0.01\"}} 7\n"),
        format!("iosleuth_cgroup_request_seconds_bucket{{{l},le=\"10.0\"}} 7\n"),
        format!("iosleuth_cgroup_request_seconds_bucket{{{l},le=\"+Inf\"}} 8\n"),
        format!("iosleuth_cgroup_request_seconds_count{{{l}}} 8\n"),
        format!("iosleuth_cgroup_request_seconds_sum{{{l}}} 12\n"),
    ] {
        assert!(text.contains(&want), "{want} not in:\n{text}");
    }
}

/// Every family a scrape can hold, with a device, a CPU, a trigger, a
/// finding and the process's figures.
fn all_families() -> Vec<String> {
    let mut ops = std::collections::BTreeMap::new();
    ops.insert("read".to_string(), LightOp::default());
    let devices = [LightDevice {
        dev: "7,0".into(),
        ops,
        ..Default::default()
    }];
    let cpus = [LightCpu {
        softirq_ns: vec![0; 10],
        ..Default::default()
    }];
    let cg = LightCgroup {
        le: vec![0; LE_NS.len() + 1],
        ..Default::default()
    };
    let text = render(&Scrape {
        devices: &devices,
        cpus: &cpus,
        cgroups: &[("/".into(), &cg)],
        findings: &[ActiveFinding {
            rule: "r".into(),
            severity: "warning".into(),
            device: String::new(),
        }],
        triggers: &[("p99".into(), 1, 0)],
        not_watched: &["x".into()],
        process: Some(ProcessFigures::default()),
        ..Default::default()
    });
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect()
}

/// docs/WATCH.md's table names every family, and only those.
#[test]
fn the_metrics_table_of_the_docs_is_what_a_scrape_holds() {
    let doc = include_str!("../../../docs/WATCH.md");
    let documented: Vec<String> = doc
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_string)
        .collect();
    assert_eq!(documented, all_families());
}

/// The Grafana dashboard queries only metrics a scrape holds.
#[test]
fn the_dashboard_queries_only_metrics_that_exist() {
    let dash: serde_json::Value =
        serde_json::from_str(include_str!("../../../contrib/grafana-iosleuth-watch.json")).unwrap();
    let families = all_families();
    let mut seen = 0;
    for panel in dash["panels"].as_array().unwrap() {
        for t in panel["targets"].as_array().unwrap() {
            let expr = t["expr"].as_str().unwrap();
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if !(word.starts_with("iosleuth_") || word.starts_with("process_")) {
                    continue;
                }
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| word.strip_suffix(s))
                    .filter(|f| families.iter().any(|x| x == f))
                    .unwrap_or(word);
                assert!(families.iter().any(|f| f == family), "{word} in {expr}");
                seen += 1;
            }
        }
    }
    assert!(seen >= 10, "{seen} metrics queried");
}
