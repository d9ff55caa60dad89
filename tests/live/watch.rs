//! Live: `iosleuth watch` serves metrics Prometheus' own tools accept and
//! read back as iosleuth counts them, keeps a diagnosed capture when a
//! device stalls, survives clients that misbehave, and leaves no BPF
//! program behind when stopped or killed.

use crate::common;

use crate::cgroup::TestCgroup;
use common::*;
use iosleuth::testing::{LoopDevice, Stall};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn wait_for(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    wait_until(what, secs, || done().then_some(()).ok_or(String::new()));
}

/// As `wait_for`, the failure saying what was seen last (`Err`).
fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> Result<(), String>) {
    let until = Instant::now() + Duration::from_secs(secs);
    while let Err(seen) = done() {
        assert!(
            Instant::now() < until,
            "{what}: not within {secs} s; {seen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `watch` on a free port, logging to `log`; killed if the test fails.
struct Watch {
    child: Child,
    addr: SocketAddr,
}

impl Watch {
    fn start(log: &Path, extra: &[&str]) -> Watch {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = iosleuth()
            .args(["watch", "--listen", &addr.to_string(), "--log"])
            .arg(log)
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let w = Watch { child, addr };
        wait_for("watch serving metrics", 30, || {
            http_get(addr, "/metrics")
                .is_ok_and(|(c, b)| c == 200 && b.contains("iosleuth_build_info"))
        });
        w
    }

    fn metrics(&self) -> String {
        let (code, body) = http_get(self.addr, "/metrics").unwrap();
        assert_eq!(code, 200);
        body
    }

    /// SIGTERM: a clean stop, exit 0, and no program left loaded.
    fn stop(mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "watch ended with {status}");
                break;
            }
            assert!(Instant::now() < until, "watch did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
        wait_for("no program left after SIGTERM", 5, || {
            our_programs().is_empty()
        });
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        end_iosleuth(&mut self.child);
    }
}

/// A sample's value in the exposition text (`name{labels} value`).
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

/// The index of the `le` bucket (of `LE`) a value in seconds falls in.
fn le_index(seconds: f64) -> usize {
    const LE: [f64; 19] = [
        0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
        0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ];
    LE.iter().position(|&b| seconds <= b).unwrap_or(LE.len())
}

/// promtool's own check of the format and its naming rules: no word.
fn promtool_check(text: &str) {
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success() && checked.stdout.is_empty() && checked.stderr.is_empty(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// A PromQL instant query's single value, from Prometheus' HTTP API.
fn promql(prom: SocketAddr, query: &str) -> Option<f64> {
    let mut enc = String::new();
    for b in query.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            enc.push(b as char);
        } else {
            enc.push_str(&format!("%{b:02X}"));
        }
    }
    let (code, body) = http_get(prom, &format!("/api/v1/query?query={enc}")).ok()?;
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let value = v["data"]["result"][0]["value"][1].as_str()?.parse().ok();
    if value.is_none() {
        eprintln!("{query}: {body}");
    }
    value
}

/// A Prometheus server scraping every second with these scrape configs
/// (YAML list items), its data in `dir`; killed when dropped.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
}

impl Prometheus {
    fn start(dir: &Path, scrape_configs: &str) -> Prometheus {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!("global:\n  scrape_interval: 1s\nscrape_configs:\n{scrape_configs}"),
        )
        .unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Prometheus { child, addr }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The metrics pass `promtool check metrics`; a real Prometheus scrapes
/// them during a fio run, and its `histogram_quantile(0.99, ...)` of the
/// device time lands in the same `le` bucket as iosleuth's own D2C p99
/// of the same requests
/// (from `record --light` run over the same fio), or the next one.
/// Forty idle or half-written connections do not stop a scrape.
#[test]
#[ignore = "live: needs root, BTF, loop devices, fio and prometheus; scripts/test runs it"]
fn prometheus_scrapes_watch_and_agrees_with_iosleuths_own_p99() {
    let _live = live();
    need_programs(&["prometheus", "promtool", "fio"]);
    let disk = LoopDevice::create(64, true).expect("loop device");
    let name = disk.name.clone();
    let dir = tempdir();
    let watch = Watch::start(&dir.path().join("watch.log"), &[]);

    promtool_check(&watch.metrics());

    let prometheus = Prometheus::start(
        dir.path(),
        &format!(
            "  - job_name: iosleuth\n    static_configs:\n      - targets: ['{}']\n",
            watch.addr
        ),
    );
    let prom = prometheus.addr;
    // Ready is before its scrape loop found the target: wait for a scrape.
    wait_for("prometheus scraping watch", 60, || {
        http_get(prom, "/api/v1/targets")
            .is_ok_and(|(c, b)| c == 200 && b.contains("\"health\":\"up\""))
    });

    // Misbehaving clients: idle, and a head cut in the middle.
    let mut idle = Vec::new();
    for i in 0..40 {
        let mut s = TcpStream::connect(watch.addr).unwrap();
        if i % 2 == 0 {
            s.write_all(b"GET /metr").unwrap();
        }
        idle.push(s);
    }

    // fio, random 4 KiB direct reads at depth 8, under record --light.
    let cap = dir.path().join("light");
    run(iosleuth()
        .args(["record", "--light", "-o"])
        .arg(&cap)
        .args([
            "--",
            "fio",
            "--name=r",
            "--rw=randread",
            "--bs=4k",
            "--direct=1",
            "--ioengine=libaio",
            "--iodepth=8",
            "--size=48M",
            "--output=/dev/null",
        ])
        .arg(format!("--filename={}", disk.path.display())));
    assert_eq!(
        http_get(watch.addr, "/metrics").map(|r| r.0).unwrap(),
        200,
        "a scrape beside 40 idle connections"
    );
    drop(idle);
    let series = format!(
        "iosleuth_block_device_seconds_bucket{{device=\"{name}\",op=\"read\",le=\"+Inf\"}}"
    );
    let expected = 48 * 256;
    wait_for("the metrics count every read", 20, || {
        sample(&watch.metrics(), &series).is_some_and(|n| n >= expected as f64)
    });
    // Two more scrapes after it.
    std::thread::sleep(Duration::from_secs(3));
    let count = promql(
        prom,
        &format!("iosleuth_block_requests_total{{device=\"{name}\",op=\"read\"}}"),
    )
    .unwrap_or_else(|| {
        let targets = http_get(prom, "/api/v1/targets")
            .map(|r| r.1)
            .unwrap_or_default();
        panic!("prometheus has no series; its targets: {targets}")
    });
    // fio's reads, and maybe a few of udev's probing the new device.
    assert!(
        (expected as f64..expected as f64 + 64.0).contains(&count),
        "{count} reads counted, fio made {expected}"
    );
    // What the kernel keeps of each program: the runs it skipped always;
    // runs and run time only while it counts them, else said unknown.
    let m = watch.metrics();
    assert!(
        sample(
            &m,
            "iosleuth_bpf_program_missed_total{program=\"iosl_complete_st\"}"
        )
        .is_some(),
        "no skipped runs of the completion program in\n{m}"
    );
    let kept = std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").unwrap();
    let runs = sample(
        &m,
        "iosleuth_bpf_program_runs_total{program=\"iosl_complete_st\"}",
    );
    let unknown = m.contains("iosleuth_not_watched{what=\"bpf_run_time\"} 1");
    match kept.trim() {
        "0" => assert!(runs.is_none() && unknown, "{m}"),
        _ => assert!(
            runs.is_some_and(|n| n >= expected as f64) && !unknown,
            "{m}"
        ),
    }
    let p99_prom = promql(
        prom,
        &format!(
            "histogram_quantile(0.99, iosleuth_block_device_seconds_bucket{{device=\"{name}\",op=\"read\"}})"
        ),
    )
    .expect("a p99");
    let rep = json_report(&[&cap], &[]);
    let dev = disk.dev().unwrap().to_string();
    let device = rep["devices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["device"] == dev.as_str())
        .expect("the device in the light capture");
    // Only reads on this device: D2C of all its requests is the reads'.
    let p99_own = device["d2c"]["p99"]
        .as_f64()
        .unwrap_or_else(|| panic!("no p99 in {device:#}"))
        / 1e9;
    eprintln!(
        "margin: Prometheus p99 {:.3} ms, iosleuth's {:.3} ms: le buckets {} and {} (the test needs <= 1 apart)",
        p99_prom * 1e3,
        p99_own * 1e3,
        le_index(p99_prom),
        le_index(p99_own)
    );
    assert!(
        le_index(p99_prom).abs_diff(le_index(p99_own)) <= 1,
        "Prometheus {p99_prom} s, iosleuth {p99_own} s"
    );
    watch.stop();
}

/// A loop device that holds every 50th write 150 ms: the slow-request
/// trigger fires, and the capture it keeps is diagnosed as the device's
/// latency; the metrics then carry the trigger and the finding. With
/// --burst the full recorder runs beside it, and its capture, moved into
/// the kept one as `full/`, is diagnosed the same.
#[test]
#[ignore = "live: needs root, BTF and loop devices; scripts/test runs it"]
fn watch_keeps_a_diagnosed_capture_when_a_device_stalls() {
    let _live = live();
    let disk = LoopDevice::create_slow(64, Stall::writes(50, Duration::from_millis(150)))
        .expect("slow loop device");
    let dir = tempdir();
    let kept = dir.path().join("kept");
    let watch = Watch::start(
        &dir.path().join("watch.log"),
        &[
            "--dir",
            kept.to_str().unwrap(),
            "--before",
            "5",
            "--after",
            "2",
            "--burst",
            "4",
        ],
    );
    // 20 stalls over 3 s: the full recorder, started by the first, sees
    // the next ones.
    run(Command::new("dd")
        .arg("if=/dev/zero")
        .arg(format!("of={}", disk.path.display()))
        .args(["bs=4k", "count=1000", "oflag=direct", "status=none"]));
    let report = || -> Option<std::path::PathBuf> {
        std::fs::read_dir(&kept)
            .ok()?
            .flatten()
            .map(|e| e.path().join("report.json"))
            .find(|p| p.exists())
    };
    wait_for("a kept capture with its diagnosis", 60, || {
        report().is_some()
    });
    let capture = report().unwrap().parent().unwrap().to_path_buf();
    let name = disk.name.clone();
    assert!(
        capture
            .file_name()
            .unwrap()
            .to_string_lossy()
            .ends_with(&format!("-{name}")),
        "{}",
        capture.display()
    );
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(capture.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(
        rep["findings"][0]["id"],
        "device_latency_spike",
        "findings: {:#}\nslowest requests kept: {:#}\nwatch log:\n{}",
        rep["findings"],
        rep["light"]["slowest"],
        std::fs::read_to_string(dir.path().join("watch.log")).unwrap_or_default()
    );
    assert!(capture.join("report.html").exists());
    // The capture is one `report` reads like any light capture.
    let again = json_report(&[&capture], &[]);
    assert_eq!(again["findings"][0]["id"], "device_latency_spike");
    wait_for("the finding in the metrics", 10, || {
        let m = watch.metrics();
        sample(
            &m,
            "iosleuth_triggers_total{reason=\"slow_request\",outcome=\"captured\"}",
        ) == Some(1.0)
            && m.lines()
                .any(|l| l.starts_with("iosleuth_finding{rule=\"device_latency_spike\""))
    });
    let log = std::fs::read_to_string(dir.path().join("watch.log")).unwrap();
    assert!(log.contains("trigger: "), "{log}");
    assert!(log.contains("device_latency_spike"), "{log}");
    // --burst: the full recorder's capture beside it, diagnosed too.
    let full = capture.join("full");
    wait_for("the full record burst's diagnosis", 90, || {
        full.join("report.json").exists()
    });
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(full.join("report.json")).unwrap()).unwrap();
    let ids: Vec<&str> = rep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"device_latency_spike"),
        "full capture's findings: {ids:?}\n{}",
        std::fs::read_to_string(capture.join("full.log")).unwrap_or_default()
    );
    assert!(rep["light"].is_null(), "a full capture, not a light one");
    wait_for("the burst in the log", 10, || {
        std::fs::read_to_string(dir.path().join("watch.log"))
            .is_ok_and(|l| l.contains("full capture"))
    });
    assert!(
        !std::fs::read_dir(&kept)
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(".burst-")),
        "a staging directory left in {}",
        kept.display()
    );
    watch.stop();
}

