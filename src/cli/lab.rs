//! `iosleuth lab list` and `lab run NAME|all [--keep] [--light] [--watch]`.

use crate::error::{Error, ExitStatus, Result};
use crate::lab::scenarios::{find, SCENARIOS};
use clap::{Args, Subcommand};
use std::io::Write;

#[derive(Args, Debug)]
pub struct LabArgs {
    #[command(subcommand)]
    action: LabAction,
}

#[derive(Subcommand, Debug)]
enum LabAction {
    /// The scenarios.
    List,
    /// Build, record a good and a bad run, diagnose and compare them, clean up.
    Run {
        /// A scenario, or `all`.
        name: String,
        /// Keep the captures (their directory is printed).
        #[arg(long)]
        keep: bool,
        /// Record every run with `record --light` (BPF histograms, slow
        /// requests and the flight recorder) instead of the full recorder.
        #[arg(long)]
        light: bool,
        /// Run `iosleuth watch` beside each bad run: its trigger must keep
        /// a capture whose diagnosis names the cause (where the cause makes
        /// a request of 100 ms or a long runnable wait), and fire nothing
        /// on the healthy runs.
        #[arg(long)]
        watch: bool,
        /// Prove each scenario's advice: while its bad setup stands, `iosleuth
        /// try` applies the expected finding's remedy and measures the bad
        /// run's workload in interleaved rounds (5 a side); a table of every
        /// rule's remedy, effect and confidence closes `lab run all --try`.
        #[arg(long = "try")]
        try_remedy: bool,
    },
}

pub fn run(args: LabArgs) -> Result<ExitStatus> {
    let mut out = std::io::stdout().lock();
    match args.action {
        LabAction::List => {
            for s in SCENARIOS {
                writeln!(
                    out,
                    "{:<15} {:<24} {} — good: {}; bad: {}",
                    s.name, s.case, s.about, s.good, s.bad
                )?;
            }
            Ok(ExitStatus::SUCCESS)
        }
        LabAction::Run {
            name,
            keep,
            light,
            watch,
            try_remedy,
        } => {
            if unsafe { libc::geteuid() } != 0 {
                return Err(Error::bad_input(
                    "the lab needs root (loop devices, mounts, tracefs)",
                ));
            }
            let chosen: Vec<_> = if name == "all" {
                SCENARIOS.iter().collect()
            } else {
                let s = find(&name).ok_or_else(|| {
                    let names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
                    Error::bad_input(format!(
                        "no lab scenario {name:?}; there are: {}, all",
                        names.join(", ")
                    ))
                })?;
                vec![s]
            };
            crate::lab::run::run(&chosen, keep, light, watch, try_remedy, &mut out)
        }
    }
}
