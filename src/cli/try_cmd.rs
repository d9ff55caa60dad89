//! `iosleuth try`: a finding's remedy (or the user's settings) measured on
//! the user's own workload, in interleaved rounds, and put back.

use crate::error::{Error, ExitStatus, Result};
use crate::trial::{self, Plan, TrialOptions};
use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct TryArgs {
    /// A capture, or a JSON report of one (`report --format json`), whose
    /// finding's remedy to try.
    #[arg(
        value_name = "CAPTURE_OR_REPORT",
        required_unless_present_any = ["set", "workload_applies"]
    )]
    source: Option<PathBuf>,
    /// The finding whose remedy to try (default: the first finding with a
    /// remedy that can be applied live).
    #[arg(long, value_name = "ID", requires = "source")]
    finding: Option<String>,
    /// A setting to try instead of a finding's: a sysctl
    /// (`vm.dirty_ratio=20`), a file under /sys
    /// (`/sys/block/sda/queue/nomerges=0`), a thread's
    /// (`task/TID/nice=10`) or a mount option a remount changes
    /// (`mount:/data=dioread_lock`). Repeat for several, applied in order
    /// and put back in reverse.
    #[arg(long = "set", value_name = "KNOB=VALUE", conflicts_with = "source")]
    set: Vec<String>,
    /// The workload sets up each side itself, from IOSLEUTH_TRY_SIDE
    /// (`baseline` or `candidate`, given to every round): for a remedy
    /// that cannot be applied to a running system (a file system made with
    /// a larger journal, on a second device), or an A/B of your own. try
    /// changes nothing but the settings of the plan, if any.
    #[arg(long)]
    workload_applies: bool,
    /// Change the settings and run the rounds. Without it, print the plan
    /// and change nothing.
    #[arg(long)]
    apply: bool,
    /// Rounds per side (baseline and candidate, interleaved).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(3..=100))]
    rounds: u16,
    /// A figure to judge by beside the workload's time: a metric id of
    /// `diff` and `check` (`dev.7,0.d2c.p99_ms`), or `stdout:TEXT`, the
    /// number after the last TEXT in the workload's output (`stdout:tps = `
    /// for pgbench). The verdict is judged by it.
    #[arg(long, value_name = "ID")]
    metric: Option<String>,
    /// A `stdout:` figure is better higher (a throughput); lower is better
    /// by default.
    #[arg(long, requires = "metric")]
    higher_is_better: bool,
    /// Allow settings outside the devices the workload touched (and
    /// sysctls other than vm.* and kernel.sched_*).
    #[arg(long)]
    force: bool,
    /// Start no round after this many seconds (the rounds run so far are
    /// judged).
    #[arg(long, value_name = "SECONDS")]
    max_seconds: Option<f64>,
    /// Keep the rounds' captures in this directory (new); by default they
    /// are removed.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Record each round with the full recorder (tracepoints) instead of
    /// a light capture: for a finding only the full recorder's events show.
    #[arg(long)]
    full: bool,
    /// With --full: the event sets to record (as `record --events`).
    #[arg(long, requires = "full", default_value = "all", value_name = "SETS")]
    events: String,
    /// Output format (html: a page with each figure's rounds of both sides
    /// on one plot).
    #[arg(long, value_enum, default_value_t = TryFormat::Text)]
    format: TryFormat,
    /// Write the output to FILE instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The workload, run once per round.
    #[arg(last = true, required = true, value_name = "WORKLOAD")]
    workload: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TryFormat {
    Text,
    Json,
    Html,
}

