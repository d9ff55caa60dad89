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
        cgroup_histograms: true,
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
    // Without --cgroup-histograms: the counters, no histogram (not even
    // its HELP).
    let text = render(&Scrape {
        names: &names,
        cgroups: &[("/a".into(), &cg)],
        ..Default::default()
    });
    assert!(text.contains(&format!("iosleuth_cgroup_requests_total{{{l}}} 9\n")));
    assert!(text.contains(&format!("iosleuth_cgroup_bytes_total{{{l}}} 36864\n")));
    assert!(!text.contains("iosleuth_cgroup_request_seconds"), "{text}");
}

/// Every family a scrape can hold, with a device, a CPU, a cgroup (and its
/// histogram), a trigger, a finding and the process's figures.
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
        cgroup_histograms: true,
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

/// The families declared are the ones a scrape holds, each once, with
/// the type it is declared with.
#[test]
fn every_declared_family_is_served_with_its_type() {
    let scraped = all_families();
    let mut declared: Vec<String> = families::ALL.iter().map(|f| f.name.to_string()).collect();
    let mut sorted = scraped.clone();
    sorted.sort();
    declared.sort();
    assert_eq!(declared, sorted);
    let text = render(&Scrape {
        process: Some(ProcessFigures::default()),
        cgroup_histograms: true,
        ..Default::default()
    });
    for f in families::ALL {
        let kind = match f.kind {
            exposition::Kind::Counter => "counter",
            exposition::Kind::Gauge => "gauge",
            exposition::Kind::Histogram => "histogram",
        };
        assert!(
            text.contains(&format!("# TYPE {} {kind}\n", f.name)),
            "{} as a {kind}",
            f.name
        );
        assert_eq!(
            f.kind == exposition::Kind::Counter,
            f.name.ends_with("_total")
        );
    }
}

