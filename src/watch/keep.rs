//! The captures `watch` keeps when a trigger fires: each a light capture
//! directory (`record --light`'s layout: report, diff and check read it)
//! with its diagnosis beside it, under a disk quota that removes the
//! oldest first. Only directories `watch` made are counted or removed:
//! each holds a marker file, and the watch directory one of its own.

use crate::diagnose::Finding;
use crate::model::capture_layout::{EVENT_FORMATS, HEADER_PAGE, MANIFEST, SNAPSHOT};
use crate::model::light::{
    LightDoc, CONTEXT, CONTEXT_MAGIC, LIGHT, MODE, REC_SLOW, SLOW, SLOW_MAGIC, SLOW_RECORD,
};
use crate::model::manifest::Manifest;
use std::io::Write;
use std::path::{Path, PathBuf};

/// In the watch directory: it is `watch`'s to fill.
pub const WATCH_MARKER: &str = ".iosleuth-watch";
/// In each capture `watch` kept: it may remove it.
pub const CAPTURE_MARKER: &str = ".iosleuth-watch-capture";
/// Where the event formats the captures need are kept while watching.
pub const FORMATS_DIR: &str = ".formats";

/// A watch directory: new, empty, or one `watch` used before; anything
/// else is not ours to fill (an error naming it).
pub fn claim(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() && !dir.join(WATCH_MARKER).exists() {
                return Err(format!(
                    "{}: the directory is not empty and not one `iosleuth watch` made: give a new or empty directory",
                    dir.display()
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::write(
        dir.join(WATCH_MARKER),
        "iosleuth watch keeps its captures here; it removes only directories holding .iosleuth-watch-capture\n",
    )
    .map_err(|e| format!("cannot write in {}: {e}", dir.display()))
}

/// `YYYYmmddTHHMMSSZ` of a Unix time (UTC).
pub fn utc_stamp(unix_s: i64) -> String {
    let days = unix_s.div_euclid(86_400);
    let secs = unix_s.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// A name safe as one path component: letters, digits, `-`, `_`, `.`.
fn component(s: &str) -> String {
    let c: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if c.is_empty() || c.chars().all(|c| c == '.') {
        "device".into()
    } else {
        c
    }
}

/// What a kept capture holds besides the records.
pub struct Keep<'a> {
    pub root: &'a Path,
    pub unix_s: i64,
    pub subject: &'a str,
    pub reason: &'a str,
    pub doc: &'a LightDoc,
    pub snapshot: &'a serde_json::Value,
    /// The ring's records of the capture's span.
    pub records: &'a [Vec<u8>],
}

/// Writes the capture directory; returns its path.
pub fn write_capture(k: &Keep) -> std::io::Result<PathBuf> {
    let base = format!("{}-{}", utc_stamp(k.unix_s), component(k.subject));
    let mut dir = k.root.join(&base);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = k.root.join(format!("{base}.{n}"));
    }
    std::fs::create_dir(&dir)?;
    std::fs::write(dir.join(CAPTURE_MARKER), format!("{}\n", k.reason))?;
    let json = |v: &serde_json::Value| serde_json::to_string_pretty(v).unwrap_or_default();
    std::fs::write(dir.join(SNAPSHOT), json(k.snapshot))?;
    std::fs::write(
        dir.join(LIGHT),
        json(&serde_json::to_value(k.doc).unwrap_or_default()),
    )?;
    let mut slow = std::io::BufWriter::new(std::fs::File::create(dir.join(SLOW))?);
    slow.write_all(SLOW_MAGIC)?;
    slow.write_all(&(SLOW_RECORD as u32).to_le_bytes())?;
    slow.write_all(&0u32.to_le_bytes())?;
    let mut context = std::io::BufWriter::new(std::fs::File::create(dir.join(CONTEXT))?);
    context.write_all(CONTEXT_MAGIC)?;
    context.write_all(&0u64.to_le_bytes())?;
    for r in k.records {
        let kind = u16::from_le_bytes([r[0], r[1]]);
        if kind == REC_SLOW {
            slow.write_all(r)?;
        } else {
            context.write_all(r)?;
        }
    }
    slow.flush()?;
    context.flush()?;
    copy_formats(&k.root.join(FORMATS_DIR), &dir)?;
    let manifest = Manifest {
        mode: Some(MODE.into()),
        attach: Some(k.doc.attach.clone()),
        ..Manifest::new("mono")
    };
    std::fs::write(dir.join(MANIFEST), manifest.to_json())?;
    Ok(dir)
}

/// The event formats the session kept (what decodes the journal's
/// events), copied into a capture.
fn copy_formats(from: &Path, to: &Path) -> std::io::Result<()> {
    let page = from.join(HEADER_PAGE);
    if !page.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(to.join(HEADER_PAGE).parent().unwrap_or(to))?;
    std::fs::copy(&page, to.join(HEADER_PAGE))?;
    let events = from.join(EVENT_FORMATS);
    for system in std::fs::read_dir(&events).into_iter().flatten().flatten() {
        for event in std::fs::read_dir(system.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let format = event.path().join("format");
            if format.is_file() {
                let target = to
                    .join(EVENT_FORMATS)
                    .join(system.file_name())
                    .join(event.file_name());
                std::fs::create_dir_all(&target)?;
                std::fs::copy(&format, target.join("format"))?;
            }
        }
    }
    Ok(())
}

/// Diagnoses a kept capture and writes report.json and report.html beside
/// it; returns the findings, most important first.
pub fn diagnose(dir: &Path) -> crate::error::Result<Vec<Finding>> {
    let paths = [dir.to_path_buf()];
    let opts = crate::pipeline::Options {
        request_timeline: true,
        ..Default::default()
    };
    let a = crate::pipeline::analyze(&paths, &opts)?;
    let found = crate::diagnose::diagnose(&a);
    let write = |name: &str, text: String| {
        std::fs::write(dir.join(name), text).map_err(|e| {
            crate::error::Error::failed(format!("cannot write {}: {e}", dir.join(name).display()))
        })
    };
    write(
        "report.json",
        crate::report::Format::Json.report(&a, &found, false),
    )?;
    write(
        "report.html",
        crate::report::Format::Html.report(&a, &found, false),
    )?;
    Ok(found)
}

/// The captures `watch` kept under `root`, oldest first, with their sizes.
pub fn kept(root: &Path) -> Vec<(PathBuf, u64)> {
    let mut out: Vec<(PathBuf, u64)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join(CAPTURE_MARKER).is_file())
        .map(|p| {
            let size = du(&p);
            (p, size)
        })
        .collect();
    // The names begin with their UTC time: by name is by age.
    out.sort();
    out
}

fn du(p: &Path) -> u64 {
    let Ok(m) = std::fs::symlink_metadata(p) else {
        return 0;
    };
    if !m.is_dir() {
        return m.len();
    }
    std::fs::read_dir(p)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| du(&e.path()))
        .sum()
}

