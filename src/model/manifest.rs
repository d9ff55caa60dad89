//! The capture manifest (`iosleuth-capture.json`), typed: what the
//! recorders (`record`, `record --light`) write and the importer reads,
//! in one place. Reading checks what decides whether the capture can be
//! decoded at all (format, version, page size) and takes every other
//! field leniently: a field of the wrong type reads as absent, since a
//! manifest is the input of whoever hands iosleuth a directory.

use super::capture_layout::{FORMAT, PAGE_SIZES, VERSION};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Manifest {
    pub format: String,
    pub version: u64,
    /// `light` for `record --light`; absent for a full capture.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// How a light capture's programs were attached (`tp_btf`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attach: Option<String>,
    /// The ring buffer's page size (4096 when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_size: Option<u64>,
    pub clock: String,
    /// The CPUs recorded, one `cpuN.raw` each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u32>,
    /// The events enabled, and those this kernel lacked (`sys:event`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub missing_events: Vec<String>,
    /// Events that took a kernel stack (`record --stacks`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub triggers: Vec<String>,
    /// Functions timed by the function graph tracer (`record --func`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// The on-CPU samples (`record --stacks`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<Samples>,
    /// The recorder's own threads, whose events are not the workload's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub recorder_tids: Vec<u32>,
    /// Each CPU's `per_cpu/cpuN/stats` when recording stopped, by CPU:
    /// the kernel's own count of events lost (`overrun`, `dropped events`)
    /// and handed out (`read events`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub ring_buffer_stats: BTreeMap<String, BTreeMap<String, f64>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Samples {
    pub freq_hz: u64,
    /// The perf `sample_type` the records were written with.
    pub sample_type: u64,
    /// Bytes written, or why writing failed.
    pub bytes: Option<u64>,
    pub error: Option<String>,
    pub lost: u64,
    /// The samples carry user stacks, read with the processes' mappings.
    pub user_frames: bool,
}

