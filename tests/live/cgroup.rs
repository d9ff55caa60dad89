//! Cgroups made by live tests in the hierarchy that holds the I/O
//! controller, and the kernel's own per-cgroup I/O counts.

use crate::common::run;
use std::process::Command;
use std::time::Duration;

/// A cgroup made for a test in the I/O controller's hierarchy, removed
/// when dropped.
pub struct TestCgroup {
    pub dir: std::path::PathBuf,
    /// Its path as watch labels it.
    pub label: String,
}

impl TestCgroup {
    pub fn new(h: &iosleuth::testing::Hierarchy, name: &str) -> TestCgroup {
        let label = format!("/iosleuth-test-{}-{name}", std::process::id());
        let dir = h.root.join(&label[1..]);
        std::fs::create_dir(&dir).unwrap();
        TestCgroup { dir, label }
    }

    /// `sh -c SCRIPT` run from inside the cgroup (its children too).
    pub fn run(&self, script: &str) -> String {
        run(Command::new("sh").arg("-c").arg(format!(
            "echo $$ > {}/cgroup.procs && {script}",
            self.dir.display()
        )))
    }

    /// The kernel's own count of the bios charged to this cgroup on `dev`
    /// (`maj:min`): read bytes, write bytes, read bios.
    pub fn kernel_counts(&self, dev: &str) -> (u64, u64, u64) {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).unwrap_or_default();
        let v1 = |f: &str, what: &str| -> u64 {
            read(f)
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{dev} {what} "))?.parse().ok())
                .unwrap_or(0)
        };
        if self.dir.join("io.stat").exists() {
            let stat = read("io.stat");
            let line = stat.lines().find(|l| l.starts_with(&format!("{dev} ")));
            let field = |k: &str| -> u64 {
                line.and_then(|l| {
                    l.split_whitespace()
                        .find_map(|kv| kv.strip_prefix(&format!("{k}="))?.parse().ok())
                })
                .unwrap_or(0)
            };
            (field("rbytes"), field("wbytes"), field("rios"))
        } else {
            (
                v1("blkio.throttle.io_service_bytes", "Read"),
                v1("blkio.throttle.io_service_bytes", "Write"),
                v1("blkio.throttle.io_serviced", "Read"),
            )
        }
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        // Its processes have exited; the kernel may take a moment to let go.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The I/O controller's hierarchy; on v2, with the io controller enabled
/// for the root's children (else the test cannot run: it fails, naming it).
pub fn io_hierarchy() -> iosleuth::testing::Hierarchy {
    let h = iosleuth::testing::io_hierarchy()
        .expect("test cannot run: no cgroup hierarchy holds the I/O controller");
    if h.v2 {
        let on = std::fs::read_to_string(h.root.join("cgroup.subtree_control")).unwrap_or_default();
        assert!(
            on.split_whitespace().any(|c| c == "io"),
            "test cannot run: the io controller is not enabled in {}/cgroup.subtree_control",
            h.root.display()
        );
    }
    h
}
