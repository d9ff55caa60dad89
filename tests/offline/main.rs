//! The tests that need no root: parsers, reports, exports and diagnoses on
//! the committed fixtures and crafted inputs, and the anchors (btt, iostat,
//! DuckDB, Spark, Chromium) the outputs are checked against. One test binary,
//! so that the suite links the library once for all of them. Tests that need
//! a program `scripts/test` installs are ignored under plain `cargo test`
//! with the reason; `scripts/test` runs them.

#[path = "../common/mod.rs"]
mod common;

mod alert_rules;
mod bad_input;
mod bad_input_bombs;
mod bad_input_capture;
mod bad_input_counts;
mod bad_input_escape;
mod bad_input_files;
mod bad_input_outputs;
mod bad_input_paths;
mod bad_input_time;
mod bpf_object;
mod cache;
mod check_and_diff;
mod cli_polish;
mod compressed_inputs;
mod conventions;
mod cross_output;
mod diagnose_fixtures;
mod diagnose_generalizes;
mod docs_examples;
mod docs_links;
mod driver_events;
mod ext4_superblock;
mod faults;
mod first_screen;
mod fixtures_block;
mod fixtures_layers;
mod formats_doc;
mod fuzz_parsers;
mod fuzz_regressions;
mod golden;
mod html_first_screen;
mod html_report;
mod io_uring;
mod light_capture;
mod no_silent_wrong_report;
mod parquet_export;
mod perfetto_export;
mod readme_keys;
mod remedies;
mod rules_doc;
mod seed_excerpts;
mod service_files;
mod stacks;
mod trace_dat;
mod watch_tls;
