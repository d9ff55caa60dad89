//! Issue 13, "no silent wrong report": arguments and inputs that are not
//! what the user thinks get an exit code and a message that say so.

mod common;

use common::*;
use std::path::Path;

struct Outcome {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Outcome {
    let o = iosleuth().args(args).output().unwrap();
    Outcome {
        code: o.status.code().expect("exited, not killed by a signal"),
        stdout: String::from_utf8_lossy(&o.stdout).into(),
        stderr: String::from_utf8_lossy(&o.stderr).into(),
    }
}

const QD1: &str = "tests/fixtures/queue-depth1.cap";
const QSAT: &str = "tests/fixtures/queue-saturated.cap";

#[test]
fn check_refuses_thresholds_that_are_not_percentages() {
    // D2C p99 0.117 -> 0.366 ms: +212 %, which NaN called "no worse".
    for bad in ["NaN", "inf", "-inf", "-5"] {
        let arg = format!("--threshold={bad}");
        let o = run(&["check", &arg, QD1, QSAT]);
        assert_eq!(o.code, 128, "{bad}: {}{}", o.stdout, o.stderr);
        assert!(o.stdout.is_empty(), "{bad}: no verdict: {}", o.stdout);
        assert!(
            o.stderr.contains("--threshold")
                && o.stderr.contains("expected a percentage of 0 or more"),
            "{bad}: {}",
            o.stderr
        );
    }
    let o = run(&["check", "--threshold", "10", QD1, QSAT]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    let o = run(&["check", "--threshold", "0", QD1, QD1]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

/// git bisect run: 1-127 but 125 mark the commit bad, 125 skips it, 128
/// and above abort. A broken `check` command line must abort.
#[test]
fn check_usage_errors_abort_a_bisect() {
    let o = run(&["check", QD1]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    assert!(
        o.stderr
            .contains("check takes GOOD BAD, or GOOD... -- BAD... (got 1 paths and no --)"),
        "{}",
        o.stderr
    );
    let o = run(&["check", QD1, QSAT, QSAT]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    let o = run(&["check", "--bogus", QD1, QSAT]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    assert!(
        o.stderr.contains("unexpected argument '--bogus'"),
        "{}",
        o.stderr
    );
    let o = run(&["check"]);
    assert_eq!(o.code, 128, "{}", o.stderr);
    // Unreadable input is still "cannot tell" (skip this commit).
    let o = run(&["check", QD1, "tests/fixtures/no-such.cap"]);
    assert_eq!(o.code, 125, "{}", o.stderr);
    // Other commands' usage errors keep exit 2; help is a success.
    assert_eq!(run(&["diff", "--bogus", QD1, QSAT]).code, 2);
    assert_eq!(run(&["report", "--bogus", QD1]).code, 2);
    assert_eq!(run(&["check", "--help"]).code, 0);
    let help = run(&["check", "--help"]).stdout;
    assert!(help.contains("128"), "{help}");
    assert!(Path::new(QD1).exists());
}
