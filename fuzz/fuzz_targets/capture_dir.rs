//! A capture directory of `iosleuth record` built from the input, then the
//! whole of `iosleuth report` on it (open, decode, merge, analyze with the
//! snapshot, diagnose, render text and JSON).
//!
//! Input: parts split by `iosleuth::fuzz_input::split` —
//! [manifest, snapshot.json, formats/header_page, one format file (its
//!  first byte picks the system), symbols.json, cpu0.raw, cpu1.raw,
//!  samples-cpu0.perf].
//! An empty manifest or header_page is the committed fixture's
//! (tests/fixtures/fsync-4k.cap), whose format files are always there (the
//! fuzzed one is added beside them), so that decoding gets deep; an empty
//! snapshot, symbols or cpu1.raw is left out.
#![no_main]

use iosleuth_fuzz::FIXTURE_CAPTURE;
use libfuzzer_sys::fuzz_target;
use std::path::Path;

// The capture is built by the library so that tests/offline/fuzz_regressions.rs
// replays a finding through the same files.
fuzz_target!(|data: &[u8]| {
    let dir = iosleuth_fuzz::scratch("capture");
    let cap = iosleuth::fuzz_input::write_capture(data, &dir, Path::new(FIXTURE_CAPTURE))
        .expect("scratch capture");
    iosleuth_fuzz::pipeline(&[cap], true);
});
