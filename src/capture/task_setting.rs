//! A thread's scheduling settings, read and changed as `chrt -p`,
//! `taskset -p` and `renice -p` do: its policy and real-time priority, the
//! CPUs it may run on, its nice value. One thread by its id (the kernel's
//! pid of the thread), never its siblings.
//!
//! A thread is named by its id and its start time (`/proc/TID/stat`'s
//! field 22): an id the kernel gave to a new thread since is not the same
//! thread, and nothing is changed or put back on it.

use serde::{Deserialize, Serialize};

/// Which of a thread's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskAttr {
    /// Scheduling policy and real-time priority: `other`, `batch`,
    /// `idle`, `fifo N`, `rr N` (chrt's names).
    Policy,
    /// The CPUs it may run on, as a list (`0`, `0-1,3`: taskset -c).
    Affinity,
    /// Its nice value, -20 to 19 (renice -n N -p TID).
    Nice,
}

impl TaskAttr {
    pub fn name(self) -> &'static str {
        match self {
            TaskAttr::Policy => "policy",
            TaskAttr::Affinity => "affinity",
            TaskAttr::Nice => "nice",
        }
    }

    pub fn parse(s: &str) -> Option<TaskAttr> {
        match s {
            "policy" => Some(TaskAttr::Policy),
            "affinity" => Some(TaskAttr::Affinity),
            "nice" => Some(TaskAttr::Nice),
            _ => None,
        }
    }
}

/// One thread, as it was when it was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    pub tid: u32,
    /// Its start time in clock ticks after boot.
    pub start: u64,
}

/// What `/proc/TID/stat` says that matters here.
struct Stat {
    start: u64,
    kernel_thread: bool,
}

/// PF_KTHREAD (include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

fn stat(tid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{tid}/stat")).ok()?;
    // The comm (field 2) may hold spaces and parentheses: fields after
    // the last ')' start at field 3.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let flags: u64 = fields.get(9 - 3)?.parse().ok()?;
    let start = fields.get(22 - 3)?.parse().ok()?;
    Some(Stat {
        start,
        kernel_thread: flags & PF_KTHREAD != 0,
    })
}

impl Task {
    /// The live thread `tid`; refuses a thread that does not exist and a
    /// kernel thread (the kernel places those itself: a workqueue's
    /// cpumask is its setting).
    pub fn find(tid: u32) -> Result<Task, String> {
        let s = stat(tid).ok_or_else(|| format!("no thread {tid} is running"))?;
        if s.kernel_thread {
            return Err(format!(
                "thread {tid} ({}) is a kernel thread: try changes user threads only",
                comm(tid)
            ));
        }
        Ok(Task {
            tid,
            start: s.start,
        })
    }

    /// Whether the thread still runs (its id not given to another since).
    pub fn alive(&self) -> bool {
        stat(self.tid).is_some_and(|s| s.start == self.start)
    }

    pub fn read(&self, attr: TaskAttr) -> Result<String, String> {
        if !self.alive() {
            return Err(format!("thread {} has ended", self.tid));
        }
        match attr {
            TaskAttr::Policy => read_policy(self.tid),
            TaskAttr::Affinity => read_affinity(self.tid),
            TaskAttr::Nice => read_nice(self.tid),
        }
    }

    pub fn write(&self, attr: TaskAttr, value: &str) -> Result<(), String> {
        if !self.alive() {
            return Err(format!("thread {} has ended", self.tid));
        }
        match attr {
            TaskAttr::Policy => {
                let (policy, prio) = parse_policy(value)?;
                let param = libc::sched_param {
                    sched_priority: prio,
                };
                // SAFETY: a plain system call with a valid parameter block.
                if unsafe { libc::sched_setscheduler(self.tid as i32, policy, &param) } != 0 {
                    return Err(std::io::Error::last_os_error().to_string());
                }
            }
            TaskAttr::Nice => {
                let n = parse_nice(value)?;
                // SAFETY: a plain system call; on Linux PRIO_PROCESS with a
                // thread id sets that thread's nice value.
                if unsafe { libc::setpriority(libc::PRIO_PROCESS, self.tid, n) } != 0 {
                    return Err(std::io::Error::last_os_error().to_string());
                }
            }
            TaskAttr::Affinity => {
                let cpus = parse_cpu_list(value)?;
                // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks.
                let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
                for c in cpus {
                    unsafe { libc::CPU_SET(c, &mut set) };
                }
                // SAFETY: a plain system call with a set of its size.
                let r = unsafe {
                    libc::sched_setaffinity(
                        self.tid as i32,
                        std::mem::size_of::<libc::cpu_set_t>(),
                        &set,
                    )
                };
                if r != 0 {
                    return Err(std::io::Error::last_os_error().to_string());
                }
            }
        }
        Ok(())
    }
}

