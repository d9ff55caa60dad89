//! `iosleuth try` on a loop device: a remedy measured on a workload it did
//! not write (dd), and every setting put back after a normal run, a
//! workload that fails, SIGINT, and SIGKILL followed by `record --cleanup`.

use crate::common::{iosleuth, live, outcome_of, run, tempdir};
use iosleuth::testing::{Ext4, LoopDevice};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A loop device whose read_ahead_kb is 0: every 4 KiB buffered read is
/// its own synchronous request, until `try` sets 128.
fn no_readahead() -> (LoopDevice, PathBuf) {
    assert!(
        Path::new("/sys/kernel/btf/vmlinux").exists(),
        "live test cannot run: missing kernel BTF (/sys/kernel/btf/vmlinux)"
    );
    let mut disk = LoopDevice::create(64, false).expect("loop device");
    disk.set_queue("read_ahead_kb", "0").unwrap();
    let knob = PathBuf::from(format!("/sys/block/{}/queue/read_ahead_kb", disk.name));
    run(Command::new("dd").args([
        "if=/dev/urandom",
        &format!("of=/dev/{}", disk.name),
        "bs=1M",
        "count=32",
        "status=none",
    ]));
    (disk, knob)
}

fn read(knob: &Path) -> String {
    std::fs::read_to_string(knob).unwrap().trim().to_string()
}

/// Reads 32 MiB of the device through its page cache, emptied first.
fn reader(disk: &LoopDevice) -> String {
    format!(
        "blockdev --flushbufs /dev/{0} && dd if=/dev/{0} of=/dev/null bs=4k count=8192 status=none",
        disk.name
    )
}

/// The disk's `MAJ:MIN`, as cgroup limit lines name it.
fn disk_dev(name: &str) -> String {
    std::fs::read_to_string(format!("/sys/block/{name}/dev"))
        .unwrap()
        .trim()
        .to_string()
}

/// A write limit of 100 IOPS on `dev` in the cgroup `cg`: its limit file,
/// the line that sets it and the line that lifts it (cgroup v2 or v1).
fn write_iops_limit(v2: bool, cg: &Path, dev: &str) -> (PathBuf, String, String) {
    let (file, limited, lifted) = if v2 {
        (
            "io.max",
            format!("{dev} riops=max wiops=100"),
            format!("{dev} rbps=max wbps=max riops=max wiops=max"),
        )
    } else {
        (
            "blkio.throttle.write_iops_device",
            format!("{dev} 100"),
            format!("{dev} 0"),
        )
    };
    (cg.join(file), limited, lifted)
}

/// `try --apply --rounds 3 --format json --set SET -- WORKLOAD...`.
fn applied(set: &str, workload: &[&str]) -> crate::common::Outcome {
    outcome_of(
        iosleuth()
            .args([
                "try", "--apply", "--rounds", "3", "--format", "json", "--set", set, "--",
            ])
            .args(workload),
    )
}

