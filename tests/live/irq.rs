//! Live: softirq counts per CPU and vector equal what /proc/softirqs (the
//! file mpstat -I SCPU reads) counted over the same stretch. The workload
//! reads /proc/softirqs, marks the trace, does direct I/O on a loop
//! device, marks the trace again and reads /proc/softirqs again; the
//! report over the marks' window must agree with the difference.

use crate::common;

use common::*;
use iosleuth::testing::LoopDevice;
use std::collections::BTreeMap;

/// `/proc/softirqs` text → vector → per-CPU counts.
fn softirqs(text: &str) -> BTreeMap<String, Vec<u64>> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let (name, counts) = l.split_once(':')?;
            let v = counts
                .split_whitespace()
                .map(|c| c.parse().unwrap())
                .collect();
            Some((name.trim().to_string(), v))
        })
        .collect()
}

#[test]
#[ignore = "live: needs root, tracefs and loop devices; scripts/test runs it"]
fn softirq_counts_equal_proc_softirqs_over_the_same_window() {
    let _live = live();
    let disk = LoopDevice::create(64, true).expect("loop device");
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let script = format!(
        "echo 'iosleuth: window 1 begin' > $IOSLEUTH_TRACE_MARKER; cat /proc/softirqs > {a}; \
         echo 'iosleuth: window 0 begin' > $IOSLEUTH_TRACE_MARKER; \
         dd if=/dev/zero of={dev} bs=4k count=4000 oflag=direct status=none; \
         dd if={dev} of=/dev/null bs=4k count=4000 iflag=direct status=none; \
         echo 'iosleuth: window 0 end 0' > $IOSLEUTH_TRACE_MARKER; cat /proc/softirqs > {b}; \
         echo 'iosleuth: window 1 end 0' > $IOSLEUTH_TRACE_MARKER",
        a = a.display(),
        b = b.display(),
        dev = disk.path.display()
    );
    run(iosleuth()
        .arg("record")
        .arg("-o")
        .arg(&cap)
        .args(["--events", "irq", "--", "sh", "-c", &script]));
    let marks = run(iosleuth().arg("dump").arg(&cap).args(["--events", "print"]));
    // Each reading of /proc/softirqs lies between two marks: the runs
    // traced inside the inner marks cannot be more than its difference,
    // those inside the outer marks cannot be fewer, however long a busy
    // machine keeps the shell between a mark and a reading.
    let window = |n: u32| {
        let times: Vec<&str> = marks
            .lines()
            .filter(|l| l.contains(&format!("iosleuth: window {n} ")))
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(times.len(), 2, "{marks}");
        json_report(
            &[&cap],
            // dump and --time count from the trace's start alike.
            &["--time", &format!("{}..{}", times[0], times[1])],
        )
    };
    let (rep, outer) = (window(0), window(1));
    let counted = |r: &serde_json::Value, cpu: u64, vec: &str| -> u64 {
        r["irq"]["softirq"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["cpu"].as_u64() == Some(cpu))
            .and_then(|row| row["counts"][vec].as_u64())
            .unwrap_or(0)
    };
    let before = softirqs(&std::fs::read_to_string(&a).unwrap());
    let after = softirqs(&std::fs::read_to_string(&b).unwrap());
    let mut compared = 0;
    for row in rep["irq"]["softirq"].as_array().unwrap() {
        let cpu = row["cpu"].as_u64().unwrap();
        for (vec, ours) in row["counts"].as_object().unwrap() {
            let ours = ours.as_u64().unwrap();
            let delta = after[vec][cpu as usize] - before[vec][cpu as usize];
            let most = counted(&outer, cpu, vec);
            assert!(
                ours <= delta && delta <= most,
                "CPU {cpu} {vec}: traced {ours} inside the readings, {most} around them; /proc/softirqs {delta}"
            );
            compared += (delta > 0) as usize;
        }
    }
    let block: u64 = rep["irq"]["softirq_total"]["BLOCK"]["count"]
        .as_u64()
        .unwrap_or(0);
    eprintln!("vectors compared: {compared}, BLOCK runs {block}");
    assert!(compared >= 3, "{:#}", rep["irq"]);
}