pub fn run(args: TryArgs) -> Result<ExitStatus> {
    let page = matches!(args.format, TryFormat::Html).then_some(
        crate::report::output_file::NotForTerminal {
            what: "HTML",
            instead: "-o try.html",
        },
    );
    let to =
        crate::report::output_file::Destination::check(args.output.as_deref(), &[], "try", page)?;
    let plan = match &args.source {
        Some(src) => remedy_plan(src, args.finding.as_deref(), args.workload_applies)?,
        None if args.set.is_empty() => Plan::by_workload(
            format!("the workload's own candidate setup ({})", trial::SIDE_ENV),
            None,
            None,
            Vec::new(),
        ),
        None => {
            let mut p = Plan::new(
                "the settings given (--set)".into(),
                None,
                None,
                &parse_sets(&args.set)?,
            )?;
            if args.workload_applies {
                p.by_workload = Some(Vec::new());
            }
            p
        }
    };
    let rounds = usize::from(args.rounds);
    let dir = match &args.keep {
        Some(d) => {
            crate::report::output_file::refuse_used_directory(d)?;
            d.clone()
        }
        None => PathBuf::from("/var/tmp")
            .join(format!("iosleuth-try-{}", crate::capture::unique_name())),
    };
    if !args.apply {
        let out = match args.format {
            TryFormat::Text => trial::report::plan_text(&plan, rounds, args.full, &dir),
            TryFormat::Json => json(&serde_json::json!({ "plan": plan, "applied": false }))?,
            TryFormat::Html => format!(
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>iosleuth try: plan</title></head><body><pre>{}</pre></body></html>\n",
                crate::report::html::esc(&trial::report::plan_text(&plan, rounds, args.full, &dir))
            ),
        };
        super::write_output(&to, &out)?;
        return Ok(ExitStatus::SUCCESS);
    }
    if !super::record::is_root() {
        return Err(Error::bad_input(
            "try --apply changes kernel settings and records with BPF: it needs root (run it with sudo)",
        ));
    }
    let tracefs = crate::capture::tracefs::Tracefs::open().ok();
    for line in crate::capture::journal::cleanup_stale(tracefs.as_ref().map(|t| t.root.as_path())) {
        note!("iosleuth: cleanup: {line}");
    }
    remove_dead_scratch();
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::bad_input(format!("cannot create {}: {e}", dir.display())))?;
    let _scratch = Scratch {
        dir: (args.keep.is_none()).then(|| dir.clone()),
    };
    let opts = TrialOptions {
        rounds,
        max_seconds: args.max_seconds,
        force: args.force,
        metric: args.metric.clone(),
        higher_is_better: args.higher_is_better,
        dir: dir.clone(),
    };
    let light = crate::capture::light::LightOptions::default();
    let workload = args.workload.clone();
    let (full, events) = (args.full, args.events.clone());
    let mut record = |round: &Path, side: trial::Side| {
        note!(
            "iosleuth: try: {}",
            round.file_name().unwrap_or_default().to_string_lossy()
        );
        // The workload's own output beside its round, out of try's.
        let out = trial::output_of(round);
        // Told its side (env(1) execs it: the recorded process is its).
        let mut command = vec![
            "env".to_string(),
            format!("{}={}", trial::SIDE_ENV, side.name()),
        ];
        command.extend(workload.iter().cloned());
        if full {
            super::record::full_round(round, &events, &command, &out)
        } else {
            super::record_light::record_timed(round, &light, &command, None, Some(&out))
        }
    };
    let t = trial::run(plan, &opts, &mut record)?;
    let out = match args.format {
        TryFormat::Text => trial::report::trial_text(&t),
        TryFormat::Json => json(&t)?,
        TryFormat::Html => trial::html::page(&t),
    };
    super::write_output(&to, &out)?;
    Ok(t.exit_status())
}

fn json(v: &impl serde::Serialize) -> Result<String> {
    serde_json::to_string_pretty(v)
        .map(|s| s + "\n")
        .map_err(|e| Error::failed(e.to_string()))
}

/// `KNOB=VALUE` each; the value may hold `=` (a cgroup line does).
fn parse_sets(sets: &[String]) -> Result<Vec<(String, String)>> {
    sets.iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(Error::bad_input(format!(
                "--set {s:?}: expected KNOB=VALUE"
            ))),
        })
        .collect()
}

