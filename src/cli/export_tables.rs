//! `iosleuth export --parquet DIR` and `--perfetto FILE`.

use super::export::ExportArgs;
use crate::analyze::rows::RowWriters;
use crate::error::{Error, ExitStatus, Result};
use crate::pipeline;
use crate::report::output_file::{Destination, NotForTerminal};
use crate::report::Esc;

pub fn run(args: ExportArgs) -> Result<ExitStatus> {
    if args
        .inputs
        .iter()
        .any(|p| crate::ingest::files::is_stdin(p))
    {
        return Err(Error::bad_input(
            "export --parquet and --perfetto read inputs by name (their snapshot and name make the partition): save the trace to a file first",
        ));
    }
    if let Some(dir) = &args.parquet {
        let opts = pipeline::Options::default();
        let snapshot_of = |input: &std::path::Path| {
            let (snapshots, _) = pipeline::snapshots_of(&[input.to_path_buf()]);
            snapshots.into_iter().flatten().next()
        };
        let analyze = |input: &std::path::Path, writers: RowWriters<'_>| {
            let (analyzed, written) = pipeline::analyze_writing(input, &opts, writers);
            (analyzed.map(|(a, _)| a), written)
        };
        let written = crate::report::parquet::export(
            dir,
            &args.inputs,
            args.host.as_deref(),
            &snapshot_of,
            &analyze,
        )?;
        for w in &written {
            let p = w.partition.as_ref().expect("set by export");
            let counts: Vec<String> = w.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
            // The host and kernel are the snapshot's, the capture the
            // input's name: anyone's text, escaped for the terminal.
            note!(
                "iosleuth: {}: host={} capture={} kernel {}: {} rows",
                Esc(&dir.display().to_string()),
                Esc(p.host.as_deref().unwrap_or("(unknown: NULL)")),
                Esc(&p.capture),
                Esc(p.kernel.as_deref().unwrap_or("unknown")),
                counts.join(", ")
            );
        }
        return Ok(ExitStatus::SUCCESS);
    }
    let out = args
        .perfetto
        .as_ref()
        .expect("clap requires one of the three");
    let [input] = args.inputs.as_slice() else {
        return Err(Error::bad_input(
            "export --perfetto writes one capture per trace file: give one input",
        ));
    };
    let what = NotForTerminal {
        what: "a Perfetto trace (protobuf)",
        instead: "--perfetto trace.pftrace",
    };
    let to = Destination::check(
        Some(out),
        std::slice::from_ref(input),
        "export --perfetto",
        Some(what),
    )?;
    let (s, recorded) = perfetto(input, &to)?;
    let named = match to.file() {
        Some(f) => f.path().display().to_string(),
        None => "standard output".into(),
    };
    // A count of what the capture did not record is unknown, not 0.
    let count = |n: u64, what: &str, set: &str| {
        if recorded(set) {
            format!("{n} {what}")
        } else {
            format!("{what} not recorded")
        }
    };
    note!(
        "iosleuth: wrote {} ({} bytes, {} tracks): {}, {}, {}, {}, {}, {} (open it at https://ui.perfetto.dev)",
        Esc(&named),
        s.bytes,
        s.tracks,
        if recorded("light") {
            format!("{} slow requests (a light capture records no other one by one)", s.requests)
        } else {
            count(s.requests, "requests", "block")
        },
        count(s.operations, "operations", "syscalls"),
        count(s.thread_states, "thread states", "sched"),
        count(s.commits, "journal commits", "fs"),
        count(s.irqs, "irqs", "irq"),
        count(s.softirqs, "softirqs", "irq")
    );
    Ok(ExitStatus::SUCCESS)
}

/// The input analyzed while its rows become a Perfetto trace at `out`.
/// Also which event sets the input recorded (the message's counts of the
/// others are unknown).
fn perfetto(
    input: &std::path::Path,
    out: &Destination,
) -> Result<(crate::report::perfetto::Summary, impl Fn(&str) -> bool)> {
    use crate::report::perfetto::{device_names, Export, TraceSpan};
    let (snapshots, _) = pipeline::snapshots_of(&[input.to_path_buf()]);
    let snapshot = snapshots.into_iter().flatten().next();
    let processes = snapshot
        .as_ref()
        .map(|s| s.thread_groups())
        .unwrap_or_default();
    let export = Export::begin(out, device_names(snapshot.as_ref()), processes)?;
    let (analyzed, written) =
        pipeline::analyze_writing(input, &pipeline::Options::default(), export.writers());
    let light = analyzed.as_ref().is_ok_and(|(a, _)| a.light.is_some());
    let sets: Vec<&str> = ["block", "syscalls", "sched", "fs", "irq", "light"]
        .into_iter()
        .filter(|set| {
            if light {
                // Counted in the kernel, not one by one: only the slow
                // requests and the journal's commits become slices.
                return matches!(*set, "light" | "fs");
            }
            analyzed.as_ref().is_ok_and(|(a, _)| {
                // Operations also come from probe marks and fs events.
                a.recorded_set(set) || (*set == "syscalls" && a.recorded_set("fs"))
            })
        })
        .collect();
    let summary = export.finish(
        written,
        analyzed.map(|(a, _)| TraceSpan {
            origin_ns: crate::report::origin_ns(&a),
            last_ns: a.span.last_ns,
        }),
    )?;
    Ok((summary, move |set: &str| sets.contains(&set)))
}