/// Waits (up to 60 s) for the workload of a candidate round to leave
/// `mark`, `try` still running; its stderr said when it ended early.
fn until_candidate_round(child: &mut std::process::Child, mark: &Path, stderr: &Path) {
    let until = Instant::now() + Duration::from_secs(60);
    while !mark.exists() {
        assert!(Instant::now() < until, "no candidate round began");
        assert!(
            child.try_wait().unwrap().is_none(),
            "try ended before its candidate round: {}",
            std::fs::read_to_string(stderr).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn try_cmd(knob: &Path, value: &str) -> Command {
    let mut c = iosleuth();
    c.args(["try", "--set", &format!("{}={value}", knob.display())]);
    c
}

#[test]
#[ignore = "live: needs root and a loop device"]
fn try_proves_read_ahead_on_dd_and_puts_it_back() {
    let _l = live();
    let (disk, knob) = no_readahead();
    let dir = tempdir();
    let kept = dir.path().join("rounds");
    // A dry run changes nothing and says what it would.
    let dry = outcome_of(try_cmd(&knob, "128").args(["--", "sh", "-c", &reader(&disk)]));
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert!(
        dry.stdout
            .contains(&format!("{}: 0 -> 128", knob.display())),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("dry run, nothing changed"),
        "{}",
        dry.stdout
    );
    assert_eq!(read(&knob), "0");
    let o = outcome_of(try_cmd(&knob, "128").args([
        "--apply",
        "--rounds",
        "3",
        "--format",
        "json",
        "--keep",
        kept.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &reader(&disk),
    ]));
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert_eq!(read(&knob), "0", "put back after the rounds");
    let t: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(t["verdict"], "better");
    assert_eq!(t["judged_by"], "workload.seconds");
    let ch = &t["changes"][0];
    assert_eq!(ch["metric"], "workload.seconds");
    // Measured here: 1.2 s against 0.05 s for 32 MiB (−95 %).
    assert!(ch["change_percent"].as_f64().unwrap() < -50.0, "{ch}");
    assert!(ch["ci95_percent"][1].as_f64().unwrap() < 0.0, "{ch}");
    let rounds = t["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 6);
    // The requests in each round's capture (light counts the kernel's
    // own): 8192 one-page reads without readahead, a few hundred with it.
    let dev = disk.dev().unwrap().to_string();
    let ios = |r: &serde_json::Value| -> u64 {
        r["metrics"][format!("dev.{dev}.requests")]
            .as_f64()
            .unwrap_or_else(|| panic!("no request count in {r}")) as u64
    };
    for r in rounds {
        let n = ios(r);
        match r["side"].as_str().unwrap() {
            "baseline" => assert!(n >= 8192, "{n} requests in {r}"),
            _ => {
                assert!(n < 2048, "{n} requests in {r}");
                let back = r["restored"].as_array().unwrap();
                assert_eq!(back.len(), 1, "{r}");
                assert_eq!(back[0]["reads"], "0");
                assert_eq!(back[0]["ok"], true);
            }
        }
    }
}

#[test]
#[ignore = "live: needs root and a loop device"]
fn try_full_records_each_round_with_the_full_recorder() {
    let _l = live();
    let (disk, knob) = no_readahead();
    let dir = tempdir();
    let kept = dir.path().join("rounds");
    let o = outcome_of(try_cmd(&knob, "128").args([
        "--apply",
        "--full",
        "--events",
        "block",
        "--rounds",
        "3",
        "--format",
        "json",
        "--keep",
        kept.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &reader(&disk),
    ]));
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert_eq!(read(&knob), "0", "put back after the rounds");
    let t: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(t["verdict"], "better", "{t:#}");
    // Each round is a full capture (its manifest, no light maps), and
    // its requests are the full recorder's, one by one: btt's merge row
    // (bios per request) is only there.
    let dev = disk.dev().unwrap().to_string();
    for r in t["rounds"].as_array().unwrap() {
        let side = r["side"].as_str().unwrap();
        let n = r["index"].as_u64().unwrap();
        let cap = PathBuf::from(r["capture"].as_str().unwrap());
        assert_eq!(cap, kept.join(format!("{side}-{n}")));
        assert!(
            cap.join("iosleuth-capture.json").is_file(),
            "{}",
            cap.display()
        );
        assert!(!cap.join("light.json").exists(), "{}", cap.display());
        let m = &r["metrics"];
        assert!(m[format!("dev.{dev}.bios_per_request")].is_number(), "{r}");
        let ios = m[format!("dev.{dev}.requests")].as_f64().unwrap() as u64;
        match side {
            "baseline" => assert!(ios >= 8192, "{ios} requests in {r}"),
            _ => assert!(ios < 2048, "{ios} requests in {r}"),
        }
    }
}

#[test]
#[ignore = "live: needs root and a loop device"]
fn try_refuses_what_it_cannot_set_before_any_round() {
    let _l = live();
    let (disk, knob) = no_readahead();
    let dir = tempdir();
    let kept = dir.path().join("rounds");
    for (set, said) in [
        (
            format!("/sys/block/{}/queue/no_such_knob=1", disk.name),
            "no such setting",
        ),
        (
            format!("{}=lots", knob.display()),
            "the kernel refused \"lots\"",
        ),
        ("/etc/hostname=x".to_string(), "not a setting"),
    ] {
        let o = outcome_of(iosleuth().args([
            "try",
            "--apply",
            "--keep",
            kept.to_str().unwrap(),
            "--set",
            &set,
            "--",
            "true",
        ]));
        assert_eq!(o.code, 2, "{set}: {}", o.stderr);
        assert!(o.stderr.contains(said), "{set}: {}", o.stderr);
        assert_eq!(read(&knob), "0");
        // No round ran: no capture was made.
        assert!(!kept.join("baseline-1").exists(), "{set}");
        let _ = std::fs::remove_dir_all(&kept);
    }
    // The scratch directory a SIGKILLed try left (its process gone) is
    // removed by the next try --apply.
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let left = PathBuf::from(format!("/var/tmp/iosleuth-try-{}-0", gone.id()));
    std::fs::create_dir_all(left.join("baseline-1")).unwrap();
    // A device the workload does no I/O to: refused after the first
    // baseline round, unless --force; the knob never changed for a round.
    let o = outcome_of(try_cmd(&knob, "128").args(["--apply", "--", "true"]));
    assert!(!left.exists(), "{}", o.stderr);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "{} outside what the workload touched",
            knob.display()
        )) && o.stderr.contains("--force to try anyway"),
        "{}",
        o.stderr
    );
    assert_eq!(read(&knob), "0");
    drop(disk);
}

#[test]
#[ignore = "live: needs root and a loop device"]
fn try_puts_settings_back_when_the_workload_fails_or_is_interrupted() {
    let _l = live();
    let (disk, knob) = no_readahead();
    let k = knob.display().to_string();
    // Some I/O to the device first: try refuses a knob of a device the
    // workload did not touch.
    let touch = format!(
        "dd if=/dev/{} of=/dev/null bs=4k count=16 iflag=direct status=none",
        disk.name
    );
    // Fails only in a candidate round, with the setting applied.
    let o = outcome_of(try_cmd(&knob, "128").args([
        "--apply",
        "--",
        "sh",
        "-c",
        &format!("{touch} && [ $(cat {k}) = 0 ] || exit 3"),
    ]));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("the workload failed in candidate round 1 (exit 3)"),
        "{}",
        o.stderr
    );
    assert_eq!(read(&knob), "0");

    // SIGINT while a candidate round runs; then SIGKILL, undone by the
    // next `record --cleanup`.
    let dir = tempdir();
    let mark = dir.path().join("candidate-running");
    for signal in [libc::SIGINT, libc::SIGKILL] {
        let _ = std::fs::remove_file(&mark);
        // Its rounds' captures in the test's directory: a SIGKILL leaves
        // them.
        let kept = dir.path().join(format!("rounds-{signal}"));
        let mut child = try_cmd(&knob, "128")
            .args([
                "--apply",
                "--keep",
                kept.to_str().unwrap(),
                "--",
                "sh",
                "-c",
                &format!(
                    "{touch} && if [ $(cat {k}) = 128 ]; then touch {}; exec sleep 60; fi",
                    mark.display()
                ),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .spawn()
            .unwrap();
        until_candidate_round(&mut child, &mark, &dir.path().join("stderr"));
        assert_eq!(read(&knob), "128", "applied during the candidate round");
        // SAFETY: a plain kill(2) of the child.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let status = child.wait().unwrap();
        if signal == libc::SIGINT {
            assert_eq!(status.code(), Some(130));
            assert_eq!(read(&knob), "0", "put back on SIGINT");
        } else {
            assert_eq!(read(&knob), "128", "a SIGKILL leaves it for --cleanup");
            run(iosleuth().args(["record", "--cleanup"]));
            assert_eq!(read(&knob), "0", "put back by record --cleanup");
        }
    }
    drop(disk);
}

/// Workloads iosleuth did not write: SQLite committing row by row under a
/// cgroup's write IOPS limit (the limit lifted for the candidate, its line
/// put back after), and a fio job file reading a file through the page
/// cache without readahead.
#[test]
#[ignore = "live: needs root, a loop device, the blkio controller, sqlite3 and fio"]
fn try_proves_remedies_on_sqlite_and_a_fio_job_file() {
    let _l = live();
    crate::common::need_programs(&["sqlite3", "fio"]);
    let fs = iosleuth::testing::Ext4::create(128, 8, false).expect("ext4 on a loop device");
    let dev = disk_dev(&fs.disk.name);
    let h = crate::cgroup::io_hierarchy();
    let cg = crate::cgroup::TestCgroup::new(&h, "try");
    let (knob, limited, lifted) = write_iops_limit(h.v2, &cg.dir, &dev);
    std::fs::write(&knob, &limited).unwrap();
    let line = || {
        std::fs::read_to_string(&knob)
            .unwrap()
            .lines()
            .find(|l| l.starts_with(&format!("{dev} ")))
            .unwrap_or("")
            .to_string()
    };
    let before = line();
    assert!(before.contains("100"), "{before}");
    // 40 rows, each its own transaction (an fsync of the database and its
    // journal each).
    let sql = fs.mnt.join("rows.sql");
    let mut text = String::from("PRAGMA synchronous=FULL; CREATE TABLE t(x);\n");
    for i in 0..40 {
        text.push_str(&format!("INSERT INTO t VALUES({i});\n"));
    }
    std::fs::write(&sql, text).unwrap();
    let db = fs.mnt.join("t.db");
    let script = format!(
        "echo $$ > {}/cgroup.procs && rm -f {1} {1}-journal && sqlite3 {1} < {2}",
        cg.dir.display(),
        db.display(),
        sql.display()
    );
    let o = applied(
        &format!("{}={lifted}", knob.display()),
        &["sh", "-c", &script],
    );
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let t: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(t["verdict"], "better", "{t}");
    assert!(
        t["changes"][0]["change_percent"].as_f64().unwrap() < -30.0,
        "{t}"
    );
    assert_eq!(line(), before, "the limit's line put back");

    // fio's job file: 16 MiB read 4 KiB at a time through the page cache
    // (invalidated before each run), read_ahead_kb 0 against 128.
    let disk_knob = format!("/sys/block/{}/queue/read_ahead_kb", fs.disk.name);
    let ra_before = read(Path::new(&disk_knob));
    std::fs::write(&disk_knob, "0").unwrap();
    // Laid out before: a first round that wrote it would not be a read.
    let data = fs.mnt.join("data");
    run(Command::new("dd").args([
        "if=/dev/urandom",
        &format!("of={}", data.display()),
        "bs=1M",
        "count=16",
        "conv=fsync",
        "status=none",
    ]));
    let job = fs.mnt.join("seq.fio");
    std::fs::write(
        &job,
        format!(
            "[seq]\nfilename={}\nsize=16m\nrw=read\nbs=4k\nioengine=psync\ninvalidate=1\n",
            data.display()
        ),
    )
    .unwrap();
    let o = applied(&format!("{disk_knob}=128"), &["fio", job.to_str().unwrap()]);
    let restored = read(Path::new(&disk_knob));
    std::fs::write(&disk_knob, &ra_before).unwrap();
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    assert_eq!(restored, "0");
    let t: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(t["verdict"], "better", "{t}");
    // fio's own report of each round is beside it, not in try's output.
    assert!(!o.stdout.contains("run status group"), "{}", o.stdout);
    drop(cg);
}

/// A PostgreSQL server of its own: a data directory on `dir` (owned by the
/// `postgres` user), a socket there, no TCP; stopped when dropped.
struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    socket: PathBuf,
    port: u16,
}

impl Postgres {
    /// Initialises and starts a server from inside `cgroup` (its
    /// backends, which write and fsync the WAL, are charged there).
    fn start(dir: &Path, cgroup: &Path) -> Postgres {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect(
                "test cannot run: PostgreSQL is not installed (scripts/test installs postgresql)",
            )
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("pgbench").is_file())
            .max()
            .expect("test cannot run: no /usr/lib/postgresql/*/bin/pgbench");
        let data = dir.join("pgdata");
        let socket = dir.join("socket");
        for d in [&data, &socket] {
            std::fs::create_dir(d).unwrap();
        }
        run(Command::new("chown").args(["-R", "postgres:postgres", dir.to_str().unwrap()]));
        // The scratch directory above it is root's alone: let postgres
        // through to its own.
        if let Some(up) = dir.parent() {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(up, std::fs::Permissions::from_mode(0o711)).unwrap();
        }
        let pg = Postgres {
            bin,
            data,
            socket,
            port: crate::common::free_port(),
        };
        run(pg.as_postgres("initdb").args([
            "-D",
            pg.data.to_str().unwrap(),
            "-A",
            "trust",
            "--no-sync",
        ]));
        let opts = format!(
            "-k {} -p {} -c listen_addresses='' -c fsync=on -c synchronous_commit=on",
            pg.socket.display(),
            pg.port
        );
        let start = format!(
            "echo $$ > {}/cgroup.procs && exec runuser -u postgres -- {} -D {} -o \"{opts}\" -l {} -w start",
            cgroup.display(),
            pg.bin.join("pg_ctl").display(),
            pg.data.display(),
            dir.join("server.log").display()
        );
        run(Command::new("sh").args(["-c", &start]));
        pg
    }

    /// One of the server's programs, run as `postgres`.
    fn as_postgres(&self, program: &str) -> Command {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(self.bin.join(program));
        c
    }

    /// pgbench's arguments to reach this server.
    fn pgbench(&self) -> Vec<String> {
        [
            "runuser",
            "-u",
            "postgres",
            "--",
            self.bin.join("pgbench").to_str().unwrap(),
            "-h",
            self.socket.to_str().unwrap(),
            "-p",
            &self.port.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .as_postgres("pg_ctl")
            .args([
                "-D",
                self.data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .output();
    }
}

/// pgbench against a PostgreSQL server whose backends a cgroup holds to
/// 100 write IOPS on the device: each commit writes and fsyncs the WAL, so
/// lifting the limit should raise pgbench's own figure, its tps.
#[test]
#[ignore = "live: needs root, a loop device, the blkio controller and PostgreSQL"]
fn try_proves_a_lifted_limit_on_pgbench_by_its_own_tps() {
    let _l = live();
    let fs = iosleuth::testing::Ext4::create(256, 16, false).expect("ext4 on a loop device");
    let dev = disk_dev(&fs.disk.name);
    let h = crate::cgroup::io_hierarchy();
    let cg = crate::cgroup::TestCgroup::new(&h, "pgbench");
    let (knob, limited, lifted) = write_iops_limit(h.v2, &cg.dir, &dev);
    let pg = Postgres::start(&fs.mnt, &cg.dir);
    let mut init = Command::new(&pg.pgbench()[0]);
    init.args(&pg.pgbench()[1..])
        .args(["-i", "-s", "1", "-q", "postgres"]);
    run(&mut init);
    std::fs::write(&knob, &limited).unwrap();
    let mut bench = pg.pgbench();
    bench.extend(["-c", "2", "-T", "3", "-N", "postgres"].map(String::from));
    let workload: Vec<&str> = bench.iter().map(String::as_str).collect();
    let o = outcome_of(
        iosleuth()
            .args([
                "try",
                "--apply",
                "--rounds",
                "3",
                "--format",
                "json",
                "--metric",
                "stdout:tps = ",
                "--higher-is-better",
                "--set",
                &format!("{}={lifted}", knob.display()),
                "--",
            ])
            .args(&workload),
    );
    let line = std::fs::read_to_string(&knob).unwrap_or_default();
    drop(pg);
    assert_eq!(o.code, 0, "{}\n{}", o.stdout, o.stderr);
    let t: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(t["verdict"], "better", "{t:#}");
    assert_eq!(t["judged_by"], "stdout:tps = ", "{t:#}");
    let ch = t["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "stdout:tps = ")
        .unwrap_or_else(|| panic!("no tps change in {t:#}"));
    eprintln!("pgbench tps under try: {ch}");
    // Held to 100 write IOPS, a commit waits for its WAL writes: lifted,
    // the same 3 s commit several times more.
    assert!(ch["change_percent"].as_f64().unwrap() > 50.0, "{ch}");
    assert!(ch["ci95_percent"][0].as_f64().unwrap() > 0.0, "{ch}");
    assert!(
        line.contains(&format!("{dev} 100")) || line.contains("wiops=100"),
        "the limit put back: {line}"
    );
    drop(cg);
}

/// A real-time burner beside the workload (not in it), killed when the
/// test ends.
struct Burner(std::process::Child);

impl Burner {
    fn start() -> Burner {
        let child = iosleuth()
            .args([
                "probe",
                "burn",
                "--cpu",
                "1",
                "--fifo",
                "50",
                "--on-ms",
                "300",
                "--off-ms",
                "100",
                "--duration",
                "300",
            ])
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let b = Burner(child);
        let until = Instant::now() + Duration::from_secs(10);
        while b.policy() != (1, 50) {
            assert!(
                Instant::now() < until,
                "the burner never became SCHED_FIFO 50"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        b
    }

    /// Its policy and real-time priority (proc(5): stat fields 41, 40).
    fn policy(&self) -> (u32, u32) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.0.id())).unwrap();
        let f: Vec<&str> = stat[stat.rfind(')').unwrap() + 1..]
            .split_whitespace()
            .collect();
        (f[41 - 3].parse().unwrap(), f[40 - 3].parse().unwrap())
    }

    fn knob(&self) -> String {
        format!("task/{}/policy", self.0.id())
    }
}

impl Drop for Burner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A shell loop of about 0.4 CPU-seconds on CPU 1, where the burner runs
/// 300 ms of every 400: about 1.6 s behind a real-time burner, 0.7 s
/// sharing the CPU with an ordinary one.
const PINNED_WORK: &str = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";

/// A thread's scheduling policy as a knob: a SCHED_FIFO burner made an
/// ordinary thread for the candidate rounds speeds up a shell loop that
/// shares its CPU; the burner is SCHED_FIFO 50 again after, after SIGKILL
/// too (by `record --cleanup`); a thread not seen holding the workload's
/// CPU, a kernel thread and a value the kernel refuses stop `try` before
/// any round.
#[test]
#[ignore = "live: needs root and BPF"]
fn try_lowers_a_real_time_thread_and_puts_its_policy_back() {
    let _l = live();
    let burner = Burner::start();
    let o = applied(
        &format!("{}=other", burner.knob()),
        &["taskset", "-c", "1", "sh", "-c", PINNED_WORK],
    );
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let v: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    let change = &v["plan"]["changes"][0];
    assert_eq!(change["now"], "fifo 50", "{change}");
    assert_eq!(change["tried"], "other");
    assert_eq!(change["thread"], "iosleuth", "{change}");
    assert_eq!(v["verdict"], "better", "{}", o.stdout);
    assert_eq!(v["judged_by"], "workload.seconds");
    let ch = &v["changes"][0];
    assert_eq!(ch["metric"], "workload.seconds");
    assert!(ch["change_percent"].as_f64().unwrap() < -30.0, "{ch}");
    assert!(ch["ci95_percent"][1].as_f64().unwrap() < 0.0, "{ch}");
    eprintln!("measured: {ch}");
    // Read back after each candidate round, and by this test.
    let restored: Vec<_> = v["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["restored"].as_array())
        .flatten()
        .collect();
    assert_eq!(restored.len(), 3, "{}", o.stdout);
    for back in restored {
        assert_eq!(back["reads"], "fifo 50", "{back}");
    }
    assert_eq!(burner.policy(), (1, 50));

    // Refused before any round: a thread that held no CPU the workload
    // waited for (this test's own), a kernel thread, a refused value.
    let me = std::process::id();
    let o = applied(
        &format!("task/{me}/policy=other"),
        &["taskset", "-c", "1", "sh", "-c", PINNED_WORK],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!(
            "task/{me}/policy outside what the workload touched"
        )) && o.stderr.contains(&burner.0.id().to_string()),
        "{}",
        o.stderr
    );
    let o = applied("task/2/policy=other", &["true"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("kernel thread"), "{}", o.stderr);
    // CPU 1000: within a CPU set, but no CPU of this machine.
    let o = applied(&format!("task/{}/affinity=1000", burner.0.id()), &["true"]);
    assert_eq!(o.code, 2);
    assert!(
        o.stderr.contains("the kernel refused \"1000\"") && o.stderr.contains("nothing was run"),
        "{}",
        o.stderr
    );
    assert_eq!(burner.policy(), (1, 50));

    // SIGKILL during a candidate round: `record --cleanup` puts it back.
    let dir = tempdir();
    let mark = dir.path().join("candidate-running");
    let pid = burner.0.id();
    let mut child = iosleuth()
        .args(["try", "--apply", "--set", &format!("{}=other", burner.knob())])
        .args(["--keep", dir.path().join("rounds").to_str().unwrap(), "--"])
        .args([
            "taskset",
            "-c",
            "1",
            "sh",
            "-c",
            &format!(
                "{PINNED_WORK}; if [ $(cut -d' ' -f41 /proc/{pid}/stat) = 0 ]; then touch {}; exec sleep 60; fi",
                mark.display()
            ),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
        .spawn()
        .unwrap();
    until_candidate_round(&mut child, &mark, &dir.path().join("stderr"));
    assert_eq!(
        burner.policy(),
        (0, 0),
        "ordinary during the candidate round"
    );
    // SAFETY: a plain kill(2) of the child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    assert_eq!(burner.policy(), (0, 0), "a SIGKILL leaves it for --cleanup");
    let said = run(iosleuth().args(["record", "--cleanup"]));
    assert_eq!(
        burner.policy(),
        (1, 50),
        "put back by record --cleanup: {said}"
    );
}

/// The ext4 mounted at `mnt` shows dioread_lock (`nodioread_nolock`).
fn dioread_locked(mnt: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info
        .lines()
        .rev()
        .find(|l| l.split(' ').nth(4) == Some(mnt.to_str().unwrap()))
        .unwrap_or_else(|| panic!("{} is not mounted", mnt.display()));
    line.contains("nodioread_nolock")
}

/// A mount option changed by a remount (`mount:MNT=dioread_lock`): in
/// effect in each candidate round and only there, put back after the
/// rounds, and after a SIGKILL by `record --cleanup`; an option the file
/// system does not have, or a path that is no mount point, refused before
/// any round.
#[test]
#[ignore = "live: needs root, a loop device and mkfs.ext4"]
fn try_remounts_a_mount_option_and_puts_it_back() {
    let _l = live();
    let fs = Ext4::create(64, 4, false).expect("ext4 on a loop device");
    let mnt = fs.mnt.clone();
    let m = mnt.display().to_string();
    assert!(!dioread_locked(&mnt), "ext4's default is dioread_nolock");
    let dir = tempdir();
    let sides = dir.path().join("sides");
    // Small synced writes into the file system; each round notes which
    // option it ran with.
    let work = format!(
        "dd if=/dev/zero of={m}/f bs=4k count=64 oflag=dsync status=none && \
         if grep -q ' {m} .*nodioread_nolock' /proc/self/mountinfo; then echo lock; else echo nolock; fi >> {}",
        sides.display()
    );
    let o = applied(&format!("mount:{m}=dioread_lock"), &["sh", "-c", &work]);
    assert_ne!(o.code, 2, "{}", o.stderr);
    let j: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(
        j["plan"]["changes"][0]["now"], "dioread_nolock",
        "{}",
        o.stdout
    );
    assert_eq!(j["plan"]["changes"][0]["tried"], "dioread_lock");
    let noted = std::fs::read_to_string(&sides).unwrap();
    let count = |w: &str| noted.lines().filter(|l| *l == w).count();
    assert_eq!((count("nolock"), count("lock")), (3, 3), "{noted}");
    let restored = &j["rounds"].as_array().unwrap()[1]["restored"][0];
    assert_eq!(restored["reads"], "dioread_nolock", "{}", o.stdout);
    assert_eq!(restored["ok"], true);
    assert!(!dioread_locked(&mnt), "put back after the rounds");

    for (set, said) in [
        (
            format!("mount:{m}=data=writeback"),
            "not a mount option try can change",
        ),
        (format!("mount:{m}/f=lazytime"), "is not a mount point"),
        (
            "mount:/proc=dioread_lock".to_string(),
            "is an option of ext4, and /proc is proc",
        ),
    ] {
        let o = outcome_of(iosleuth().args(["try", "--apply", "--set", &set, "--", "true"]));
        assert_eq!(o.code, 2, "{set}: {}", o.stderr);
        assert!(o.stderr.contains(said), "{set}: {}", o.stderr);
    }

    // SIGKILL during a candidate round: the remount stays until the next
    // `record --cleanup` puts it back.
    let mark = dir.path().join("candidate-running");
    let stderr = dir.path().join("stderr");
    let mut child = iosleuth()
        .args(["try", "--apply", "--set", &format!("mount:{m}=dioread_lock"), "--"])
        .args([
            "sh",
            "-c",
            &format!(
                "dd if=/dev/zero of={m}/f bs=4k count=16 oflag=dsync status=none && \
                 if grep -q ' {m} .*nodioread_nolock' /proc/self/mountinfo; then touch {}; exec sleep 60; fi",
                mark.display()
            ),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    until_candidate_round(&mut child, &mark, &stderr);
    // SAFETY: a plain kill(2) of the child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    child.wait().unwrap();
    assert!(dioread_locked(&mnt), "a SIGKILL leaves it for --cleanup");
    let o = outcome_of(iosleuth().args(["record", "--cleanup"]));
    assert!(
        !dioread_locked(&mnt),
        "put back by record --cleanup: {}",
        o.stderr
    );
    assert!(
        o.stderr.contains("mount option \"dioread_nolock\""),
        "{}",
        o.stderr
    );
    drop(fs);
}

/// A workqueue's cpumask (`writeback`'s): refused after a first baseline
/// round whose capture did not see its work run (a light capture records
/// no workqueue events), allowed when the full recorder's did, applied in
/// the candidate rounds and put back.
#[test]
#[ignore = "live: needs root, tracefs and a loop device"]
fn try_sets_a_workqueues_cpus_when_its_work_ran_for_the_workload() {
    let _l = live();
    let mask = PathBuf::from("/sys/devices/virtual/workqueue/writeback/cpumask");
    assert!(mask.exists(), "live test cannot run: no {}", mask.display());
    let was = read(&mask);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert!(cpus >= 2, "live test cannot run: one CPU");
    let disk = LoopDevice::create(64, false).expect("loop device");
    let dir = tempdir();
    let sides = dir.path().join("sides");
    // Buffered writes to the device, written back by the flusher (its
    // work on the writeback workqueue) at `sync`; each round notes the
    // mask it ran with.
    let work = format!(
        "dd if=/dev/zero of=/dev/{} bs=64k count=64 status=none && sync && cat {} >> {}",
        disk.name,
        mask.display(),
        sides.display()
    );
    let set = format!("{}=1", mask.display());
    let o = outcome_of(iosleuth().args([
        "try", "--apply", "--rounds", "3", "--set", &set, "--", "sh", "-c", &work,
    ]));
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("workqueues whose work ran: none); --force"),
        "{}",
        o.stderr
    );
    assert_eq!(read(&mask), was);
    let _ = std::fs::remove_file(&sides);
    let o = outcome_of(iosleuth().args([
        "try", "--apply", "--full", "--rounds", "3", "--format", "json", "--set", &set, "--", "sh",
        "-c", &work,
    ]));
    assert_ne!(o.code, 2, "{}", o.stderr);
    let noted = std::fs::read_to_string(&sides).unwrap();
    let count = |w: &str| noted.lines().filter(|l| l.trim() == w).count();
    assert_eq!((count(&was), count("1")), (3, 3), "{noted}");
    assert_eq!(read(&mask), was, "put back after the rounds");
    drop(disk);
}
