//! The kernel's self-description: a `format` file, `header_page`, and the
//! decoding they drive (fields of one record, the records of one
//! ring-buffer page).
//!
//! Input: parts split by `iosleuth_fuzz::split` —
//! [system, format text, header_page text (empty: the 64-bit default),
//!  one record, one ring-buffer page].
#![no_main]

use iosleuth::ingest::capture_dir::Decoder;
use iosleuth::ingest::ring_buffer::{page_info, PageRecords};
use iosleuth::ingest::tracefs_format::{
    parse_format, parse_header_page, read_int, read_str, PageHeader,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parts = iosleuth_fuzz::split(data, 5);
    let system = String::from_utf8_lossy(parts[0]);
    let format = String::from_utf8_lossy(parts[1]);
    let header = String::from_utf8_lossy(parts[2]);
    let (record, page) = (parts[3], parts[4]);

    let hdr = if header.is_empty() {
        PageHeader::default()
    } else {
        match parse_header_page(&header) {
            Some(h) => h,
            None => return,
        }
    };
    let formats: Vec<_> = parse_format(&system, &format).into_iter().collect();
    for f in &formats {
        for field in &f.fields {
            let _ = read_int(record, field);
            let _ = read_str(record, field);
        }
    }
    let decoder = Decoder::new(&formats, hdr);
    let _ = decoder.decode(1, 0, record);
    if let Some(info) = page_info(page, hdr) {
        let mut recs = PageRecords::new(page, hdr, &info);
        for (ts, rec) in recs.by_ref() {
            let _ = decoder.decode(ts, 0, rec);
        }
        let _ = recs.damaged;
    }
});
