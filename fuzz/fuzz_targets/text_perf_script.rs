//! Any bytes read as perf script text (the format given, not detected).
#![no_main]

use iosleuth::testing::TextFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| iosleuth_fuzz::text_target(data, TextFormat::PerfScript));
