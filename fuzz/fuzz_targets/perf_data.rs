//! Any bytes as a perf.data file (the reader seeks, so the bytes are
//! written to a scratch file first), read to the end and folded.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = iosleuth_fuzz::scratch("perf_data").join("perf.data");
    std::fs::write(&path, data).expect("scratch file");
    if let Ok(src) = iosleuth::testing::open_file(&path) {
        let _ = iosleuth_fuzz::drain(src);
    }
});
