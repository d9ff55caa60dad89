//! A trace-cmd trace.dat v7 whose options are the input, spliced into one
//! of the committed v7 files (tests/fixtures/tracedat-*.v7*.dat: plain,
//! zlib, zstd): the sections the options point at, the instances' buffers,
//! each CPU's offset and size in the data (compressed chunks in the
//! compressed files), the clock; read by path as `iosleuth report` reads
//! one, to the end.
//!
//! Input: a control byte (its low 7 bits pick the fixture, its high bit
//! has the options section compressed as the file's other sections are),
//! then the options (id u16, size u32, data; a DONE option ends them).
//! See `iosleuth::fuzz_input::trace_dat_options::build`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::LazyLock;

static FIXTURES: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let files =
        iosleuth::fuzz_input::trace_dat_options::fixtures(Path::new(iosleuth_fuzz::FIXTURES));
    assert!(!files.is_empty(), "no trace.dat v7 fixture");
    files
        .iter()
        .map(|f| std::fs::read(f).expect("trace.dat fixture"))
        .collect()
});

fuzz_target!(|data: &[u8]| {
    let file = iosleuth::fuzz_input::trace_dat_options::build(data, &FIXTURES)
        .expect("the fixtures are trace.dat v7 files");
    let path = iosleuth_fuzz::scratch("trace_dat_options").join("trace.dat");
    std::fs::write(&path, file).expect("scratch file");
    if let Ok(src) = iosleuth::testing::open_file(&path) {
        let _ = iosleuth_fuzz::drain(src);
    }
});
