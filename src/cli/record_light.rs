//! `iosleuth record --light`: the BPF session around the workload, and the
//! capture directory it leaves (model::light names its files).

use crate::capture::light::{LightOptions, LightSession};
use crate::capture::memory_cgroups::MemoryCgroups;
use crate::capture::proc_files::process_tree;
use crate::capture::snapshot;
use crate::capture::workload::{self, Workload};
use crate::error::{Error, Result};
use crate::model::capture_layout::{MANIFEST, SNAPSHOT};
use crate::model::light::{LIGHT, MODE};
use crate::model::manifest::Manifest;
use std::path::Path;

/// How often a recording checks for cgroup I/O limits (s).
const THROTTLE_CHECK_S: f64 = 2.0;

pub fn record(
    output: &Path,
    opts: &LightOptions,
    command: &[String],
    duration: Option<f64>,
) -> Result<i32> {
    record_timed(output, opts, command, duration, None).map(|(status, _)| status)
}

/// `record`, also returning the workload's wall time (s): from its start
/// to its end, the programs attached before and detached after; the
/// command's standard output into `stdout` when given.
pub fn record_timed(
    output: &Path,
    opts: &LightOptions,
    command: &[String],
    duration: Option<f64>,
    stdout: Option<&Path>,
) -> Result<(i32, f64)> {
    if !super::record::is_root() {
        return Err(Error::bad_input(
            "recording needs root (BPF is root-only here: kernel.unprivileged_bpf_disabled): run it with sudo",
        ));
    }
    // Before anything is set up: what is there is not ours to write over.
    crate::report::output_file::refuse_used_directory(output)?;
    if let Some(ms) = opts.slow_ns {
        if ms == 0 {
            note!("iosleuth: --slow 0: every request is sent (up to --slow-cap a second)");
        }
    }
    std::fs::create_dir_all(output)
        .map_err(|e| Error::bad_input(format!("cannot create {}: {e}", output.display())))?;
    workload::install_signal_handlers();
    let before = snapshot::take();
    let session = std::cell::RefCell::new(LightSession::start(opts, output, None)?);
    let mut sample = serde_json::Value::Null;
    // The memory cgroups it runs in, read while it runs (its own process's
    // at each look: it may move itself into one): their limits bound its
    // page cache.
    let memcg = std::cell::RefCell::new(MemoryCgroups::default());
    let root = std::cell::Cell::new(None);
    let poll = |pid| memcg.borrow_mut().sample_one(pid);
    let w = Workload {
        command,
        duration,
        envs: &[],
        stdout,
        poll: Some(&poll),
    };
    // Every few seconds (the progress callback's clock): the throttle
    // counters' hooks follow whether a cgroup has an I/O limit.
    let checked = std::cell::Cell::new(0.0);
    let started = std::time::Instant::now();
    let status = workload::run(
        &w,
        &mut |pid| {
            root.set(Some(pid));
            memcg.borrow_mut().sample(&process_tree(pid));
            sample = snapshot::workload(pid);
        },
        &|t| {
            if let Some(pid) = root.get() {
                memcg.borrow_mut().sample(&process_tree(pid));
            }
            if t - checked.get() >= THROTTLE_CHECK_S {
                checked.set(t);
                let _ = session.borrow_mut().refresh_throttle();
            }
            String::new()
        },
    );
    if let Some(o) = sample.as_object_mut() {
        o.insert("memory_limits".into(), memcg.borrow().to_json());
    }
    let seconds = started.elapsed().as_secs_f64();
    let doc = session
        .into_inner()
        .stop()
        .map_err(|e| Error::failed(e.message()))?;
    let write = |name: &str, value: &serde_json::Value| {
        std::fs::write(
            output.join(name),
            serde_json::to_string_pretty(value).unwrap_or_default(),
        )
        .map_err(|e| Error::failed(format!("cannot write {}: {e}", output.join(name).display())))
    };
    write(SNAPSHOT, &snapshot::document(before, sample))?;
    write(LIGHT, &serde_json::to_value(&doc).unwrap_or_default())?;
    let manifest = Manifest {
        mode: Some(MODE.into()),
        attach: Some(doc.attach.clone()),
        ..Manifest::new("mono")
    };
    std::fs::write(output.join(MANIFEST), manifest.to_json()).map_err(|e| {
        Error::failed(format!(
            "cannot write {}: {e}",
            output.join(MANIFEST).display()
        ))
    })?;
    let (ios, slow): (u64, u64) = doc.devices.iter().fold((0, 0), |(i, s), d| {
        (
            i + d.ops.values().map(|o| o.ios).sum::<u64>(),
            s + d.counters.slow_sent,
        )
    });
    note!(
        "iosleuth: light capture in {}: {ios} requests in histograms, {slow} slow ones recorded",
        output.display()
    );
    Ok((status, seconds))
}