/// Removes the oldest kept captures until they take at most `quota`
/// bytes, always keeping the newest; returns what is left (count, bytes).
pub fn enforce_quota(root: &Path, quota: u64) -> (u64, u64) {
    let mut caps = kept(root);
    let mut total: u64 = caps.iter().map(|c| c.1).sum();
    while total > quota && caps.len() > 1 {
        let (path, size) = caps.remove(0);
        if std::fs::remove_dir_all(&path).is_ok() {
            total -= size;
        }
    }
    (caps.len() as u64, total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_utc_calendar_times() {
        assert_eq!(utc_stamp(0), "19700101T000000Z");
        // 2024-02-29 12:34:56 UTC (a leap day).
        assert_eq!(utc_stamp(1_709_210_096), "20240229T123456Z");
        assert_eq!(utc_stamp(4_102_444_799), "20991231T235959Z");
    }

    #[test]
    fn claims_only_empty_or_its_own_directories_and_removes_only_its_captures() {
        let t = tempfile::tempdir().unwrap();
        let theirs = t.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::fs::write(theirs.join("notes.txt"), "mine").unwrap();
        let e = claim(&theirs).unwrap_err();
        assert!(e.contains("not one `iosleuth watch` made"), "{e}");
        assert!(theirs.join("notes.txt").exists());

        let root = t.path().join("watch");
        claim(&root).unwrap();
        claim(&root).unwrap();
        std::fs::write(root.join("user-file"), "keep").unwrap();
        std::fs::create_dir(root.join("user-dir")).unwrap();
        for (name, bytes) in [
            ("20260101T000000Z-loop0", 4000),
            ("20260101T000100Z-loop0", 4000),
            ("20260101T000200Z-loop0", 4000),
        ] {
            let d = root.join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::write(d.join(CAPTURE_MARKER), "slow_request\n").unwrap();
            std::fs::write(d.join("slow.bin"), vec![0u8; bytes]).unwrap();
        }
        let (n, bytes) = enforce_quota(&root, 9000);
        assert_eq!(n, 2);
        assert!(bytes <= 9000);
        assert!(!root.join("20260101T000000Z-loop0").exists());
        assert!(root.join("20260101T000200Z-loop0").exists());
        // What watch did not make stays, whatever the quota.
        let (n, _) = enforce_quota(&root, 0);
        assert_eq!(n, 1, "the newest capture is always kept");
        assert!(root.join("user-file").exists() && root.join("user-dir").exists());
        assert_eq!(component("../../etc"), ".._.._etc");
        assert_eq!(component(".."), "device");
    }

    /// A capture written from what a light session recorded on the real
    /// kernel (the committed light-slowdev.cap: its maps' figures, its
    /// records, its formats) reads back as that capture does: the same
    /// findings, the same requests.
    #[test]
    fn a_kept_capture_reads_back_as_the_light_capture_it_holds() {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/light-slowdev.cap");
        let doc: LightDoc =
            serde_json::from_str(&std::fs::read_to_string(fixture.join(LIGHT)).unwrap()).unwrap();
        let snapshot: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(fixture.join(SNAPSHOT)).unwrap())
                .unwrap();
        let mut records: Vec<Vec<u8>> = std::fs::read(fixture.join(SLOW)).unwrap()[16..]
            .chunks(SLOW_RECORD)
            .map(<[u8]>::to_vec)
            .collect();
        let context = std::fs::read(fixture.join(CONTEXT)).unwrap();
        let mut at = 16;
        while at + 4 <= context.len() {
            let len = u16::from_le_bytes([context[at + 2], context[at + 3]]) as usize;
            records.push(context[at..at + len].to_vec());
            at += len;
        }
        let t = tempfile::tempdir().unwrap();
        claim(t.path()).unwrap();
        let formats = t.path().join(FORMATS_DIR);
        copy_formats(&fixture, &formats).unwrap();
        let dir = write_capture(&Keep {
            root: t.path(),
            unix_s: 1_795_000_000,
            subject: "loop0",
            reason: "slow_request",
            doc: &doc,
            snapshot: &snapshot,
            records: &records,
        })
        .unwrap();
        assert_eq!(
            dir.file_name().unwrap().to_string_lossy(),
            format!("{}-loop0", utc_stamp(1_795_000_000))
        );
        let found = diagnose(&dir).unwrap();
        let ids: Vec<&str> = found.iter().map(|f| f.id).collect();
        assert_eq!(ids, ["device_latency_spike"]);
        for name in [SLOW, CONTEXT] {
            assert_eq!(
                std::fs::read(dir.join(name)).unwrap().len(),
                std::fs::read(fixture.join(name)).unwrap().len(),
                "{name}"
            );
        }
        // The manifest is rewritten with the fields of this version.
        let written: LightDoc =
            serde_json::from_str(&std::fs::read_to_string(dir.join(LIGHT)).unwrap()).unwrap();
        assert_eq!(written, doc);
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap())
                .unwrap();
        assert_eq!(report["findings"][0]["id"], "device_latency_spike");
        assert!(std::fs::read_to_string(dir.join("report.html"))
            .unwrap()
            .contains("device_latency_spike"));
        assert_eq!(kept(t.path()).len(), 1);
    }
}
