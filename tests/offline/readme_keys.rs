//! docs/FORMATS.md's table of JSON keys says what `report --format json`
//! prints: every top-level key of a report of a real capture is in the
//! table, and every key of the table is printed.

use crate::common;

use common::*;
use std::collections::BTreeSet;

#[test]
fn the_documented_key_table_is_what_json_prints() {
    let formats = std::fs::read_to_string("docs/FORMATS.md").unwrap();
    let table = formats
        .split("\n## JSON keys")
        .nth(1)
        .and_then(|t| t.split("\n\n").nth(2))
        .expect("the key table after its heading");
    let documented: BTreeSet<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next())
        .map(|k| k.split('.').next().unwrap().to_string())
        .collect();
    let rep = json_report(&["tests/fixtures/fsync-4k.cap"], &[]);
    let printed: BTreeSet<String> = rep.as_object().unwrap().keys().cloned().collect();
    assert_eq!(documented, printed);
    assert_eq!(rep["schema_version"], iosleuth::testing::SCHEMA_VERSION);
}

/// The README's install line says how large the binary is: within 1 MB of
/// this build's (the release binary `cargo install` makes).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "the README states the release binary's size: scripts/test runs it with --release"
)]
fn the_readme_states_the_binarys_size() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let line = readme
        .lines()
        .find(|l| l.starts_with("cargo install --path ."))
        .expect("the install line");
    let mb: f64 = line
        .split(" MB binary")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no size in {line:?}"));
    let bytes = std::fs::metadata(env!("CARGO_BIN_EXE_iosleuth"))
        .unwrap()
        .len() as f64;
    assert!(
        (bytes / 1e6 - mb).abs() <= 1.0,
        "README says {mb} MB; the release binary is {:.1} MB",
        bytes / 1e6
    );
}
