//! `iosleuth export --parquet DIR` and `--perfetto FILE`.

use super::export::ExportArgs;
use crate::error::{Error, ExitStatus, Result};
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
        let opts = crate::pipeline::Options::default();
        let written =
            crate::report::parquet::export(dir, &args.inputs, args.host.as_deref(), &opts)?;
        for w in &written {
            let p = w.partition.as_ref().expect("set by export");
            let counts: Vec<String> = w.rows.iter().map(|(t, n)| format!("{t} {n}")).collect();
            // The host and kernel are the snapshot's, the capture the
            // input's name: anyone's text, escaped for the terminal.
            eprintln!(
                "iosleuth: {}: host={} capture={} kernel {}: {} rows",
                Esc(&dir.display().to_string()),
                Esc(&p.host),
                Esc(&p.capture),
                Esc(&p.kernel),
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
    let opts = crate::pipeline::Options::default();
    let s = crate::report::perfetto::export(input, out, &opts)?;
    eprintln!(
        "iosleuth: wrote {} ({} bytes, {} tracks): {} requests, {} operations, {} thread states, {} journal commits, {} irqs, {} softirqs (open it at https://ui.perfetto.dev)",
        out.display(),
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
