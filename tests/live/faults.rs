//! Live: page faults against the kernel's and the reader's own figures. A
//! Python reader maps a loop device on the lab's FUSE disk, which holds
//! every read 1 ms, advises random access (one page per fault, no
//! readahead) and touches 250 random pages, timing each touch; at its end
//! it reads its own `majflt` from /proc/self/stat. Some pages it does not
//! touch but hands to `write` (to a file), so that the kernel faults them
//! in, inside the call. iosleuth's major faults for the process are the
//! kernel's count, and its fault latency is the reader's time per touch
//! within 10 % at the median and p99.

use crate::common;

use common::*;
use iosleuth::testing::{LoopDevice, Stall};
use std::path::Path;
use std::time::Duration;

const READER: &str = r#"
import mmap, os, random, sys, time
path, n, out, k = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
open(out.rsplit(".", 1)[0] + ".pid", "w").write(str(os.getpid()))
fd = os.open(path, os.O_RDONLY)
size = os.lseek(fd, 0, os.SEEK_END)
m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
m.madvise(mmap.MADV_RANDOM)
pages = random.Random(7).sample(range(size // 4096), n + k)
lat = []
for p in pages[:n]:
    t = time.perf_counter_ns()
    m[p * 4096]
    lat.append(time.perf_counter_ns() - t)
# The kernel reads these pages for write(), from the mapping itself (a
# memoryview is no copy): faults taken in the call.
sink = os.open(out + ".w", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
view = memoryview(m)
for p in pages[n:]:
    t = time.perf_counter_ns()
    os.write(sink, view[p * 4096 : p * 4096 + 16])
    lat.append(time.perf_counter_ns() - t)
view.release()
# Everything but the count made before it is read, and no teardown after:
# a fault after the read (the interpreter's exit touching an evicted page)
# is in the recording but not in the count.
fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
lats = " " + " ".join(map(str, lat))
# /proc/PID/stat: majflt is the 12th field, the 10th after "comm)".
majflt = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[9])
os.write(fd_out, (str(majflt) + lats).encode())
os._exit(0)
"#;

/// Records the reader `script` touching `n` pages of `path` and writing
/// `k` more to a file, its figures written to `out`; a shell runs it and then writes its own stat line to
/// `OUT.sh` with builtins only, so that the stat's `cmajflt` is the
/// reader's major faults over its whole life (its exit included).
fn record_reader(cap: &Path, script: &Path, path: &Path, (n, k): (usize, usize), out: &Path) {
    run(iosleuth()
        .arg("record")
        .arg("-o")
        .arg(cap)
        .args(["--events", "block,sched,syscalls,faults", "--", "sh", "-c"])
        .arg(r#"python3 "$0" "$1" "$2" "$3" "$4"; read -r s < /proc/$$/stat; echo "$s" > "$3.sh""#)
        .arg(script)
        .arg(path)
        .arg(n.to_string())
        .arg(out)
        .arg(k.to_string()));
}

/// The reader's pid (written by it) and its major faults over its whole
/// life: `cmajflt` of the shell that waited for it.
fn reader_pid_and_majflt(out: &Path) -> (u32, u64) {
    let pid = std::fs::read_to_string(out.with_extension("pid")).unwrap();
    let stat = std::fs::read_to_string(out.with_extension("out.sh")).unwrap();
    // After "comm)": state ppid pgrp session tty tpgid flags minflt
    // cminflt majflt cmajflt.
    let cmajflt = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(10)
        .unwrap();
    (pid.trim().parse().unwrap(), cmajflt.parse().unwrap())
}

#[test]
#[ignore = "live: needs root, tracefs, loop devices and python3; scripts/test runs it"]
fn major_faults_are_the_kernels_and_their_time_the_readers() {
    let _live = live();
    need_programs(&["python3"]);
    let stall = Stall {
        reads: true,
        ..Stall::writes(1, Duration::from_millis(1))
    };
    let disk = LoopDevice::create_slow(64, stall).expect("slow disk");
    let dir = tempdir();
    let cap = dir.path().join("cap");
    let script = dir.path().join("reader.py");
    let out = dir.path().join("reader.out");
    std::fs::write(&script, READER).unwrap();
    record_reader(&cap, &script, &disk.path, (250, 50), &out);
    let figures: Vec<u64> = std::fs::read_to_string(&out)
        .unwrap()
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    let (majflt, mut touches) = (figures[0], figures[1..].to_vec());
    assert_eq!(touches.len(), 300);
    // Every file fault explained (`--top`): the slowest `majflt` are
    // the reads that missed; the rest, Python's own faults on cached
    // pages of its libraries, take microseconds.
    // The reader's own faults only; over its life (its cmajflt in the
    // shell that waited for it), for the message.
    let (pid, lifetime) = reader_pid_and_majflt(&out);
    let rep = json_report(&[&cap], &["--top", "100000", "--pid", &pid.to_string()]);
    let f = &rep["outliers"]["faults"];
    eprintln!(
        "majflt {majflt} at its end, {lifetime} over its life; iosleuth {}",
        f["major"]
    );
    // Nearly every page touched or written missed (udev may have read a
    // few): without the faults taken in write(), 250 at most.
    assert!(majflt >= 280, "majflt {majflt}");
    assert_eq!(f["major"].as_u64(), Some(majflt), "{f}");
    // The pages handed to write() faulted in the call (and so did pages
    // the interpreter's own calls wrote to: reads into fresh buffers).
    let in_kernel = f["in_kernel"].as_u64().unwrap();
    assert!(in_kernel >= 50, "{f}");
    assert_eq!(f["cut_short"], 0);
    let mut ours: Vec<u64> = rep["outliers"]["by_kind"]["fault file"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["latency_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(ours.len() as u64, f["file"].as_u64().unwrap());
    // The touches that missed, and as many of the slowest faults (a major
    // fault or so of Python's own is not a touch).
    let n = (majflt as usize).min(touches.len());
    ours.sort_unstable();
    let mut ours = ours.split_off(ours.len() - n);
    touches.sort_unstable();
    let mut theirs = touches.split_off(touches.len() - n);
    assert_p50_p99_within_10_percent("the reader's touch", &mut theirs, |p| {
        nearest_rank(&mut ours, p).unwrap() as f64
    });
}

/// A fault's file is named by its path: the capture reads the mappings of
/// the recorded command's processes while it runs, and the report puts
/// the path beside the device and inode the fault's events give.
#[test]
#[ignore = "live: needs root, tracefs, loop devices and python3; scripts/test runs it"]
fn a_faults_file_is_named_by_its_path() {
    let _live = live();
    need_programs(&["python3"]);
    let fs = iosleuth::testing::Ext4::create(64, 4, true).expect("ext4 on a loop device");
    let file = fs.mnt.join("data.mdb");
    std::fs::write(&file, vec![7u8; 8 << 20]).unwrap();
    let dir = tempdir();
    let (cap, script, out) = (
        dir.path().join("cap"),
        dir.path().join("reader.py"),
        dir.path().join("reader.out"),
    );
    // Mapped, then the file's pages out of the cache: the touches fault
    // them in. The mapping lives a second first, as a database's does for
    // its whole run: the capture reads mappings every half second.
    let cold = READER.replace(
        "m.madvise(mmap.MADV_RANDOM)\n",
        "m.madvise(mmap.MADV_RANDOM)\nos.fsync(fd)\nos.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\ntime.sleep(1.2)\n",
    );
    std::fs::write(&script, cold).unwrap();
    record_reader(&cap, &script, &file, (64, 0), &out);
    let rep = json_report(&[&cap], &["--top", "100000"]);
    let faults = rep["outliers"]["by_kind"]["fault file"].as_array().unwrap();
    let inode = {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(&file).unwrap().ino()
    };
    let ours: Vec<_> = faults
        .iter()
        .filter(|o| o["file"]["inode"].as_u64() == Some(inode))
        .collect();
    assert!(ours.len() >= 32, "{} faults on the file", ours.len());
    let named = format!("{} (inode {inode} on ", file.display());
    for o in ours {
        assert_eq!(o["file"]["path"], file.to_str().unwrap(), "{o}");
        assert!(o["summary"].as_str().unwrap().contains(&named), "{o}");
    }
}
