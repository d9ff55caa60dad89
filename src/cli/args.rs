//! Argument groups that several subcommands share, and their parsers.

use crate::analyze::Filter;
use crate::error::{Error, Result};
use crate::model::Dev;
use clap::Args;
use std::path::PathBuf;

/// Which part of the trace to look at: a time window and threads. Shared
/// by `report` and `flamegraph`, the commands that read one trace.
#[derive(Args, Debug)]
pub struct WindowArgs {
    /// Only events between FROM and TO seconds after the trace's first
    /// event, e.g. 0.5..2 (`+0.5..+2` says the same; either end may be
    /// left out: 1.5..), or with `abs:` in the trace's clock, as the
    /// report's first line and `dump` print it: abs:14277.9..14278.1.
    #[arg(long, value_parser = parse_range)]
    pub time: Option<Range>,
    /// Only these threads' operations, syscalls, fsyncs, scheduler rows
    /// and stacks (thread ids, comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Only threads with these names (comma-separated, exact).
    #[arg(long, value_delimiter = ',')]
    pub comm: Vec<String>,
}

impl WindowArgs {
    /// A filter that keeps this window and these threads, and every
    /// device; the rest is the default of `diff` and the lab.
    pub fn filter(self) -> Filter {
        let Range {
            from_ns,
            to_ns,
            absolute,
        } = self.time.unwrap_or_default();
        Filter {
            from_ns,
            to_ns,
            relative_time: !absolute,
            pids: self.pid,
            comms: self.comm,
            ..crate::pipeline::Options::default().filter
        }
    }
}

/// How kernel frames are named: for the commands that show stacks.
#[derive(Args, Debug)]
pub struct SymbolArgs {
    /// Name perf.data's kernel frames from this copy of the recording
    /// kernel's /proc/kallsyms (as `perf report --kallsyms`), not from
    /// this machine's.
    #[arg(long, value_name = "FILE")]
    pub kallsyms: Option<PathBuf>,
}

impl SymbolArgs {
    /// Checks a `--kallsyms` file and puts it in use for the whole run.
    pub fn apply(&self) -> Result<()> {
        if let Some(k) = &self.kallsyms {
            crate::symbolize::kallsyms::use_file(k)
                .map_err(|e| Error::bad_input(format!("{}: {e}", k.display())))?;
        }
        Ok(())
    }
}