/// The thread's name, or `?`.
pub fn comm(tid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{tid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

fn read_policy(tid: u32) -> Result<String, String> {
    // SAFETY: plain system calls on a thread id.
    let policy = unsafe { libc::sched_getscheduler(tid as i32) };
    if policy < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    if unsafe { libc::sched_getparam(tid as i32, &mut param) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    Ok(show_policy(policy, param.sched_priority))
}

/// SCHED_DEADLINE (include/uapi/linux/sched.h): shown, never set.
const SCHED_DEADLINE: i32 = 6;

fn show_policy(policy: i32, prio: i32) -> String {
    // SCHED_RESET_ON_FORK is or-ed into the policy read back.
    match policy & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_OTHER => "other".into(),
        libc::SCHED_BATCH => "batch".into(),
        libc::SCHED_IDLE => "idle".into(),
        libc::SCHED_FIFO => format!("fifo {prio}"),
        libc::SCHED_RR => format!("rr {prio}"),
        SCHED_DEADLINE => "deadline".into(),
        p => format!("policy {p}"),
    }
}

/// `other`, `SCHED_FIFO 50`, `fifo:50`, `rr 1` → the policy and priority
/// to set; the real-time ones need a priority of 1..=99, the others none.
pub fn parse_policy(value: &str) -> Result<(i32, i32), String> {
    let lower = value.trim().to_ascii_lowercase();
    let mut words = lower
        .split(|c: char| c.is_whitespace() || c == ':')
        .filter(|w| !w.is_empty());
    let name = words.next().unwrap_or("");
    let name = name.strip_prefix("sched_").unwrap_or(name);
    let prio = words.next();
    if words.next().is_some() {
        return Err(format!("{value:?}: a policy and at most a priority"));
    }
    let policy = match name {
        "other" | "normal" => libc::SCHED_OTHER,
        "batch" => libc::SCHED_BATCH,
        "idle" => libc::SCHED_IDLE,
        "fifo" => libc::SCHED_FIFO,
        "rr" => libc::SCHED_RR,
        _ => {
            return Err(format!(
                "{value:?}: not a policy (other, batch, idle, fifo N, rr N)"
            ))
        }
    };
    let rt = matches!(policy, libc::SCHED_FIFO | libc::SCHED_RR);
    let prio = match (rt, prio) {
        (true, Some(p)) => match p.parse::<i32>() {
            Ok(n) if (1..=99).contains(&n) => n,
            _ => return Err(format!("{value:?}: a real-time priority is 1 to 99")),
        },
        (true, None) => return Err(format!("{value:?}: {name} needs a priority (1 to 99)")),
        (false, None) | (false, Some("0")) => 0,
        (false, Some(_)) => return Err(format!("{value:?}: {name} takes no priority")),
    };
    Ok((policy, prio))
}

fn read_nice(tid: u32) -> Result<String, String> {
    // -1 is a nice value too: errno tells an error apart.
    // SAFETY: errno is this thread's; a plain system call.
    unsafe { *libc::__errno_location() = 0 };
    let n = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid) };
    let e = std::io::Error::last_os_error();
    if n == -1 && e.raw_os_error().is_some_and(|c| c != 0) {
        return Err(e.to_string());
    }
    Ok(n.to_string())
}

/// A nice value, -20 to 19.
pub fn parse_nice(value: &str) -> Result<i32, String> {
    match value.trim().parse::<i32>() {
        Ok(n) if (-20..=19).contains(&n) => Ok(n),
        _ => Err(format!("{value:?}: a nice value is -20 to 19")),
    }
}

fn read_affinity(tid: u32) -> Result<String, String> {
    // SAFETY: cpu_set_t is plain data, filled by the kernel.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let r = unsafe {
        libc::sched_getaffinity(tid as i32, std::mem::size_of::<libc::cpu_set_t>(), &mut set)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect();
    Ok(show_cpu_list(&cpus))
}

