//! A perf.data whose records are `PERF_RECORD_COMPRESSED` (zstd), as
//! `perf record -z` writes them, behind the valid header, attributes and
//! feature sections of tests/fixtures/perf-urandom.data (with the
//! COMPRESSED feature added): the decompression, the records it yields
//! and their folding; read to the end.
//!
//! Input: parts split by `iosleuth::fuzz_input::split`, one round each
//! (up to 8): a part that starts with a zstd (or skippable) frame's magic
//! is the compressed payload as it is; any other is records, compressed
//! here (ruzstd). See `iosleuth::fuzz_input::perf_compressed::build`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

static FIXTURE: LazyLock<Vec<u8>> =
    LazyLock::new(|| std::fs::read(iosleuth_fuzz::FIXTURE_PERF_DATA).expect("perf.data fixture"));

fuzz_target!(|data: &[u8]| {
    let file = iosleuth::fuzz_input::perf_compressed::build(data, &FIXTURE)
        .expect("the fixture is a perf.data");
    let path = iosleuth_fuzz::scratch("perf_compressed").join("perf.data");
    std::fs::write(&path, file).expect("scratch file");
    if let Ok(src) = iosleuth::testing::open_file(&path) {
        let _ = iosleuth_fuzz::drain(src);
    }
});