/// SIGKILL runs no handler: the programs still go with the process's file
/// descriptors.
#[test]
#[ignore = "live: needs root and BTF; scripts/test runs it"]
fn watch_killed_leaves_no_program_loaded() {
    let _live = live();
    let tracefs_mounts = || -> Vec<String> {
        std::fs::read_to_string("/proc/mounts")
            .unwrap()
            .lines()
            .filter(|l| l.split(' ').nth(2) == Some("tracefs"))
            .map(str::to_string)
            .collect()
    };
    let mounts_before = tracefs_mounts();
    let dir = tempdir();
    let mut watch = Watch::start(&dir.path().join("watch.log"), &[]);
    assert!(our_programs().len() >= 7, "{:?}", our_programs());
    // Without --dir, the event formats are kept in a scratch directory.
    let scratch = std::env::temp_dir().join(format!("iosleuth-watch-{}", watch.child.id()));
    assert!(scratch.is_dir(), "{}", scratch.display());
    watch.child.kill().unwrap();
    watch.child.wait().unwrap();
    // A killed process cannot unmount the tracefs it mounted nor remove
    // its scratch directory: the next iosleuth does (`record --cleanup`,
    // which every record runs first).
    let said = run(iosleuth().args(["record", "--cleanup"]));
    assert_eq!(tracefs_mounts(), mounts_before, "tracefs left mounted");
    assert!(!scratch.exists(), "{} left: {said}", scratch.display());
    wait_for("no program left after SIGKILL", 5, || {
        our_programs().is_empty()
    });
}

