//! Any bytes read as blkparse's text (the format given, not detected).
#![no_main]

use iosleuth::ingest::reader::Chunked;
use iosleuth::ingest::text_source::{detect, TextFormat, TextSource};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = detect(data);
    let src = TextSource::new(
        Path::new("fuzz.txt"),
        Chunked::from_vec(data.to_vec()),
        TextFormat::Blkparse,
    );
    let _ = iosleuth_fuzz::drain(Box::new(src));
});
