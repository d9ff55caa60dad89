//! The kernel's self-description: a `format` file, `header_page`, and the
//! decoding they drive (fields of one record, the records of one
//! ring-buffer page).
//!
//! Input: parts split by `iosleuth::fuzz_input::split` —
//! [system, format text, header_page text (empty: the 64-bit default),
//!  one record, one ring-buffer page].
#![no_main]

use libfuzzer_sys::fuzz_target;

// The body lives in the library so that tests/offline/fuzz_regressions.rs replays
// a finding through the same calls.
fuzz_target!(|data: &[u8]| iosleuth::fuzz_input::tracefs_format(data));