/// With `--irq on` each CPU's softirq time is served (the timer's runs on
/// every CPU, within a few seconds), and nothing says it is not watched.
#[test]
#[ignore = "live: needs root and BTF; scripts/test runs it"]
fn watch_serves_interrupt_time_when_asked() {
    let _live = live();
    let dir = tempdir();
    let watch = Watch::start(&dir.path().join("watch.log"), &["--irq", "on"]);
    let timer = |m: &str| {
        m.lines()
            .filter(|l| {
                l.starts_with("iosleuth_cpu_softirq_seconds_total{")
                    && l.contains("vector=\"timer\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    wait_for("softirq time served", 30, || timer(&watch.metrics()) > 0.0);
    let m = watch.metrics();
    assert!(!m.contains("what=\"irq_off\""), "{m}");
    assert!(
        m.contains("iosleuth_cpu_hardirq_seconds_total{cpu=\"0\"}"),
        "{m}"
    );
    watch.stop();
}

/// Per-cgroup series: fio in two cgroups, direct reads in one and
/// synchronous buffered writes (O_SYNC) in the other, shows in two series with
/// the I/O the kernel charged to each (its own per-cgroup counts, which
/// the writes' syncs charge to the writer even without cgroup
/// writeback), and those series pass promtool.
#[test]
#[ignore = "live: needs root, BTF, loop devices, cgroups and fio; scripts/test runs it"]
fn watch_serves_each_cgroups_requests_in_its_own_series() {
    let _live = live();
    need_programs(&["promtool", "fio"]);
    let h = crate::cgroup::io_hierarchy();
    let disk = LoopDevice::create(64, true).expect("loop device");
    let (name, dev) = (
        disk.name.clone(),
        disk.dev().unwrap().to_string().replace(',', ":"),
    );
    // The kernel's own count of the bytes the disk completed since the
    // test began (diskstats' sectors written; a loop device keeps them
    // across attachments): the series are read once a second, so they are
    // awaited until they hold every completion, not for a fixed time.
    let sectors_written = || -> u64 {
        let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
        stat.split_whitespace().nth(6).unwrap().parse().unwrap()
    };
    let sectors_before = sectors_written();
    let disk_written = || (sectors_written() - sectors_before) * 512;
    let dir = tempdir();
    // Without the scheduler's hooks, which this test does not need: the
    // scrape names what it does not watch by an identifier. The cgroups'
    // histogram is served on request only.
    let watch = Watch::start(
        &dir.path().join("watch.log"),
        &["--runqueue", "off", "--cgroup-histograms"],
    );
    let m = watch.metrics();
    assert!(
        m.contains("iosleuth_not_watched{what=\"runqueue_off\"} 1"),
        "{m}"
    );
    // Interrupt time is not watched by default (--irq off): said, and its
    // families have no samples.
    assert!(
        m.contains("iosleuth_not_watched{what=\"irq_off\"} 1"),
        "{m}"
    );
    assert!(!m.contains("iosleuth_cpu_softirq_seconds_total{"), "{m}");
    assert!(!m.contains("iosleuth_cpu_hardirq_seconds_total{"), "{m}");
    let (reader, writer) = (TestCgroup::new(&h, "reader"), TestCgroup::new(&h, "writer"));
    let path = disk.path.display().to_string();
    // What earlier work left dirty is written back first: a flusher busy
    // with it would take the writer's pages too (charged to the root).
    run(&mut Command::new("sync"));
    reader.run(&format!(
        "exec fio --name=r --filename={path} --rw=randread --bs=4k --direct=1 --ioengine=psync --size=16M --number_ios=3000 --output=/dev/null"
    ));
    writer.run(&format!(
        "exec fio --name=w --filename={path} --rw=write --bs=64k --direct=0 --sync=1 --ioengine=psync --offset=32M --size=8M --output=/dev/null"
    ));
    let series = |text: &str, family: &str, cg: &str, op: &str| -> u64 {
        sample(
            text,
            &format!("{family}{{cgroup=\"{cg}\",device=\"{name}\",op=\"{op}\"}}"),
        )
        .unwrap_or(0.0) as u64
    };
    // Every byte written to the disk, in some cgroup's series.
    let all_written = |text: &str| -> u64 {
        text.lines()
            .filter(|l| {
                l.starts_with("iosleuth_cgroup_bytes_total{")
                    && l.contains(&format!("device=\"{name}\",op=\"write\""))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    };
    let mut text = String::new();
    wait_until("every completion in the cgroups' series", 15, || {
        text = watch.metrics();
        let reads = series(
            &text,
            "iosleuth_cgroup_requests_total",
            &reader.label,
            "read",
        );
        let (written, on_disk) = (all_written(&text), disk_written());
        if reads >= 3000 && written == on_disk {
            return Ok(());
        }
        let (_, _, r_bios) = reader.kernel_counts(&dev);
        let (_, w_written, _) = writer.kernel_counts(&dev);
        Err(format!(
            "the reader's reads {reads} (the kernel's {r_bios}); bytes written in all series {written}, the disk's {on_disk} (the writer's by the kernel {w_written})\n{text}"
        ))
    });
    let (r_read, r_written, r_bios) = reader.kernel_counts(&dev);
    let (_, w_written, _) = writer.kernel_counts(&dev);

    // The reader: fio's 3000 direct reads, as many as the kernel charged.
    assert_eq!(
        series(
            &text,
            "iosleuth_cgroup_requests_total",
            &reader.label,
            "read"
        ),
        3000
    );
    assert_eq!(r_bios, 3000);
    assert_eq!(
        series(&text, "iosleuth_cgroup_bytes_total", &reader.label, "read"),
        r_read
    );
    assert_eq!(r_read, 3000 * 4096);
    assert_eq!(
        series(
            &text,
            "iosleuth_cgroup_request_seconds_count",
            &reader.label,
            "read"
        ),
        3000,
        "every read timed"
    );
    assert_eq!(r_written, 0);
    assert_eq!(
        series(
            &text,
            "iosleuth_cgroup_requests_total",
            &reader.label,
            "write"
        ),
        0
    );
    // The writer: the bytes the kernel charged to it, which it wrote back
    // itself, each write being synchronous (O_SYNC: the flusher could take
    // a page only in the instant between a write and its sync, and its
    // part goes to the root cgroup without cgroup writeback).
    let w_bytes = series(&text, "iosleuth_cgroup_bytes_total", &writer.label, "write");
    assert_eq!(w_bytes, w_written, "{text}");
    assert!(
        w_bytes >= 4 << 20,
        "the writer wrote back {w_bytes} bytes of 8 MiB itself"
    );
    assert_eq!(
        series(
            &text,
            "iosleuth_cgroup_requests_total",
            &writer.label,
            "read"
        ),
        0
    );
    // The disk wrote fio's 8 MiB, no more and no less.
    assert_eq!(
        all_written(&text),
        8 << 20,
        "the disk's own count {} bytes\n{text}",
        disk_written()
    );
    promtool_check(&text);
    watch.stop();
}

/// `lab run NAME --watch`: beside the bad runs of the slow device and of
/// real-time starvation, watch's trigger keeps a capture diagnosed with
/// the scenario's cause; beside the healthy runs it fires nothing.
#[test]
#[ignore = "live: needs root, BTF, loop devices and FUSE; scripts/test runs it"]
fn lab_watch_catches_a_stalling_device_and_rt_starvation_and_stays_quiet_when_healthy() {
    let _live = live();
    for (name, said) in [
        (
            "slow-device",
            "top finding device_latency_spike, as expected",
        ),
        ("rt-starvation", "top finding rt_starvation, as expected"),
        ("healthy", "no trigger fired, as expected"),
        ("healthy-random", "no trigger fired, as expected"),
    ] {
        let out = iosleuth()
            .args(["lab", "run", name, "--watch"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let watch_line = text
            .lines()
            .find(|l| l.starts_with("watch: "))
            .unwrap_or_else(|| panic!("{name}: no watch line:\n{text}"));
        eprintln!("{name}: {watch_line}");
        // The whole output on failure: the verdict's next lines are
        // watch's log, which says why nothing fired.
        assert!(watch_line.contains(said), "{name}: {watch_line}\n{text}");
        assert!(
            out.status.success(),
            "{name}: {text}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    wait_for("no program left", 5, || our_programs().is_empty());
}

/// `record --light` of fio's io_uring engine reading `disk` at random,
/// 4 KiB direct, with `extra` options.
fn record_light_fio(cap: &Path, disk: &Path, extra: &[&str]) {
    run(iosleuth()
        .args(["record", "--light", "-o"])
        .arg(cap)
        .args(["--", "fio", "--name=u", "--rw=randread", "--bs=4k"])
        .args(["--direct=1", "--ioengine=io_uring"])
        .args(extra)
        .arg(format!("--filename={}", disk.display())));
}

/// fio's io_uring engine under `record --light` with `watch` beside it:
/// both count the requests fio counted, every one timed; the scrape
/// passes promtool's check. On a disk that holds every read 1 ms, one
/// request at a time (fio reaps each as it completes), the light
/// histogram's median and p99 are fio's own completion latencies (its
/// `--write_lat_log`) within 10 %.
#[test]
#[ignore = "live: needs root, BTF, loop devices, fio and promtool; scripts/test runs it"]
fn light_and_watch_count_and_time_fios_io_uring_requests() {
    let _live = live();
    need_programs(&["fio", "promtool"]);
    let disk = LoopDevice::create(64, true).expect("loop device");
    let dir = tempdir();
    let watch = Watch::start(&dir.path().join("watch.log"), &[]);
    let before = watch.metrics();
    let read_series = "iosleuth_io_uring_requests_total{op=\"read\"}";
    let base = sample(&before, read_series).unwrap_or(0.0);
    let (cap, json) = (dir.path().join("deep"), dir.path().join("deep.json"));
    record_light_fio(
        &cap,
        &disk.path,
        &[
            "--iodepth=16",
            "--size=32M",
            "--output-format=json",
            &format!("--output={}", json.display()),
        ],
    );
    let fio: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ios = fio["jobs"][0]["read"]["total_ios"].as_u64().unwrap();
    assert_eq!(ios, 8192);
    let doc: iosleuth::testing::LightDoc =
        serde_json::from_str(&std::fs::read_to_string(cap.join("light.json")).unwrap()).unwrap();
    let groups = doc.io_uring.expect("io_uring counted");
    let read = groups.iter().find(|g| g.op == "read").expect("reads");
    assert_eq!(read.counts.requests, ios, "{groups:?}");
    assert_eq!(
        (
            read.counts.untimed,
            read.counts.errors,
            read.counts.state_full
        ),
        (0, 0, 0)
    );
    assert_eq!(read.latency.n, ios);
    // watch saw the same requests (nothing else here uses io_uring).
    wait_for("watch counts fio's requests", 10, || {
        sample(&watch.metrics(), read_series).is_some_and(|n| n - base >= ios as f64)
    });
    let m = watch.metrics();
    assert_eq!(sample(&m, read_series).unwrap() - base, ios as f64);
    assert!(
        sample(&m, "iosleuth_io_uring_request_seconds_count{op=\"read\"}")
            .is_some_and(|n| n >= ios as f64),
        "{m}"
    );
    promtool_check(&m);
    watch.stop();

    // Latency: fio's own, one request at a time on a 1 ms disk.
    let stall = Stall {
        reads: true,
        ..Stall::writes(1, Duration::from_millis(1))
    };
    let slow = LoopDevice::create_slow(64, stall).expect("slow disk");
    let (cap, lat) = (dir.path().join("one"), dir.path().join("u"));
    record_light_fio(
        &cap,
        &slow.path,
        &[
            "--iodepth=1",
            "--size=32M",
            "--io_size=1200k",
            "--log_avg_msec=0",
            "--output=/dev/null",
            &format!("--write_lat_log={}", lat.display()),
        ],
    );
    let mut theirs: Vec<u64> = std::fs::read_to_string(dir.path().join("u_lat.1.log"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split(',').nth(1)?.trim().parse().ok())
        .collect();
    assert_eq!(theirs.len(), 300);
    let rep = json_report(&[&cap], &[]);
    let ours = &rep["light"]["io_uring"]["by_op"]["read"];
    assert_eq!(ours["count"].as_u64(), Some(300), "{ours}");
    assert_p50_p99_within_10_percent("fio's completion latency", &mut theirs, |p| {
        ours["latency"][format!("p{p}")].as_f64().unwrap()
    });
}

/// `--web-config` as Prometheus' exporters read it (TLS, one user with a
/// bcrypt hash): a real Prometheus scraping over TLS with the password,
/// trusting only the CA made here, reads the series; a second job with a
/// wrong password is refused with 401; plain HTTP gets no metrics.
#[test]
#[ignore = "live: needs root, BTF, prometheus and openssl; scripts/test runs it"]
fn prometheus_scrapes_watch_over_tls_with_a_password() {
    let _live = live();
    need_programs(&["prometheus", "openssl"]);
    let dir = tempdir();
    make_certificate(dir.path(), "watch");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: watch.crt\n  key_file: watch.key\nbasic_auth_users:\n  prometheus: {}\n",
            bcrypt::hash("s3cret", 8).unwrap()
        ),
    )
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = dir.path().join("watch.log");
    let mut watch = iosleuth()
        .args(["watch", "--listen", &addr.to_string(), "--web-config"])
        .arg(&web)
        .arg("--log")
        .arg(&log)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let serving = format!("serving https://{addr}/metrics");
    wait_until("watch serving over TLS", 30, || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(&serving) {
            return Ok(());
        }
        match watch.try_wait().unwrap() {
            Some(status) => panic!("watch ended with {status}: {text}"),
            None => Err(text),
        }
    });
    let watch = Kill(watch);
    let ca = dir.path().join("watch-ca.crt");
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {}\n    basic_auth:\n      username: prometheus\n      password: {password}\n    static_configs:\n      - targets: ['{addr}']\n",
            ca.display()
        )
    };
    let prometheus = Prometheus::start(
        dir.path(),
        &(job("tls", "s3cret") + &job("wrong", "not-it")),
    );
    let prom = prometheus.addr;
    // Both jobs scraped: one up, one refused.
    wait_until("prometheus scraping both jobs", 60, || {
        let (_, body) = http_get(prom, "/api/v1/targets").map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
        let targets = v["data"]["activeTargets"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let health = |job: &str| {
            targets.iter().find(|t| t["labels"]["job"] == job).map(|t| {
                (
                    t["health"].as_str().unwrap_or("").to_string(),
                    t["lastError"].as_str().unwrap_or("").to_string(),
                )
            })
        };
        match (health("tls"), health("wrong")) {
            (Some((up, _)), Some((down, error)))
                if up == "up" && down == "down" && error.contains("401") =>
            {
                Ok(())
            }
            seen => Err(format!("{seen:?}")),
        }
    });
    assert_eq!(promql(prom, "iosleuth_build_info{job=\"tls\"}"), Some(1.0));
    assert_eq!(promql(prom, "up{job=\"wrong\"}"), Some(0.0));
    // Plain HTTP on the TLS port: no metrics.
    assert!(
        http_get(addr, "/metrics").map_or(true, |(code, body)| code != 200
            && !body.contains("iosleuth_build_info"))
    );
    drop(prometheus);
    let mut watch = watch;
    unsafe { libc::kill(watch.0.id() as i32, libc::SIGTERM) };
    let status = watch.0.wait().unwrap();
    assert!(status.success(), "watch ended with {status}");
    assert!(our_programs().is_empty(), "left: {:?}", our_programs());
}
