//! The whole of `iosleuth report` on one file of any bytes: detection,
//! streaming read, merge, every analysis, the rule catalog, text and JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = iosleuth_fuzz::scratch("pipeline");
    let p = iosleuth_fuzz::write(&dir, "input.trace", data);
    iosleuth_fuzz::pipeline(&[p]);
});
