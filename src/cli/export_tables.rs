//! `iosleuth export --parquet DIR` and `--perfetto FILE`.

use super::export::ExportArgs;
use crate::error::{Error, ExitStatus, Result};

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
            eprintln!(
                "iosleuth: {}: host={} capture={} kernel {}: {} rows",
                dir.display(),
                p.host,
                p.capture,
                p.kernel,
                counts.join(", ")
            );
        }
        return Ok(ExitStatus::SUCCESS);
    }
    Err(Error::bad_input("--perfetto is not written yet"))
}
