//! The whole of `iosleuth report` on one file of any bytes: detection,
//! streaming read, merge, every analysis, the rule catalog, text and JSON.
//! JSON is rendered for one input in eight (by length): serializing an
//! analysis of a fuzzed span (up to 10,000 iostat rows a device) took three
//! quarters of the time, and it is serde's derived code, not iosleuth's.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = iosleuth_fuzz::scratch("pipeline");
    let p = iosleuth_fuzz::write(&dir, "input.trace", data);
    iosleuth_fuzz::pipeline(&[p], data.len().is_multiple_of(8));
});
