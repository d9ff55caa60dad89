//! A workaround that is a setting, as data: the knobs to change, each with
//! its value when the capture was made and the value to try, and whether
//! it can be changed on a running system. `iosleuth try` applies it; the
//! text and HTML reports print the finding's workaround as before.
//!
//! A knob is named as its owner names it: a sysctl by its name
//! (`vm.dirty_ratio`), anything else by its file (`/sys/block/sda/queue/
//! nomerges`, a cgroup's `io.max`); `try` resolves the name to the file.

use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Remedy {
    /// The settings to change, in order (restored in the reverse order).
    pub settings: Vec<Setting>,
    /// Whether `iosleuth try` may apply it to a running system.
    pub live: bool,
    /// When it cannot be applied live: why, and what it needs instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_live: Option<String>,
    /// The figure (a `diff`/`check` metric id) the finding is about, which
    /// `try` judges the remedy by beside the workload's own time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Setting {
    /// A sysctl's name, a file under /sys or a thread's setting
    /// (`task/TID/nice`); for a remedy that is not live, what it changes
    /// in words (`ext4 journal of loop0`).
    pub knob: String,
    /// Its value in the capture's snapshot; `None`: the snapshot did not
    /// hold it (or there was no snapshot).
    pub now: Option<String>,
    /// The value to try.
    pub value: String,
}

impl Remedy {
    /// One knob to set, live.
    pub fn set(knob: impl Into<String>, now: Option<String>, value: impl Into<String>) -> Remedy {
        Remedy {
            settings: vec![Setting {
                knob: knob.into(),
                now,
                value: value.into(),
            }],
            live: true,
            not_live: None,
            metric: None,
        }
    }

    /// Knobs to set live, in order (`(knob, now, value)`); none when
    /// there are none.
    pub fn all(
        settings: impl IntoIterator<Item = (String, Option<String>, String)>,
    ) -> Option<Remedy> {
        let settings: Vec<Setting> = settings
            .into_iter()
            .map(|(knob, now, value)| Setting { knob, now, value })
            .collect();
        (!settings.is_empty()).then_some(Remedy {
            settings,
            live: true,
            not_live: None,
            metric: None,
        })
    }

    /// One more knob, set after the others.
    pub fn and(
        mut self,
        knob: impl Into<String>,
        now: Option<String>,
        value: impl Into<String>,
    ) -> Remedy {
        self.settings.push(Setting {
            knob: knob.into(),
            now,
            value: value.into(),
        });
        self
    }

    /// A remedy that needs more than a live setting (the file system
    /// unmounted, a remade device): `try` never applies it outside the lab.
    pub fn not_live(why: impl Into<String>) -> Remedy {
        Remedy {
            settings: Vec::new(),
            live: false,
            not_live: Some(why.into()),
            metric: None,
        }
    }

    /// The figure to judge it by (a metric id).
    pub fn judged_by(mut self, metric: impl Into<String>) -> Remedy {
        self.metric = Some(metric.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_keep_their_order_and_json_says_what_is_unknown() {
        let r = Remedy::set("vm.dirty_bytes", Some("4194304".into()), "0").and(
            "vm.dirty_ratio",
            None,
            "20",
        );
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["settings"][0]["knob"], "vm.dirty_bytes");
        assert_eq!(v["settings"][1]["knob"], "vm.dirty_ratio");
        assert!(v["settings"][1]["now"].is_null());
        assert_eq!(v["live"], true);
        assert!(v.get("not_live").is_none());
        let n = serde_json::to_value(Remedy::not_live("unmount first")).unwrap();
        assert_eq!(n["live"], false);
        assert_eq!(n["not_live"], "unmount first");
    }
}
