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
            eprintln!(
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
    let s = perfetto(input, &to)?;
    let named = match to.file() {
        Some(f) => f.path().display().to_string(),
        None => "standard output".into(),
    };
    eprintln!(
        "iosleuth: wrote {} ({} bytes, {} tracks): {} requests, {} operations, {} thread states, {} journal commits, {} irqs, {} softirqs (open it at https://ui.perfetto.dev)",
        Esc(&named),
        s.bytes,
        s.tracks,
        s.requests,
        s.operations,
        s.thread_states,
        s.commits,
        s.irqs,
        s.softirqs
    );
    Ok(ExitStatus::SUCCESS)
}

/// The input analyzed while its rows become a Perfetto trace at `out`.
fn perfetto(
    input: &std::path::Path,
    out: &Destination,
) -> Result<crate::report::perfetto::Summary> {
    use crate::report::perfetto::{device_names, Export};
    let (snapshots, _) = pipeline::snapshots_of(&[input.to_path_buf()]);
    let snapshot = snapshots.into_iter().flatten().next();
    let processes = snapshot
        .as_ref()
        .map(|s| s.thread_groups())
        .unwrap_or_default();
    let export = Export::begin(out, device_names(snapshot.as_ref()), processes)?;
    let (analyzed, written) =
        pipeline::analyze_writing(input, &pipeline::Options::default(), export.writers());
    export.finish(written, analyzed.map(|_| ()))
}