/// What `report` looks at and how finely: a device, the window and
/// threads, iostat's interval, the outliers explained, kernel functions.
#[derive(Args, Debug)]
pub struct FilterArgs {
    /// Only this device: loop0, /dev/loop0 or 7,0 (MAJ,MIN). A name is
    /// looked up in the capture's settings, else on this machine.
    #[arg(long, value_parser = parse_device, value_name = "DEV")]
    pub device: Option<DeviceArg>,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Length of one iostat interval, in seconds.
    #[arg(long, default_value = "1")]
    pub interval: f64,
    /// How many of the slowest operations of each kind to explain.
    #[arg(long, default_value = "5")]
    pub top: usize,
    /// Kernel functions whose latency to show (comma-separated): every
    /// call where the function has entry and return tracepoints in the
    /// trace, else the time threads blocked with it on their stack (a
    /// capture recorded with --stacks). A capture recorded with `--func`
    /// shows its functions without this.
    #[arg(long = "func", value_delimiter = ',', value_name = "FUNCTIONS")]
    pub functions: Vec<String>,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

impl FilterArgs {
    /// The pipeline's options these arguments ask for; a `--kallsyms`
    /// file is checked and put in use for the whole run.
    pub fn options(self) -> Result<crate::pipeline::Options> {
        self.symbols.apply()?;
        Ok(crate::pipeline::Options {
            filter: Filter {
                device: match &self.device {
                    Some(DeviceArg::Dev(d)) => Some(*d),
                    _ => None,
                },
                device_name: match self.device {
                    Some(DeviceArg::Name(n)) => Some(n),
                    _ => None,
                },
                top: self.top,
                functions: self.functions,
                ..self.window.filter()
            },
            interval_s: self.interval,
            rows: Default::default(),
            request_timeline: false,
        })
    }
}

/// How much of each input is read.
#[derive(Args, Debug)]
pub struct InputArgs {
    /// The most bytes decompressed from any one input (a gzip or zstd
    /// file, a trace.dat's compressed pages, a perf.data's compressed
    /// records), e.g. 512M or 1T (K, M, G, T: powers of 1024). What was
    /// read of a gzip or zstd file or of a trace.dat up to it is analyzed,
    /// with a warning; a perf.data whose compressed records decompress to
    /// more is refused (exit 2). Data that grows more than 100 times as it
    /// decompresses is warned about (a decompression bomb?).
    #[arg(long, value_name = "SIZE", default_value = "64G", value_parser = crate::ingest::compressed::parse_size)]
    pub max_input: u64,
}

impl InputArgs {
    /// Puts the limit in use for the whole run.
    pub fn apply(&self) {
        crate::ingest::compressed::set_max_input(self.max_input);
    }
}

/// The two sides of `diff` and `check`: `GOOD BAD`, or `GOOD... -- BAD...`.
#[derive(Args, Debug)]
pub struct SidesArgs {
    /// `GOOD BAD`: the baseline's run, then the candidate's; before `--`,
    /// the baseline's runs. A run is a capture of `iosleuth record` or a
    /// trace: blktrace files or a directory of them, blkparse, ftrace,
    /// `trace-cmd report` or `perf script` text, trace-cmd's trace.dat,
    /// perf.data (any but perf.data also as .gz or .zst).
    #[arg(required = true)]
    pub baseline: Vec<PathBuf>,
    /// After `--`: the candidate's runs.
    #[arg(last = true)]
    pub candidate: Vec<PathBuf>,
}

impl SidesArgs {
    pub fn split(self, cmd: &str) -> Result<(Vec<PathBuf>, Vec<PathBuf>)> {
        if !self.candidate.is_empty() {
            return Ok((self.baseline, self.candidate));
        }
        if self.baseline.len() != 2 {
            return Err(Error::bad_input(format!(
                "{cmd} takes GOOD BAD, or GOOD... -- BAD... (got {} paths and no --)",
                self.baseline.len()
            )));
        }
        let mut it = self.baseline.into_iter();
        Ok((it.next().into_iter().collect(), it.collect()))
    }
}

/// Both sides loaded, each of them tried: when both fail, the first
/// failure is said here and the second returned.
pub fn both<T>(a: Result<T>, b: Result<T>) -> Result<(T, T)> {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok((a, b)),
        (Err(x), Err(y)) => {
            if !x.is_quiet() {
                eprintln!("iosleuth: {x}");
            }
            Err(y)
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

/// A device as the user names it.
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceArg {
    Dev(Dev),
    /// `loop0` (given as `loop0` or `/dev/loop0`), found later.
    Name(String),
}

fn parse_dev(s: &str) -> std::result::Result<Dev, String> {
    Dev::parse(&s.replace(':', ","))
        .ok_or_else(|| format!("expected MAJ,MIN such as 8,0; got {s:?}"))
}

/// `7,0` (or `7:0`), `loop0` or `/dev/loop0`.
pub(super) fn parse_device(s: &str) -> std::result::Result<DeviceArg, String> {
    if let Ok(d) = parse_dev(s) {
        return Ok(DeviceArg::Dev(d));
    }
    let name = s.strip_prefix("/dev/").unwrap_or(s);
    let digits_and_commas = name.chars().all(|c| c.is_ascii_digit() || ",:".contains(c));
    if name.is_empty() || name.contains(char::is_whitespace) || digits_and_commas {
        return Err(format!(
            "expected a device such as loop0, /dev/loop0 or 7,0 (MAJ,MIN); got {s:?}"
        ));
    }
    Ok(DeviceArg::Name(name.to_string()))
}

fn secs_to_ns(s: &str) -> std::result::Result<u64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("not a number of seconds: {s:?}"))?;
    if v.is_nan() || v < 0.0 || !v.is_finite() {
        return Err(format!("not a time in seconds: {s:?}"));
    }
    Ok((v * 1e9).round() as u64)
}

/// `--time FROM..TO`: seconds after the trace's first event, or with
/// `abs:` in the trace's clock.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Range {
    pub from_ns: Option<u64>,
    pub to_ns: Option<u64>,
    pub absolute: bool,
}

