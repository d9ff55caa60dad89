//! One error type for the binary. Library code says what went wrong; `main`
//! prints it once and maps it to the exit code DESIGN.md documents:
//! 0 success, 1 failure, 2 unusable input or arguments, 130 interrupted
//! (`check` answers 1 or 125 and `record` passes on the workload's status
//! through [`ExitStatus`], which is not an error; `check`'s own usage
//! errors exit 128, see [`ExitStatus::CHECK_USAGE`]).

use std::fmt;
use std::io;

/// What a command that ran to its end answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitStatus(pub i32);

impl ExitStatus {
    pub const SUCCESS: ExitStatus = ExitStatus(0);
    /// `check`: the candidate regressed.
    pub const REGRESSED: ExitStatus = ExitStatus(1);
    /// `check`: cannot tell (git bisect's "skip").
    pub const CANNOT_TELL: ExitStatus = ExitStatus(125);
    /// `check` called wrongly (bad arguments, a wrong number of paths).
    /// `git bisect run` counts 1–127 except 125 as "bad", 125 as "skip",
    /// and aborts on anything else: 2 would mark every commit bad and
    /// bisect to a wrong answer, 125 would skip them all. 128 is the first
    /// code that aborts, is no signal's (130 is 128 + SIGINT), and is what
    /// git's own fatal errors (`die()`) exit with.
    pub const CHECK_USAGE: ExitStatus = ExitStatus(128);
    /// Stopped by SIGINT, SIGTERM or SIGHUP after cleaning up (128 + SIGINT).
    pub const INTERRUPTED: ExitStatus = ExitStatus(130);
}

#[derive(Debug)]
pub enum Error {
    /// Unusable input or arguments: exit 2.
    BadInput(String),
    /// Anything else that failed: exit 1.
    Failed(String),
    /// Stopped by a signal, everything restored: exit 130.
    Interrupted(String),
    /// Writing the output failed. A reader that went away (`| head`) is a
    /// broken pipe: a quiet success, as for any filter.
    Output(io::Error),
    /// Bad arguments that clap already explained: exit 2, nothing more to say.
    Usage,
    /// `check` called wrongly: exit [`ExitStatus::CHECK_USAGE`] (128), which
    /// aborts `git bisect run` instead of marking the commit bad. The
    /// message, or `None` when clap already explained.
    CheckUsage(Option<String>),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn bad_input(msg: impl Into<String>) -> Error {
        Error::BadInput(msg.into())
    }

    pub fn failed(msg: impl Into<String>) -> Error {
        Error::Failed(msg.into())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::BadInput(_) => 2,
            Error::Failed(_) => 1,
            Error::Interrupted(_) => ExitStatus::INTERRUPTED.0,
            Error::Output(e) if is_broken_pipe(e) => 0,
            Error::Output(_) => 1,
            Error::Usage => 2,
            Error::CheckUsage(_) => ExitStatus::CHECK_USAGE.0,
        }
    }

    /// True when nothing should be said: the reader closed the pipe, or
    /// clap already said what was wrong.
    pub fn is_quiet(&self) -> bool {
        match self {
            Error::Output(e) => is_broken_pipe(e),
            Error::Usage | Error::CheckUsage(None) => true,
            _ => false,
        }
    }
}

/// A broken pipe anywhere in the error's chain (an io::Error may wrap
/// another error that wraps it).
fn is_broken_pipe(e: &io::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>() {
            if io.kind() == io::ErrorKind::BrokenPipe {
                return true;
            }
        }
        cur = err.source();
    }
    false
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadInput(m)
            | Error::Failed(m)
            | Error::Interrupted(m)
            | Error::CheckUsage(Some(m)) => f.write_str(m),
            Error::Output(e) => write!(f, "writing the output: {e}"),
            Error::Usage | Error::CheckUsage(None) => f.write_str("bad arguments"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Output(e) => Some(e),
            _ => None,
        }
    }
}

/// Output written with `?` (stdout): its failures are output errors.
impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Output(e)
    }
}

/// An unusable input file: the message names the file.
impl From<crate::ingest::InputError> for Error {
    fn from(e: crate::ingest::InputError) -> Error {
        Error::BadInput(e.to_string())
    }
}

/// A recording's error keeps its class: what the machine or the options
/// cannot do is exit 2, a failure while recording exit 1.
impl From<crate::capture::tracefs::CaptureError> for Error {
    fn from(e: crate::capture::tracefs::CaptureError) -> Self {
        use crate::capture::tracefs::CaptureError;
        match e {
            CaptureError::Unusable(m) => Error::bad_input(m),
            CaptureError::Failed(m) => Error::failed(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes() {
        assert_eq!(Error::bad_input("x").exit_code(), 2);
        assert_eq!(Error::failed("x").exit_code(), 1);
        assert_eq!(Error::Interrupted("x".into()).exit_code(), 130);
        assert_eq!(Error::Usage.exit_code(), 2);
        // `check`'s usage errors abort a bisect (git: 1-127 but 125 = bad).
        assert_eq!(Error::CheckUsage(None).exit_code(), 128);
        assert!(Error::CheckUsage(None).is_quiet());
        assert!(!Error::CheckUsage(Some("x".into())).is_quiet());
        let pipe = io::Error::from(io::ErrorKind::BrokenPipe);
        assert_eq!(Error::from(pipe).exit_code(), 0);
        assert!(Error::from(io::Error::from(io::ErrorKind::BrokenPipe)).is_quiet());
        assert_eq!(Error::from(io::Error::other("disk full")).exit_code(), 1);
    }

    #[test]
    fn a_recording_that_fails_writing_exits_1_and_one_the_machine_cannot_do_2() {
        use crate::capture::tracefs::CaptureError;
        let full = io::Error::from_raw_os_error(libc::ENOSPC);
        assert_eq!(Error::from(CaptureError::from(full)).exit_code(), 1);
        let root = CaptureError::Unusable("tracing needs root".into());
        assert_eq!(Error::from(root).exit_code(), 2);
    }

    #[test]
    fn broken_pipe_found_inside_another_error() {
        let inner = io::Error::from(io::ErrorKind::BrokenPipe);
        let wrapped = io::Error::other(Error::Output(inner));
        assert!(Error::Output(wrapped).is_quiet());
    }
}
