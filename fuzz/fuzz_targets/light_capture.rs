//! The files of a `record --light` capture built from the input, then the
//! whole of `iosleuth report` on it (the slow requests and the flight
//! recorder as events, the kernel's histograms and counters, the snapshot;
//! diagnose, render text and JSON).
//!
//! Input: parts split by `iosleuth::fuzz_input::split` —
//! [manifest, light.json, slow.bin, context.bin, snapshot.json].
//! An empty manifest is the committed light capture's
//! (tests/fixtures/light-rt.cap), whose format files are always there;
//! any other empty part is left out, as a capture missing that file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

// The capture is built by the library so that tests/offline/fuzz_regressions.rs
// replays a finding through the same files.
fuzz_target!(|data: &[u8]| {
    let dir = iosleuth_fuzz::scratch("light");
    let cap = iosleuth::fuzz_input::light_capture::write(
        data,
        &dir,
        Path::new(iosleuth_fuzz::FIXTURE_LIGHT),
    )
    .expect("scratch capture");
    iosleuth_fuzz::pipeline(&[cap], true);
});