/// Each counter a device keeps (model::light::LightCounters) is served by
/// a family, or listed as served otherwise: a counter added to the model
/// fails here until it is placed.
#[test]
fn every_device_counter_is_placed() {
    let mut placed: Vec<&str> = DEVICE_COUNTERS.iter().map(|c| c.0).collect();
    placed.extend(DEVICE_COUNTERS_ELSEWHERE);
    placed.sort();
    let mut names = crate::model::light::LightCounters::NAMES.to_vec();
    names.sort();
    assert_eq!(placed, names);
    // And each placed counter's value reaches its sample.
    let counters = crate::model::light::LightCounters {
        front_merges: 7,
        cgroup_full: 9,
        throttled: 11,
        ..Default::default()
    };
    let devices = [LightDevice {
        dev: "7,0".into(),
        counters,
        ..Default::default()
    }];
    let text = render(&Scrape {
        devices: &devices,
        throttle: true,
        ..Default::default()
    });
    for line in [
        "iosleuth_block_merges_total{device=\"7,0\",kind=\"front\"} 7",
        "iosleuth_cgroup_uncounted_requests_total{device=\"7,0\"} 9",
        "iosleuth_block_throttled_bios_total{device=\"7,0\"} 11",
        "iosleuth_block_splits_total{device=\"7,0\"} 0",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
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

/// The histograms' series per label combination: one per `le` bound,
/// `+Inf`, `_sum` and `_count`.
const HISTOGRAM_SERIES: usize = LE_NS.len() + 3;

/// A busy host's scrape as `watch` serves it: 16 devices (15 disks and
/// `other`, every slot there is) each reading and writing; 20 cgroups
/// (`--cgroups 20`, the default) each reading and writing on every device;
/// 64 CPUs; every io_uring group; the 27 programs watch attaches at most
/// (issue and completion, 5 block counters, 4 io_uring, 3 scheduler, 3
/// blk-throttle, 10 journal events; 4 more for the interrupts with `irq`,
/// `--irq on`), their run time not kept
/// (kernel.bpf_stats_enabled 0, the kernel's default); every trigger fired
/// and 3 findings in force. With `flushes`, every device also flushes (a
/// volatile write cache under fsyncs): requests without a bio, charged to
/// no cgroup (`none`, the 21st cgroup seen: summed under `other`).
fn busy_host(cgroup_histograms: bool, flushes: bool, irq: bool) -> String {
    const DEVICES: usize = 16;
    const CGROUPS: usize = 20;
    const CPUS: u32 = 64;
    let h = StageHist {
        n: 4,
        sum_ns: 4_000_000,
        buckets: vec![(bucket_of(500_000), 2), (bucket_of(1_500_000), 2)],
    };
    let op = LightOp {
        ios: 4,
        bytes: 4 * 4096,
        queued: h.clone(),
        device: h.clone(),
        total: h.clone(),
        size_log2: vec![],
    };
    let devs: Vec<String> = (0..DEVICES - 1)
        .map(|i| format!("259,{i}"))
        .chain(["other".to_string()])
        .collect();
    let names: Vec<(String, String)> = devs
        .iter()
        .take(DEVICES - 1)
        .enumerate()
        .map(|(i, d)| (d.clone(), format!("nvme{i}n1")))
        .collect();
    let ops: &[&str] = if flushes {
        &["read", "write", "flush"]
    } else {
        &["read", "write"]
    };
    // Each disk's diskstats, as watch reads them (`other` has none): the
    // same requests the programs counted.
    let mut stat = vec![0u64; 17];
    for (o, fields) in [("read", (0, 2)), ("write", (4, 6)), ("flush", (15, 15))] {
        if ops.contains(&o) {
            stat[fields.0] = 4;
            if fields.1 != fields.0 {
                stat[fields.1] = 4 * 8;
            }
        }
    }
    let devices: Vec<LightDevice> = devs
        .iter()
        .map(|dev| LightDevice {
            dev: dev.clone(),
            ops: ops.iter().map(|o| (o.to_string(), op.clone())).collect(),
            diskstats: (dev != "other")
                .then(|| DiskstatsDelta::between(&[0; 17], &stat, 1.0))
                .flatten(),
            ..Default::default()
        })
        .collect();
    let mut le = vec![0; LE_NS.len() + 1];
    le[5] = 4;
    let entry = |id: u64, dev: &String, op: &str| LightCgroup {
        id,
        dev: dev.clone(),
        op: op.into(),
        ios: 4,
        bytes: 4 * 4096,
        timed: 4,
        time_ns: 4_000_000,
        le: le.clone(),
        ..Default::default()
    };
    let mut entries: Vec<LightCgroup> = Vec::new();
    for id in 1..=CGROUPS as u64 {
        for dev in &devs {
            entries.push(entry(id, dev, "read"));
            entries.push(entry(id, dev, "write"));
        }
    }
    if flushes {
        entries.extend(devs.iter().map(|dev| entry(0, dev, "flush")));
    }
    let cgroups: Vec<(String, &LightCgroup)> = entries
        .iter()
        .map(|e| match e.id {
            0 => ("other".to_string(), e),
            id => (format!("/system.slice/svc{id}.service"), e),
        })
        .collect();
    let not_watched: Vec<String> = ["bpf_run_time", "irq_off"]
        .iter()
        .take(if irq { 1 } else { 2 })
        .map(|s| s.to_string())
        .collect();
    let cpus: Vec<LightCpu> = (0..CPUS)
        .map(|cpu| LightCpu {
            cpu,
            softirq_ns: vec![1000; 10],
            ..Default::default()
        })
        .collect();
    let io_uring: Vec<LightUring> = crate::model::light::URING_OPS
        .iter()
        .map(|op| LightUring {
            op: op.to_string(),
            counts: crate::model::light::UringCounters {
                requests: 4,
                ..Default::default()
            },
            latency: h.clone(),
        })
        .collect();
    // The interrupts' 4 programs only with --irq on.
    let programs: Vec<ProgramStats> = (0..if irq { 31 } else { 27 })
        .map(|i| ProgramStats {
            name: format!("iosl_{i}"),
            missed: Some(0),
            ..Default::default()
        })
        .collect();
    let findings: Vec<ActiveFinding> = ["a", "b", "c"]
        .iter()
        .map(|r| ActiveFinding {
            rule: r.to_string(),
            severity: "warning".into(),
            device: "nvme0n1".into(),
        })
        .collect();
    render(&Scrape {
        devices: &devices,
        names: &names,
        cpus: &cpus,
        throttle: true,
        irq,
        cgroups: &cgroups,
        cgroup_histograms,
        wait_min_ns: 5_000_000,
        ring: RingFigures::default(),
        process: Some(ProcessFigures::default()),
        findings: &findings,
        triggers: &[
            ("p99".into(), 1, 2),
            ("slow_request".into(), 1, 0),
            ("runqueue_stall".into(), 0, 1),
        ],
        captures_kept: 1,
        captures_bytes: 1 << 20,
        not_watched: &not_watched,
        programs: &programs,
        io_uring: &io_uring,
    })
}

/// Samples by family (a histogram's `_bucket`, `_sum` and `_count` under
/// its own name), families without samples left out.
fn series_by_family(text: &str) -> std::collections::BTreeMap<String, usize> {
    let histograms: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" histogram"))
        .collect();
    let mut by = std::collections::BTreeMap::new();
    for l in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let name = l.split(['{', ' ']).next().unwrap();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|s| name.strip_suffix(s))
            .find(|f| histograms.contains(f))
            .unwrap_or(name);
        *by.entry(family.to_string()).or_insert(0) += 1;
    }
    by
}