impl Manifest {
    /// A manifest of this iosleuth's layout.
    pub fn new(clock: &str) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            version: VERSION,
            clock: clock.into(),
            ..Manifest::default()
        }
    }

    /// The ring buffer's page size.
    pub fn page_size(&self) -> usize {
        self.page_size.unwrap_or(4096) as usize
    }

    /// The kernel's counter `name` of `cpu` (0 when not recorded).
    pub fn cpu_stat(&self, cpu: u32, name: &str) -> u64 {
        self.ring_buffer_stats
            .get(&cpu.to_string())
            .and_then(|m| m.get(name))
            .map_or(0, |&v| v as u64)
    }

    /// Reads a manifest's text. `Err` says why it cannot be a capture's:
    /// not a JSON object, another format, a version or page size this
    /// iosleuth does not read. A light manifest is returned before the
    /// page size is looked at (it has no ring-buffer pages).
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| format!("not a capture manifest: {e}"))?;
        if !v.is_object() {
            return Err("not a capture manifest: not a JSON object".into());
        }
        let string = |k: &str| v[k].as_str().map(str::to_string);
        let strings = |k: &str| -> Vec<String> {
            v[k].as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        };
        let numbers = |k: &str| -> Vec<u32> {
            v[k].as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
                .collect()
        };
        let mode = string("mode");
        let known = format!("this iosleuth reads \"{FORMAT}\" version {VERSION}");
        let light = mode.as_deref() == Some(super::light::MODE);
        if !light {
            match v.get("format") {
                None => {}
                Some(Value::String(f)) if f == FORMAT => {}
                Some(other) => {
                    return Err(format!(
                        "format {other} is not an iosleuth capture's ({known})"
                    ))
                }
            }
            match v.get("version") {
                None => {}
                Some(n) if n.as_u64() == Some(VERSION) => {}
                Some(other) => {
                    return Err(format!(
                        "capture format version {other} is not supported ({known})"
                    ))
                }
            }
        }
        let page_size = match v.get("page_size") {
            None => None,
            Some(p) if light => p.as_u64(),
            Some(p) => match p.as_u64() {
                Some(n) if n.is_power_of_two() && PAGE_SIZES.contains(&n) => Some(n),
                _ => {
                    return Err(format!(
                    "page_size {p} is not a ring-buffer page size (a power of two from {} to {})",
                    PAGE_SIZES.start(),
                    PAGE_SIZES.end()
                ))
                }
            },
        };
        let samples = v["samples"].as_object().map(|s| Samples {
            freq_hz: s.get("freq_hz").and_then(Value::as_u64).unwrap_or(0),
            // u64::MAX: no layout this iosleuth reads.
            sample_type: s
                .get("sample_type")
                .and_then(Value::as_u64)
                .unwrap_or(u64::MAX),
            bytes: s.get("bytes").and_then(Value::as_u64),
            error: s.get("error").and_then(Value::as_str).map(str::to_string),
            lost: s.get("lost").and_then(Value::as_u64).unwrap_or(0),
            user_frames: s.get("user_frames") == Some(&Value::Bool(true)),
        });
        let ring_buffer_stats = v["ring_buffer_stats"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(cpu, m)| {
                let m = m.as_object()?;
                let counters = m
                    .iter()
                    .filter_map(|(k, n)| Some((k.clone(), n.as_f64()?)))
                    .collect();
                Some((cpu.clone(), counters))
            })
            .collect();
        Ok(Manifest {
            format: string("format").unwrap_or_else(|| FORMAT.into()),
            version: v["version"].as_u64().unwrap_or(VERSION),
            mode,
            attach: string("attach"),
            page_size,
            clock: string("clock").unwrap_or_default(),
            cpus: numbers("cpus"),
            events: strings("events"),
            missing_events: strings("missing_events"),
            triggers: strings("triggers"),
            functions: strings("functions"),
            samples,
            recorder_tids: numbers("recorder_tids"),
            ring_buffer_stats,
        })
    }

    /// The text a recorder writes.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a manifest serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_recorder_writes_reads_back_the_same() {
        let mut m = Manifest::new("mono");
        m.page_size = Some(4096);
        m.cpus = vec![0, 1];
        m.events = vec!["block:block_rq_issue".into()];
        m.functions = vec!["ext4_sync_file".into()];
        m.recorder_tids = vec![7];
        m.samples = Some(Samples {
            freq_hz: 99,
            sample_type: 0x1_0000,
            bytes: Some(10),
            error: None,
            lost: 1,
            user_frames: true,
        });
        m.ring_buffer_stats
            .insert("1".into(), [("overrun".to_string(), 3.0)].into());
        let back = Manifest::parse(&m.to_json()).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.cpu_stat(1, "overrun"), 3);
        assert_eq!(back.cpu_stat(0, "overrun"), 0);
    }

    #[test]
    fn fields_of_the_wrong_type_read_as_absent_and_the_layout_is_checked() {
        let m = Manifest::parse(
            r#"{"cpus": "all", "recorder_tids": [1, -2, 99999999999], "samples": 3}"#,
        )
        .unwrap();
        assert!(m.cpus.is_empty());
        assert_eq!(m.recorder_tids, [1]);
        assert_eq!(m.samples, None);
        assert_eq!(m.page_size(), 4096);
        let e = |t: &str| Manifest::parse(t).unwrap_err();
        assert_eq!(e("[]"), "not a capture manifest: not a JSON object");
        assert!(e(r#"{"format": "x"}"#).starts_with("format \"x\" is not an iosleuth capture's"));
        assert!(e(r#"{"version": 2}"#).starts_with("capture format version 2 is not supported"));
        assert!(e(r#"{"page_size": 5000}"#)
            .starts_with("page_size 5000 is not a ring-buffer page size"));
        let light = Manifest::parse(r#"{"mode": "light", "version": 9, "page_size": 3}"#).unwrap();
        assert_eq!(light.mode.as_deref(), Some("light"));
    }
}
