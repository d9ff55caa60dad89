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
