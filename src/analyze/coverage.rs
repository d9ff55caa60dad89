//! What the input could show: the event sets a capture recorded (its
//! manifest lists them) and the kinds of events the input holds. A rule
//! whose events are missing cannot judge, and says so: "no finding" is
//! only said of what was seen.

use crate::model::event_sets::EVENT_SETS;
use crate::model::{Action, Tracepoint};

/// The event sets and kinds of events an input holds.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    /// The events the captures enabled (`sched/sched_switch`); `None` when
    /// an input does not say (a trace file, a perf.data): then only what
    /// it holds counts.
    pub enabled: Option<Vec<String>>,
    /// The tracepoints seen, one bit per `Tracepoint`.
    seen_kinds: u128,
    /// The block actions seen, one bit per `Action`.
    seen_actions: u64,
}

// One bit each.
const _: () = assert!((Tracepoint::Other as u32) < 128 && (Action::IoDone as u32) < 64);

impl Recorded {
    pub fn saw_kind(&mut self, k: Tracepoint) {
        self.seen_kinds |= 1 << k as u32;
    }

    pub fn saw_action(&mut self, a: Action) {
        self.seen_actions |= 1 << a as u32;
    }

    /// The event sets (`record --events`) the input lacks; none for a light
    /// capture, whose BPF programs stand for the sets (its rules'
    /// `light_lacks` say what it lacks).
    pub fn missing_sets(&self) -> Vec<&'static str> {
        EVENT_SETS
            .iter()
            .map(|(set, _)| *set)
            .filter(|set| self.has_set(set).is_err())
            .collect()
    }

    /// Whether the input holds this tracepoint's events.
    pub fn saw(&self, k: Tracepoint) -> bool {
        self.seen_kinds & (1 << k as u32) != 0
    }

    /// Whether one of `set`'s events was recorded (a capture's manifest),
    /// or, where the input does not say, is in it.
    pub fn has_set(&self, set: &str) -> Result<(), String> {
        let Some((_, events)) = EVENT_SETS.iter().find(|(name, _)| *name == set) else {
            return Err(format!("no event set {set}"));
        };
        let short = |e: &&str| e.rsplit('/').next().unwrap_or(e).to_string();
        match &self.enabled {
            Some(enabled) if events.iter().any(|e| enabled.iter().any(|x| x == e)) => Ok(()),
            Some(_) => Err(format!("the `{set}` events were not recorded")),
            None if events.iter().map(short).any(|e| self.holds(&e)) => Ok(()),
            None => Err(format!("no `{set}` events in the input")),
        }
    }

    /// Whether `event` (`exceptions/page_fault_kernel`) was recorded:
    /// enabled by the capture, or held by the input; `None` when the input
    /// does not say and holds none.
    pub fn has_event(&self, event: &str) -> Option<bool> {
        let short = event.rsplit('/').next().unwrap_or(event);
        match &self.enabled {
            _ if self.holds(short) => Some(true),
            Some(enabled) => Some(enabled.iter().any(|x| x == event)),
            None => None,
        }
    }

    /// Whether an event of this name is in the input.
    fn holds(&self, short: &str) -> bool {
        if let Some(a) = Action::from_tracepoint(short) {
            return self.seen_actions & (1 << a as u32) != 0;
        }
        match Tracepoint::of(short) {
            Tracepoint::Other => false,
            k => self.seen_kinds & (1 << k as u32) != 0,
        }
    }
}

impl super::Analysis {
    /// Whether the analyses had `set`'s events as they need them: what
    /// the input recorded; for a light capture, whose programs stand for
    /// the sets, the scheduler when they counted switches, interrupts when
    /// they counted irqs, and never the block layer's bios and
    /// requests one by one (its requests are the kernel's counters and
    /// histograms).
    pub fn recorded_set(&self, set: &str) -> bool {
        match (&self.light, set) {
            (Some(_), "sched") => self.sched.switches > 0 || self.recorded.has_set(set).is_ok(),
            (Some(_), "irq") => {
                !(self.irq.hardirq.is_empty() && self.irq.softirq.is_empty())
                    || self.recorded.has_set(set).is_ok()
            }
            (Some(_), "block") => false,
            _ => self.recorded.has_set(set).is_ok(),
        }
    }

    /// The event sets the input lacks: what needs them is unknown, not 0.
    /// None for a light capture, whose rules' `light_lacks` say what it
    /// lacks.
    pub fn not_recorded(&self) -> Vec<&'static str> {
        match self.light {
            Some(_) => Vec::new(),
            None => self.recorded.missing_sets(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_recorded_by_the_manifest_or_held_by_the_input() {
        let mut r = Recorded::default();
        assert_eq!(
            r.has_set("sched"),
            Err("no `sched` events in the input".to_string())
        );
        r.saw_kind(Tracepoint::SchedWakeup);
        assert_eq!(r.has_set("sched"), Ok(()));
        r.saw_action(Action::Queue);
        assert_eq!(r.has_set("block"), Ok(()));
        assert!(r.has_set("writeback").is_err());
        // A capture says what it enabled, whatever happened.
        r.enabled = Some(vec!["writeback/balance_dirty_pages".into()]);
        assert_eq!(r.has_set("writeback"), Ok(()));
        assert_eq!(
            r.has_set("sched"),
            Err("the `sched` events were not recorded".to_string())
        );
        let missing = r.missing_sets();
        assert!(!missing.contains(&"writeback") && missing.contains(&"sched"));
        assert_eq!(missing.len(), EVENT_SETS.len() - 1);
    }
}