/// The plan of a finding's remedy in a capture (diagnosed now) or in a
/// JSON report.
fn remedy_plan(src: &Path, wanted: Option<&str>, by_workload: bool) -> Result<Plan> {
    let findings: Vec<serde_json::Value> = match read_report(src) {
        Some(v) => v,
        None => {
            let run = crate::pipeline::diagnosed(src, &crate::pipeline::Options::default())?;
            run.findings
                .iter()
                .map(|f| serde_json::to_value(f).unwrap_or_default())
                .collect()
        }
    };
    let ids: Vec<&str> = findings.iter().filter_map(|f| f["id"].as_str()).collect();
    let chosen =
        match wanted {
            Some(id) => findings.iter().find(|f| f["id"] == id).ok_or_else(|| {
                Error::bad_input(format!(
                    "{}: no finding {id} (its findings: {})",
                    src.display(),
                    if ids.is_empty() {
                        "none".into()
                    } else {
                        ids.join(", ")
                    }
                ))
            })?,
            None => findings
                .iter()
                .find(|f| f["remedy"]["live"] == true || (by_workload && f["remedy"].is_object()))
                .ok_or_else(|| {
                    let why: Vec<String> = findings
                        .iter()
                        .map(|f| {
                            let id = f["id"].as_str().unwrap_or("?");
                            match f["remedy"]["not_live"].as_str() {
                                Some(_) => format!(
                                    "{id}: its remedy cannot be applied to a running system"
                                ),
                                None => format!("{id}: no setting to try"),
                            }
                        })
                        .collect();
                    Error::bad_input(format!(
                    "{}: no finding has a remedy try can apply live ({}); name settings with --set, or measure a remedy that is not live with a workload that sets up its candidate side itself (--workload-applies)",
                    src.display(),
                    if why.is_empty() { "it has no finding".into() } else { why.join("; ") }
                ))
                })?,
        };
    let id = chosen["id"].as_str().unwrap_or("?").to_string();
    let remedy = &chosen["remedy"];
    if remedy.is_null() {
        return Err(Error::bad_input(format!(
            "{}: {id} has no setting to try (its workaround is not a setting, or the setting is already what it would try: {}); name settings with --set",
            src.display(),
            chosen["workaround"].as_str().unwrap_or("")
        )));
    }
    let from = format!("the remedy of {id} in {}", src.display());
    let metric = remedy["metric"].as_str().map(String::from);
    let settings = remedy["settings"].as_array().cloned().unwrap_or_default();
    if remedy["live"] != true {
        if by_workload {
            let described = settings
                .iter()
                .filter_map(|s| {
                    Some(trial::ByWorkload {
                        knob: s["knob"].as_str()?.to_string(),
                        now: s["now"].as_str().map(String::from),
                        tried: s["value"].as_str()?.to_string(),
                    })
                })
                .collect();
            return Ok(Plan::by_workload(from, Some(id), metric, described));
        }
        return Err(Error::bad_input(format!(
            "{}: {id}'s remedy cannot be applied to a running system: {}; a workload that sets up its candidate side itself can measure it (--workload-applies)",
            src.display(),
            remedy["not_live"].as_str().unwrap_or("not live")
        )));
    }
    let settings: Vec<(String, String)> = settings
        .iter()
        .filter_map(|s| {
            Some((
                s["knob"].as_str()?.to_string(),
                s["value"].as_str()?.to_string(),
            ))
        })
        .collect();
    let mut plan = Plan::new(from, Some(id), metric, &settings)?;
    if by_workload {
        plan.by_workload = Some(Vec::new());
    }
    Ok(plan)
}

/// A JSON report's findings, when `src` is one (a file of JSON with a
/// `findings` list); `None` for anything else (a capture to read).
fn read_report(src: &Path) -> Option<Vec<serde_json::Value>> {
    if !src.is_file() {
        return None;
    }
    // A report is small; a trace is not read whole here.
    let meta = std::fs::metadata(src).ok()?;
    if meta.len() > 64 << 20 {
        return None;
    }
    let text = std::fs::read(src).ok()?;
    if text.first().is_none_or(|&b| b != b'{') {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&text).ok()?;
    v.get("findings")?.as_array().cloned()
}

/// The scratch directories of `try` runs killed with SIGKILL (named
/// `iosleuth-try-PID-N` in /var/tmp, their process gone).
fn remove_dead_scratch() {
    let Ok(entries) = std::fs::read_dir("/var/tmp") else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("iosleuth-try-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        let Some(pid) = pid else {
            continue;
        };
        let dead = !crate::capture::journal::alive(pid) && e.path().is_dir();
        if dead && std::fs::remove_dir_all(e.path()).is_ok() {
            note!(
                "iosleuth: cleanup: removed {} of dead process {pid}",
                e.path().display()
            );
        }
    }
}

/// The rounds' captures, removed at the end unless kept.
struct Scratch {
    dir: Option<PathBuf>,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Some(d) = &self.dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