/// The series a host with 16 devices and 20 busy cgroups serves (the
/// figures docs/WATCH.md quotes): under 5,000 at the defaults, the
/// cgroups' histogram (22 series for each of their 640 label combinations)
/// only on request.
#[test]
fn a_busy_host_serves_under_5000_series_at_the_defaults() {
    let (d, ops, cg, cpus, uring, programs) = (16, 16 * 2, 20 * 16 * 2, 64, 8, 27);
    let hist = HISTOGRAM_SERIES;
    let want: std::collections::BTreeMap<String, usize> = [
        ("iosleuth_block_queued_seconds", ops * hist),
        ("iosleuth_block_device_seconds", ops * hist),
        ("iosleuth_block_request_seconds", ops * hist),
        ("iosleuth_block_requests_total", ops),
        ("iosleuth_block_bytes_total", ops),
        ("iosleuth_block_unseen_requests", d - 1),
        ("iosleuth_block_merges_total", d * 3),
        ("iosleuth_block_splits_total", d),
        ("iosleuth_block_requeues_total", d),
        ("iosleuth_block_errors_total", d),
        ("iosleuth_block_partial_completions_total", d),
        ("iosleuth_block_sequential_requests_total", d),
        ("iosleuth_cgroup_uncounted_requests_total", d),
        ("iosleuth_block_throttled_bios_total", d),
        ("iosleuth_block_throttled_bytes_total", d),
        ("iosleuth_block_untimed_requests_total", d * 3),
        ("iosleuth_cgroup_requests_total", cg),
        ("iosleuth_cgroup_bytes_total", cg),
        ("iosleuth_io_uring_request_seconds", uring * hist),
        ("iosleuth_io_uring_requests_total", uring),
        ("iosleuth_io_uring_untimed_requests_total", uring),
        ("iosleuth_io_uring_punted_total", uring),
        ("iosleuth_io_uring_errors_total", uring),
        ("iosleuth_slow_requests_total", d * 3),
        ("iosleuth_sched_runqueue_stalls_total", 2),
        ("iosleuth_sched_runqueue_stall_threshold_seconds", 1),
        ("iosleuth_kept_events_total", 2),
        ("iosleuth_ring_records", 1),
        ("iosleuth_ring_bytes", 1),
        ("iosleuth_ring_evicted_total", 1),
        ("iosleuth_triggers_total", 3 * 2),
        ("iosleuth_captures_kept", 1),
        ("iosleuth_captures_bytes", 1),
        ("iosleuth_finding", 3),
        ("iosleuth_bpf_program_missed_total", programs),
        ("iosleuth_not_watched", 2),
        ("iosleuth_build_info", 1),
        ("process_cpu_seconds_total", 1),
        ("process_resident_memory_bytes", 1),
        ("process_virtual_memory_bytes", 1),
        ("process_open_fds", 1),
        ("process_start_time_seconds", 1),
    ]
    .into_iter()
    .map(|(f, n)| (f.to_string(), n))
    .collect();
    let print = |what: &str, by: &std::collections::BTreeMap<String, usize>| {
        let total: usize = by.values().sum();
        eprintln!("{what}: {total} series");
        let mut rows: Vec<_> = by.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        for (family, n) in rows {
            eprintln!("  {n:6}  {family}");
        }
        total
    };

    let defaults = series_by_family(&busy_host(false, false, false));
    let total = print("defaults", &defaults);
    assert_eq!(defaults, want);
    assert_eq!(total, 4005);
    assert!(total < 5000, "{total} series at the defaults");

    let with = series_by_family(&busy_host(true, false, false));
    let total_with = print("--cgroup-histograms", &with);
    let mut want_with = want.clone();
    want_with.insert("iosleuth_cgroup_request_seconds".into(), cg * hist);
    assert_eq!(with, want_with);
    assert_eq!(total_with, 18_085);

    // `--irq on`: each CPU's hard interrupt time and its 10 softirq
    // vectors' times, the interrupts' 4 programs, and one thing fewer not
    // watched.
    let irq = series_by_family(&busy_host(false, false, true));
    let mut want_irq = want.clone();
    want_irq.insert("iosleuth_cpu_hardirq_seconds_total".into(), cpus);
    want_irq.insert("iosleuth_cpu_softirq_seconds_total".into(), cpus * 10);
    want_irq.insert("iosleuth_not_watched".into(), 1);
    want_irq.insert("iosleuth_bpf_program_missed_total".into(), programs + 4);
    assert_eq!(irq, want_irq);
    assert_eq!(irq.values().sum::<usize>(), total + cpus * 11 - 1 + 4);
    assert_eq!(irq.values().sum::<usize>(), 4712);

    // Each further (device, operation) costs 3 histograms and 2 counters,
    // each further (cgroup, device, operation) 2 counters: flushes on
    // every device take the defaults past 5,000.
    let flushing: usize = series_by_family(&busy_host(false, true, false))
        .values()
        .sum();
    eprintln!("defaults, every device flushing: {flushing} series");
    assert_eq!(flushing, total + d * (3 * hist + 2) + d * 2);
    assert_eq!(flushing, 5125);
}

