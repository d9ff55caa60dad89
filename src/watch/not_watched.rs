//! What `watch` cannot see on this machine: an identifier for the
//! `iosleuth_not_watched{what}` label, and the words for the log and the
//! captures it keeps.

use crate::capture::light::LightSession;

/// What the light programs cannot see here, as the metrics say it.
/// Something the daemon cannot see: an identifier for the
/// `iosleuth_not_watched{what}` label, and the words for its log and the
/// captures it keeps.
#[derive(Clone)]
pub(super) struct NotWatched {
    pub(super) id: String,
    pub(super) prose: String,
}

impl NotWatched {
    pub(super) fn new(id: impl Into<String>, prose: impl Into<String>) -> NotWatched {
        NotWatched {
            id: id.into(),
            prose: prose.into(),
        }
    }
}

pub(super) fn session_missing(session: &LightSession) -> Vec<NotWatched> {
    missing(
        session.missing_events(),
        aya::util::nr_cpus().unwrap_or(1),
        session.throttle(),
    )
}

/// What cannot be seen, from the kept events not attached, the number of
/// CPUs and whether held bios are counted.
fn missing(events: &[String], cpus: usize, throttle: bool) -> Vec<NotWatched> {
    let mut out: Vec<NotWatched> = events
        .iter()
        .map(|e| {
            if e.starts_with(crate::model::light::RUNQUEUE_MISSING) {
                NotWatched::new("runqueue_unsupported", e.clone())
            } else if e.starts_with(crate::model::light::EVERY_EVENT_MISSING) {
                // No tracefs: none of the kept events, said once.
                NotWatched::new("kept_events", e.clone())
            } else {
                NotWatched::new(format!("event:{e}"), format!("event {e}"))
            }
        })
        .collect();
    if cpus > crate::model::light::MAX_DEPTH_CPUS {
        out.push(NotWatched::new(
            "queue_depth_past_cpu_limit",
            format!(
                "the queue depth at issue of requests issued past the first {} CPUs",
                crate::model::light::MAX_DEPTH_CPUS
            ),
        ));
    }
    if !throttle {
        out.push(NotWatched::new(
            "throttled_bios",
            "throttled bios (no blk-throttle dispatch work found in /proc/kallsyms)",
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each thing not watched has an identifier for its label (letters,
    /// digits, `_`, and `:` between an event's system and name), whatever
    /// the words the capture uses.
    #[test]
    fn what_is_not_watched_is_named_by_an_identifier() {
        let events = [
            "jbd2:jbd2_checkpoint".to_string(),
            format!(
                "{}kept event: the journal's, balance_dirty_pages, wbt (no tracefs)",
                crate::model::light::EVERY_EVENT_MISSING
            ),
            format!(
                "{}the kernel refused the scheduler's program",
                crate::model::light::RUNQUEUE_MISSING
            ),
        ];
        let out = missing(&events, 300, false);
        let ids: Vec<&str> = out.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "event:jbd2:jbd2_checkpoint",
                "kept_events",
                "runqueue_unsupported",
                "queue_depth_past_cpu_limit",
                "throttled_bios"
            ]
        );
        assert!(out[1].prose.contains("no tracefs"));
        for id in ids {
            assert!(
                id.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
                "{id}"
            );
        }
        assert!(missing(&[], 2, true).is_empty());
    }
}
