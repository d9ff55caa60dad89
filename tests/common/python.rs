//! The Python that has DuckDB and pyspark (scripts/test makes it: a venv in
//! target/py-tests), for tests that read exported tables with the engines
//! people use. Such tests are `#[ignore]`d under plain `cargo test`; run,
//! a missing engine fails them with its name.

use std::path::PathBuf;
use std::process::Command;

/// `IOSLEUTH_TEST_PYTHON`, else target/py-tests/bin/python, if it imports
/// every module in `modules`; fails the test, naming what is missing, if not.
pub fn python_with(modules: &[&str]) -> PathBuf {
    let p = std::env::var_os("IOSLEUTH_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/py-tests/bin/python")
        });
    let imports = modules
        .iter()
        .map(|m| format!("import {m}"))
        .collect::<Vec<_>>()
        .join("; ");
    let ok = Command::new(&p)
        .args(["-c", &imports])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if ok {
        return p;
    }
    let what = format!(
        "a Python with {} at {} (scripts/test installs it)",
        modules.join(", "),
        p.display()
    );
    panic!("test cannot run: missing {what}");
}

/// Runs `script` with `python`, `args` as sys.argv[1:]; its standard
/// output parsed as JSON.
pub fn run_json(python: &PathBuf, script: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "python failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "python's output is not JSON ({e}):\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
