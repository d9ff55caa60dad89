//! The build id of each binary that the sampled processes had mapped,
//! written when recording stops (`build-ids.json`), as `perf record`
//! keeps them: whoever reads the capture later names user frames only
//! from the very binaries that ran. Only the ELF notes are read, not the
//! whole files.

use crate::ingest::capture_dir::mapped_files;
use crate::model::capture_layout::BUILD_IDS;
use crate::symbolize::elf_reader::ElfReader;
use object::Object;
use std::collections::BTreeMap;
use std::path::Path;

/// Writes `build-ids.json` for the capture in `dir`; returns how many
/// binaries had a build id.
pub fn write_for_capture(dir: &Path) -> std::io::Result<usize> {
    let ids: BTreeMap<String, String> = mapped_files(dir)
        .into_iter()
        .filter(|p| p.starts_with('/'))
        .filter_map(|p| {
            let id = build_id(Path::new(&p))?;
            Some((p, id.iter().map(|b| format!("{b:02x}")).collect()))
        })
        .collect();
    std::fs::write(dir.join(BUILD_IDS), serde_json::to_vec_pretty(&ids)?)?;
    Ok(ids.len())
}

/// The GNU build id of the ELF file at `path`, reading only what its
/// headers and notes need; nothing from what is not a regular file (a
/// FIFO planted at a JIT's `/tmp/perf-PID.map` would block).
pub fn build_id(path: &Path) -> Option<Vec<u8>> {
    let reader = ElfReader::open(path).ok()??;
    let elf = object::File::parse(&reader).ok()?;
    elf.build_id().ok().flatten().map(<[u8]>::to_vec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_build_id_that_the_whole_file_holds() {
        let me = std::env::current_exe().unwrap();
        let whole = std::fs::read(&me).unwrap();
        let parsed = object::File::parse(&*whole).unwrap();
        assert_eq!(
            build_id(&me).as_deref(),
            parsed.build_id().unwrap(),
            "{}",
            me.display()
        );
        assert_eq!(build_id(Path::new("/proc/self/status")), None);
        assert_eq!(build_id(Path::new("/dev/zero")), None);
        // A FIFO at a JIT's map path: neither opened for long nor read.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("perf-1.map");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(build_id(&fifo), None);
    }
}