fn parse_range(s: &str) -> std::result::Result<Range, String> {
    let (absolute, range) = match s.trim().strip_prefix("abs:") {
        Some(r) => (true, r),
        None => (false, s),
    };
    let (a, b) = range.split_once("..").ok_or_else(|| {
        format!("expected FROM..TO in seconds (abs:FROM..TO in the trace's clock), got {s:?}")
    })?;
    let bound = |x: &str| -> std::result::Result<Option<u64>, String> {
        let x = x.trim();
        if x.starts_with("abs:") {
            return Err(format!(
                "abs: goes before the whole range (abs:FROM..TO), got {s:?}"
            ));
        }
        // `+` says relative, which plain numbers are: not with abs:.
        let x = match x.strip_prefix('+') {
            Some(_) if absolute => {
                return Err(format!(
                    "abs: takes the trace clock's seconds, +SECONDS are after the trace's start: not both, got {s:?}"
                ))
            }
            Some(rest) => rest,
            None => x,
        };
        (!x.is_empty()).then(|| secs_to_ns(x)).transpose()
    };
    let (from_ns, to_ns) = (bound(a)?, bound(b)?);
    if let (Some(f), Some(t)) = (from_ns, to_ns) {
        if f > t {
            return Err(format!("FROM is after TO in {s:?}"));
        }
    }
    Ok(Range {
        from_ns,
        to_ns,
        absolute,
    })
}

/// The inputs as a message names them: `a.cap, b.cap`.
pub fn named(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_and_devices() {
        let r = |from_ns, to_ns, absolute| {
            Ok(Range {
                from_ns,
                to_ns,
                absolute,
            })
        };
        assert_eq!(
            parse_range("1.5..2"),
            r(Some(1_500_000_000), Some(2_000_000_000), false)
        );
        assert_eq!(parse_range("+1.5..+2"), parse_range("1.5..2"));
        assert_eq!(parse_range("..3"), r(None, Some(3_000_000_000), false));
        assert_eq!(
            parse_range("abs:14277.5.."),
            r(Some(14_277_500_000_000), None, true)
        );
        for bad in [
            "3",
            "-1..2",
            "2..1",
            "1..abs:2",
            "abs:+1..2",
            "abs:",
            "x..y",
        ] {
            assert!(parse_range(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_dev("7:0").map(|d| d.to_string()), Ok("7,0".into()));
        assert!(parse_dev("sda").is_err());
        let name = |n: &str| Ok(DeviceArg::Name(n.into()));
        assert_eq!(parse_device("sda"), name("sda"));
        assert_eq!(parse_device("/dev/loop0"), name("loop0"));
        assert_eq!(parse_device("/dev/mapper/vg-lv"), name("mapper/vg-lv"));
        assert_eq!(parse_device("7,0"), Ok(DeviceArg::Dev(Dev::new(7, 0))));
        for bad in ["", "/dev/", "7,", "8:0:1", "a b"] {
            assert!(parse_device(bad).is_err(), "{bad}");
        }
    }
}

/// `--accounting` of the light programs (record --light, watch).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccountingArg {
    /// A request's stages from its own timestamps at completion where its
    /// queue keeps them (no per-request state, per-CPU counts only; a slow
    /// request's issuer is not named, its cgroup is).
    Stamps,
    /// Per-request state from issue to completion (depth at issue, the
    /// issuer of every slow request named; costs more per request).
    State,
}

impl From<AccountingArg> for crate::capture::light::Accounting {
    fn from(a: AccountingArg) -> Self {
        match a {
            AccountingArg::Stamps => crate::capture::light::Accounting::Stamps,
            AccountingArg::State => crate::capture::light::Accounting::State,
        }
    }
}

/// A switch given as `on` or `off`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnOff {
    On,
    Off,
}