/// Where watch read the kernel's diskstats, requests and bytes are the
/// kernel's own, and the requests the programs did not see are served as
/// such; a device without them keeps the programs' counts and no
/// `unseen` sample (unknown, not zero).
#[test]
fn request_counts_are_the_kernels_with_what_the_programs_did_not_see() {
    let mut ops = std::collections::BTreeMap::new();
    ops.insert(
        "write".to_string(),
        LightOp {
            ios: 997,
            bytes: 997 * 4096,
            ..Default::default()
        },
    );
    let mut after = vec![0u64; 17];
    after[4] = 1000;
    after[6] = 8000;
    after[15] = 5;
    let kernel = DiskstatsDelta::between(&[0; 17], &after, 1.0);
    let devices = [
        LightDevice {
            dev: "7,0".into(),
            ops: ops.clone(),
            diskstats: kernel,
            ..Default::default()
        },
        LightDevice {
            dev: "7,1".into(),
            ops,
            ..Default::default()
        },
    ];
    let text = render(&Scrape {
        devices: &devices,
        ..Default::default()
    });
    for line in [
        "iosleuth_block_requests_total{device=\"7,0\",op=\"write\"} 1000",
        "iosleuth_block_requests_total{device=\"7,0\",op=\"flush\"} 5",
        "iosleuth_block_bytes_total{device=\"7,0\",op=\"write\"} 4096000",
        "iosleuth_block_bytes_total{device=\"7,0\",op=\"flush\"} 0",
        "iosleuth_block_unseen_requests{device=\"7,0\"} 8",
        "iosleuth_block_requests_total{device=\"7,1\",op=\"write\"} 997",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
    assert!(!text.contains("op=\"read\""), "{text}");
    assert!(
        !text.contains("iosleuth_block_unseen_requests{device=\"7,1\"}"),
        "{text}"
    );
}
