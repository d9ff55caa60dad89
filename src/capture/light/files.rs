//! The capture's own files: the slow requests' and the context's, each
//! with its header, and the context events' format files beside them.

use super::{err, CaptureError};
use crate::capture::tracefs::Tracefs;
use crate::model::capture_layout::{EVENT_FORMATS, HEADER_PAGE};
use crate::model::light::{
    CONTEXT_EVENTS, CONTEXT_HEADER, CONTEXT_MAGIC, SLOW_HEADER, SLOW_MAGIC, SLOW_RECORD,
};
use std::io::Write;
use std::path::Path;

/// Copies the context events' format files (and the page header, which
/// the decoder reads with them) into the capture.
pub(super) fn keep_formats(tracefs: &Tracefs, dir: &Path) -> Result<(), CaptureError> {
    let copy = |from: std::path::PathBuf, to: std::path::PathBuf| -> Result<(), CaptureError> {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(&from, &to)
            .map(|_| ())
            .map_err(|e| CaptureError::Unusable(format!("cannot copy {}: {e}", from.display())))
    };
    copy(tracefs.path("events/header_page"), dir.join(HEADER_PAGE))?;
    for (system, event) in CONTEXT_EVENTS {
        let from = tracefs.path(&format!("events/{system}/{event}/format"));
        if from.exists() {
            let to = dir
                .join(EVENT_FORMATS)
                .join(system)
                .join(event)
                .join("format");
            copy(from, to)?;
        }
    }
    Ok(())
}

pub(super) fn slow_header() -> Vec<u8> {
    let mut header = SLOW_MAGIC.to_vec();
    header.extend((SLOW_RECORD as u32).to_le_bytes());
    header.extend(0u32.to_le_bytes());
    debug_assert_eq!(header.len(), SLOW_HEADER);
    header
}

pub(super) fn context_header() -> Vec<u8> {
    let mut header = CONTEXT_MAGIC.to_vec();
    header.extend(0u64.to_le_bytes());
    debug_assert_eq!(header.len(), CONTEXT_HEADER);
    header
}

/// A capture file, created with its header.
pub(super) fn output(
    dir: &Path,
    name: &str,
    header: &[u8],
) -> Result<std::io::BufWriter<std::fs::File>, CaptureError> {
    let path = dir.join(name);
    let mut f = std::fs::File::create(&path)
        .map_err(|e| err("cannot create")(format!("{}: {e}", path.display())))?;
    f.write_all(header)
        .map_err(|e| err("cannot write")(format!("{}: {e}", path.display())))?;
    Ok(std::io::BufWriter::new(f))
}
