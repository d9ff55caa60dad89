//! Any bytes through format detection (blktrace binary, the blk tracer's
//! binary container, and, when detection says so, text), read to the end.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    if let Ok(src) = iosleuth::testing::open_bytes(Path::new("fuzz.blktrace.0"), data.to_vec()) {
        let _ = iosleuth_fuzz::drain(src);
    }
});