/// `0-1,3` → [0, 1, 3]: the kernel's and taskset's CPU list; at least one
/// CPU, each below CPU_SETSIZE.
pub fn parse_cpu_list(value: &str) -> Result<Vec<usize>, String> {
    let bad = || format!("{value:?}: not a CPU list (such as 0, 0-1,3)");
    let mut cpus = Vec::new();
    for part in value.trim().split(',') {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let a: usize = a.trim().parse().map_err(|_| bad())?;
        let b: usize = b.trim().parse().map_err(|_| bad())?;
        if a > b || b >= libc::CPU_SETSIZE as usize {
            return Err(bad());
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// [0, 1, 3] → `0-1,3`.
pub fn show_cpu_list(cpus: &[usize]) -> String {
    let cpus: Vec<u64> = cpus.iter().map(|&c| c as u64).collect();
    crate::model::units::ranges(&cpus).join(",")
}

/// A value as the kernel shows it once read back (`SCHED_FIFO:50` →
/// `fifo 50`, `1,0` → `0-1`), or why it is no value of `attr`.
pub fn shown(attr: TaskAttr, value: &str) -> Result<String, String> {
    match attr {
        TaskAttr::Policy => parse_policy(value).map(|(p, n)| show_policy(p, n)),
        TaskAttr::Affinity => parse_cpu_list(value).map(|c| show_cpu_list(&c)),
        TaskAttr::Nice => parse_nice(value).map(|n| n.to_string()),
    }
}

/// [`shown`], and a value that does not parse as it is.
pub fn canonical(attr: TaskAttr, value: &str) -> String {
    shown(attr, value).unwrap_or_else(|_| value.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_read_as_chrt_names_them() {
        assert_eq!(parse_policy("other"), Ok((libc::SCHED_OTHER, 0)));
        assert_eq!(parse_policy("SCHED_FIFO:50"), Ok((libc::SCHED_FIFO, 50)));
        assert_eq!(parse_policy(" rr 1 "), Ok((libc::SCHED_RR, 1)));
        for bad in [
            "fifo", "fifo 0", "fifo 100", "other 5", "deadline", "", "fifo 5 6",
        ] {
            assert!(parse_policy(bad).is_err(), "{bad}");
        }
        assert_eq!(canonical(TaskAttr::Policy, "SCHED_RR 7"), "rr 7");
        assert_eq!(
            show_policy(libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, 3),
            "fifo 3"
        );
    }

    #[test]
    fn cpu_lists_read_as_the_kernel_writes_them() {
        assert_eq!(parse_cpu_list("3,0-1,1"), Ok(vec![0, 1, 3]));
        assert_eq!(show_cpu_list(&[0, 1, 3, 5, 6, 7]), "0-1,3,5-7");
        assert_eq!(canonical(TaskAttr::Affinity, "1,0"), "0-1");
        for bad in ["", "a", "2-1", "0,", "99999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn this_thread_reads_back_and_a_kernel_thread_is_refused() {
        let me = unsafe { libc::gettid() } as u32;
        let t = Task::find(me).unwrap();
        assert!(t.alive());
        let now = t.read(TaskAttr::Affinity).unwrap();
        assert!(parse_cpu_list(&now).is_ok(), "{now}");
        // Unprivileged too: writing the same CPUs back is allowed.
        t.write(TaskAttr::Affinity, &now).unwrap();
        assert_eq!(t.read(TaskAttr::Affinity).unwrap(), now);
        assert!(t.read(TaskAttr::Policy).is_ok());
        let nice = t.read(TaskAttr::Nice).unwrap();
        assert!(parse_nice(&nice).is_ok(), "{nice}");
        assert_eq!(canonical(TaskAttr::Nice, " +5"), "5");
        assert!(parse_nice("20").is_err() && parse_nice("x").is_err());
        // kthreadd: the first kernel thread, in the machine's own pid
        // namespace.
        if comm(2) == "kthreadd" {
            let e = Task::find(2).unwrap_err();
            assert!(e.contains("kernel thread"), "{e}");
        }
        let gone = Task {
            tid: me,
            start: t.start + 1,
        };
        assert!(!gone.alive() && gone.read(TaskAttr::Policy).is_err());
    }
}
