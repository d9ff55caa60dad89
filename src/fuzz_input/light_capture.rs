//! The `light_capture` target's capture directory: the files of a
//! `record --light` capture from the parts of one input.

use super::split;
use crate::model::capture_layout::{EVENT_FORMATS, HEADER_PAGE, MANIFEST, SNAPSHOT};
use crate::model::light::{CONTEXT, LIGHT, SLOW};
use std::io;
use std::path::{Path, PathBuf};

/// Builds `dir/light.cap` from parts [manifest, light.json, slow.bin,
/// context.bin, snapshot.json] beside the format files of the light
/// capture `fixture` (linked: the flight recorder's events decode by
/// them). An empty manifest is the fixture's (a light one); any other
/// empty part is left out, as a capture missing that file.
pub fn write(data: &[u8], dir: &Path, fixture: &Path) -> io::Result<PathBuf> {
    let p = split(data, 5);
    let fixture = fixture.canonicalize()?;
    let cap = dir.join("light.cap");
    std::fs::create_dir_all(cap.join(EVENT_FORMATS).parent().expect("formats/"))?;
    let manifest = match p[0].is_empty() {
        true => std::fs::read(fixture.join(MANIFEST))?,
        false => p[0].to_vec(),
    };
    std::fs::write(cap.join(MANIFEST), manifest)?;
    for (name, part) in [
        (LIGHT, p[1]),
        (SLOW, p[2]),
        (CONTEXT, p[3]),
        (SNAPSHOT, p[4]),
    ] {
        if !part.is_empty() {
            std::fs::write(cap.join(name), part)?;
        }
    }
    for name in [HEADER_PAGE, EVENT_FORMATS] {
        std::os::unix::fs::symlink(fixture.join(name), cap.join(name))?;
    }
    Ok(cap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Format;

    /// The text report of `cap`, its path taken out.
    fn report(cap: &Path) -> String {
        let a = crate::pipeline::analyze(&[cap.to_path_buf()], &Default::default()).unwrap();
        let findings = crate::diagnose::diagnose(&a);
        Format::Text
            .report(&a, &findings, false)
            .replace(&cap.display().to_string(), "CAP")
    }

    /// The fixture's own files as parts (what `scripts/fuzz` seeds) make a
    /// capture that reports as the fixture does: the fuzzer starts deep.
    #[test]
    fn the_fixtures_files_report_as_the_fixture() {
        let fx = Path::new("tests/fixtures/light-rt.cap");
        let read = |name: &str| std::fs::read(fx.join(name)).unwrap();
        let parts = [
            read(MANIFEST),
            read(LIGHT),
            read(SLOW),
            read(CONTEXT),
            read(SNAPSHOT),
        ];
        let d = tempfile::tempdir().unwrap();
        let cap = write(&parts.join(super::super::SEPARATOR), d.path(), fx).unwrap();
        let (built, fixture) = (report(&cap), report(fx));
        assert!(fixture.contains("jbd2"), "{fixture}");
        assert_eq!(built, fixture);
    }
}
