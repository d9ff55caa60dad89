//! Live: softirq counts per CPU and vector equal what /proc/softirqs (the
//! file mpstat -I SCPU reads) counted over the same stretch. The workload
//! reads /proc/softirqs, marks the trace, does direct I/O on a loop
//! device, marks the trace again and reads /proc/softirqs again; the
//! report over the marks' window must agree with the difference.

mod common;

use common::*;
use iosleuth::lab::loopdev::LoopDevice;
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
fn softirq_counts_equal_proc_softirqs_over_the_same_window() {
    if !live() {
        return;
    }
    let disk = LoopDevice::create(64, true).expect("loop device");
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let script = format!(
        "cat /proc/softirqs > {a}; echo 'iosleuth: window 0 begin' > $IOSLEUTH_TRACE_MARKER; \
         dd if=/dev/zero of={dev} bs=4k count=4000 oflag=direct status=none; \
         dd if={dev} of=/dev/null bs=4k count=4000 iflag=direct status=none; \
         echo 'iosleuth: window 0 end 0' > $IOSLEUTH_TRACE_MARKER; cat /proc/softirqs > {b}",
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
    let times: Vec<&str> = marks
        .lines()
        .filter(|l| l.contains("iosleuth: window 0"))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(times.len(), 2, "{marks}");
    let window = format!("{}..{}", times[0], times[1]);
    let rep = json_report(&[&cap], &["--time", &window]);
    let before = softirqs(&std::fs::read_to_string(&a).unwrap());
    let after = softirqs(&std::fs::read_to_string(&b).unwrap());
    let mut compared = 0;
    for row in rep["irq"]["softirq"].as_array().unwrap() {
        let cpu = row["cpu"].as_u64().unwrap() as usize;
        for (vec, ours) in row["counts"].as_object().unwrap() {
            let ours = ours.as_u64().unwrap();
            let delta = after[vec][cpu] - before[vec][cpu];
            // Between reading the file and writing the mark (microseconds)
            // a timer tick may fall: at most a couple of runs.
            assert!(
                ours <= delta && delta - ours <= 2 + delta / 100,
                "CPU {cpu} {vec}: traced {ours}, /proc/softirqs {delta}"
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
