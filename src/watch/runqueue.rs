//! Whether `watch` keeps the scheduler's hooks attached (`--runqueue
//! auto`): they run at every context switch and wakeup, so what they cost
//! follows the machine's switch rate, not its I/O. Measured on the test VM
//! (scripts/bench-overhead, BPF_ENABLE_STATS, two runs of rounds on
//! 2026-11-29): 83–105 ns a switch run and 68–90 ns a wakeup run, each
//! holding the ~50 ns the
//! statistics add (the empty programs' runs); a switch and a wakeup per
//! switch. Auto keeps them while that is under a point of the machine's
//! CPU time, estimated from the kernel's own switch count (`ctxt` in
//! /proc/stat, counted whether the hooks are attached or not).

/// Each switch runs the switch hook and, about as often, the wakeup's.
const RUNS_PER_SWITCH: f64 = 2.0;
/// A run of a scheduler hook, the hook's own cost included: rounded up
/// from the measured 20–50 ns (the statistics' share taken out).
const HOOK_NS: f64 = 60.0;
/// Detached above this share of the CPUs' time (a point).
const OFF_ABOVE: f64 = 0.01;
/// Attached again below this share...
const ON_BELOW: f64 = 0.005;
/// ... held for this many seconds.
const ON_AFTER_S: u64 = 60;
/// The rate is judged over this many seconds.
const WINDOW_S: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Attached while they cost under a point.
    Auto,
    On,
    Off,
}

/// Judges the scheduler hooks once a second.
pub struct Runqueue {
    policy: Policy,
    cpus: f64,
    /// `ctxt` of the last WINDOW_S + 1 seconds, oldest first.
    switches: std::collections::VecDeque<u64>,
    /// Seconds in a row under ON_BELOW.
    quiet_s: u64,
    pub on: bool,
}

/// A change to make, and why.
#[derive(Debug, PartialEq)]
pub struct Change {
    pub on: bool,
    pub why: String,
}

impl Runqueue {
    pub fn new(policy: Policy, cpus: usize) -> Self {
        Runqueue {
            policy,
            cpus: cpus.max(1) as f64,
            switches: Default::default(),
            quiet_s: 0,
            on: policy != Policy::Off,
        }
    }

    /// The hooks' estimated share of the CPUs' time at `per_s` switches a
    /// second.
    fn share(&self, per_s: f64) -> f64 {
        per_s * RUNS_PER_SWITCH * HOOK_NS / (self.cpus * 1e9)
    }

    /// Takes this second's `ctxt` (None: unreadable, nothing changes).
    pub fn second(&mut self, ctxt: Option<u64>) -> Option<Change> {
        if self.policy != Policy::Auto {
            return None;
        }
        self.switches.push_back(ctxt?);
        if self.switches.len() > WINDOW_S + 1 {
            self.switches.pop_front();
        }
        let (first, last) = (*self.switches.front()?, *self.switches.back()?);
        let secs = self.switches.len().saturating_sub(1);
        if secs == 0 {
            return None;
        }
        let per_s = last.saturating_sub(first) as f64 / secs as f64;
        let share = self.share(per_s);
        self.quiet_s = if share < ON_BELOW {
            self.quiet_s + 1
        } else {
            0
        };
        let said = format!(
            "{per_s:.0} context switches/s: the scheduler hooks would take about {:.2} % of the CPUs",
            share * 100.0
        );
        if self.on && secs >= WINDOW_S && share > OFF_ABOVE {
            self.on = false;
            return Some(Change {
                on: false,
                why: format!("{said}, over {:.0} %", OFF_ABOVE * 100.0),
            });
        }
        if !self.on && self.quiet_s >= ON_AFTER_S {
            self.on = true;
            return Some(Change {
                on: true,
                why: format!("{said}, under {:.1} % for {ON_AFTER_S} s", ON_BELOW * 100.0),
            });
        }
        None
    }
}

/// The kernel's count of context switches since boot (`ctxt` in /proc/stat).
pub fn context_switches() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two CPUs: a point is 10 ms a second, 50,000 switches at 200 ns each.
    #[test]
    fn auto_detaches_over_a_point_and_attaches_after_a_quiet_minute() {
        let mut r = Runqueue::new(Policy::Auto, 2);
        let mut ctxt = 1_000_000u64;
        let mut changes = Vec::new();
        // 40,000 switches/s: 0.8 %, kept.
        for _ in 0..20 {
            ctxt += 40_000;
            changes.extend(r.second(Some(ctxt)));
        }
        assert!(changes.is_empty() && r.on);
        // 250,000/s (the benchmark's 4 KiB reads at full speed): 5 %.
        for _ in 0..WINDOW_S {
            ctxt += 250_000;
            changes.extend(r.second(Some(ctxt)));
        }
        assert_eq!(changes.len(), 1, "{changes:?}");
        assert!(!changes[0].on && !r.on);
        assert!(changes[0].why.contains("about"), "{}", changes[0].why);
        // Quiet again: back on only after the window has forgotten the
        // load and a minute under half a point has passed.
        changes.clear();
        let mut seconds = 0;
        while changes.is_empty() && seconds < 200 {
            ctxt += 1_000;
            changes.extend(r.second(Some(ctxt)));
            seconds += 1;
        }
        assert!(changes.len() == 1 && changes[0].on && r.on);
        assert!((ON_AFTER_S..ON_AFTER_S + WINDOW_S as u64 + 2).contains(&seconds));
    }

    #[test]
    fn on_and_off_never_change_and_an_unreadable_count_changes_nothing() {
        for (policy, on) in [(Policy::On, true), (Policy::Off, false)] {
            let mut r = Runqueue::new(policy, 2);
            let mut ctxt = 0;
            for _ in 0..30 {
                ctxt += 10_000_000;
                assert_eq!(r.second(Some(ctxt)), None);
            }
            assert_eq!(r.on, on);
        }
        let mut r = Runqueue::new(Policy::Auto, 2);
        for _ in 0..30 {
            assert_eq!(r.second(None), None);
        }
        assert!(r.on);
    }

    #[test]
    fn the_switch_count_is_read_from_proc_stat() {
        let a = context_switches().expect("ctxt in /proc/stat");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(context_switches().unwrap() >= a);
    }
}
