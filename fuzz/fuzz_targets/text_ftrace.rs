//! Any bytes read as ftrace text, trace-cmd report and the blk tracer's text (the format given, not detected).
#![no_main]

use iosleuth::testing::TextFormat;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| iosleuth_fuzz::text_target(data, TextFormat::Ftrace));
