//! Any bytes as a trace-cmd trace.dat (the reader seeks, so the bytes are
//! written to a scratch file first, and read by path as `iosleuth report`
//! reads one): detection, every metadata section, zlib and zstd
//! decompression, the ring-buffer pages; read to the end.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = iosleuth_fuzz::scratch("trace_dat").join("trace.dat");
    std::fs::write(&path, data).expect("scratch file");
    if let Ok(src) = iosleuth::testing::open_file(&path) {
        let _ = iosleuth_fuzz::drain(src);
    }
});
