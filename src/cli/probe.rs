//! `iosleuth probe KIND`: built-in workloads that time each operation.

use crate::capture::probe::{self, parse_size, ProbeResult};
use crate::error::{Error, ExitStatus, Result};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ProbeArgs {
    #[command(subcommand)]
    kind: ProbeKind,
}

#[derive(Subcommand, Debug)]
enum ProbeKind {
    /// write + fsync in a loop at the same offset (the program that showed an eMMC stalling 270 ms on journal writes).
    Fsync {
        /// The file to write (created if missing).
        #[arg(long)]
        path: PathBuf,
        /// Bytes per write (k, m, g suffixes).
        #[arg(long, default_value = "8k", value_parser = parse_size)]
        size: u64,
        /// How many write + fsync pairs.
        #[arg(long, default_value = "1000")]
        count: u64,
        /// Stop after the first operation slower than this (ms).
        #[arg(long)]
        stop_above: Option<f64>,
        /// Write at growing offsets instead of rewriting the same one, so
        /// that every fsync commits the journal.
        #[arg(long)]
        append: bool,
    },
    /// Sequential direct reads submitted in batches through io_uring (the pattern where merging matters: 32 bios become one request).
    Seqread {
        /// A file or a block device.
        #[arg(long)]
        path: PathBuf,
        /// Bytes per read (k, m, g suffixes).
        #[arg(long, default_value = "4k", value_parser = parse_size)]
        bs: u64,
        /// Reads submitted at once.
        #[arg(long, default_value = "32")]
        depth: u32,
        /// How much to read (default: all of it).
        #[arg(long, value_parser = parse_size)]
        size: Option<u64>,
    },
    /// N threads of random buffered writes, each followed by fsync (a job that fills a small journal).
    Randwrite {
        /// The directory to write the threads' files in (made if missing).
        #[arg(long)]
        dir: PathBuf,
        /// Writer threads, each with a file of its own.
        #[arg(long, default_value = "4")]
        threads: usize,
        /// Bytes per write (k, m, g suffixes).
        #[arg(long, default_value = "16k", value_parser = parse_size)]
        bs: u64,
        /// Size of each thread's file (k, m, g suffixes).
        #[arg(long, default_value = "64m", value_parser = parse_size)]
        file_size: u64,
        /// fsync after every write.
        #[arg(long)]
        fsync: bool,
        /// Seconds to run.
        #[arg(long, default_value = "5")]
        duration: f64,
    },
    /// Burn a CPU in bursts, optionally as a SCHED_FIFO task pinned to one
    /// CPU (a real-time task that starves the threads beside it).
    Burn {
        /// Pin to this CPU.
        #[arg(long)]
        cpu: Option<usize>,
        /// Run as SCHED_FIFO with this priority (1-99).
        #[arg(long)]
        fifo: Option<i32>,
        /// Milliseconds of each burst on the CPU.
        #[arg(long, default_value = "300")]
        on_ms: f64,
        /// Milliseconds of rest between bursts.
        #[arg(long, default_value = "300")]
        off_ms: f64,
        /// Seconds to run.
        #[arg(long, default_value = "3")]
        duration: f64,
    },
}

/// Runs the probe; on failure, what it was doing and where.
fn start(kind: ProbeKind) -> (String, std::io::Result<ProbeResult>) {
    match kind {
        ProbeKind::Fsync {
            path,
            size,
            count,
            stop_above,
            append,
        } => (
            format!("fsync on {}", path.display()),
            probe::fsync_loop(&path, size as usize, count, stop_above, append),
        ),
        ProbeKind::Seqread {
            path,
            bs,
            depth,
            size,
        } => (
            format!("seqread on {}", path.display()),
            probe::seqread(&path, bs as usize, depth, size),
        ),
        ProbeKind::Randwrite {
            dir,
            threads,
            bs,
            file_size,
            fsync,
            duration,
        } => (
            format!("randwrite in {}", dir.display()),
            probe::randwrite(
                &dir,
                threads.max(1),
                bs as usize,
                file_size,
                fsync,
                duration,
            ),
        ),
        ProbeKind::Burn {
            cpu,
            fifo,
            on_ms,
            off_ms,
            duration,
        } => (
            format!(
                "burn on CPU {}",
                cpu.map(|c| c.to_string()).unwrap_or_else(|| "any".into())
            ),
            probe::burn(cpu, fifo, on_ms, off_ms, duration),
        ),
    }
}

pub fn run(args: ProbeArgs) -> Result<ExitStatus> {
    let (what, result) = start(args.kind);
    let r = result.map_err(|e| Error::failed(format!("probe {what}: {e}")))?;
    std::io::stdout().lock().write_all(r.render().as_bytes())?;
    Ok(ExitStatus::SUCCESS)
}
