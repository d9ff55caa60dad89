//! The kernel's function symbols as /proc/kallsyms lists them, for naming
//! kernel addresses the way perf does: a symbol covers the addresses up
//! to the next one (kallsyms gives no sizes); `T`/`t` and weak `W`/`w`
//! symbols count, as perf's `symbol_type__filter` keeps them; of aliases
//! at one address (`memcpy`, `__pi_memcpy`) the last listed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The kallsyms file `--kallsyms` named and its symbols, used in place
/// of this machine's for recordings that carry no symbols of their own
/// (perf.data).
static GIVEN: OnceLock<(PathBuf, KernelSymbols)> = OnceLock::new();

/// A copy of /proc/kallsyms: 200,000 symbols are about 10 MiB.
const MAX_KALLSYMS: u64 = 256 << 20;

/// Names perf.data's kernel frames from `path` (a copy of the recording
/// kernel's /proc/kallsyms), as `perf report --kallsyms` does: read and
/// checked here, once, so that a wrong file is refused before any other
/// reading. Only a regular file is read (a FIFO or a device would block
/// or never end), and at most 256 MiB of it.
pub fn use_file(path: &Path) -> Result<(), String> {
    let text = crate::ingest::files::read_small(path, MAX_KALLSYMS)?;
    let symbols = KernelSymbols::parse(&text);
    if symbols.is_empty() {
        return Err("no function symbols in it (not a copy of /proc/kallsyms?)".into());
    }
    let _ = GIVEN.set((path.to_path_buf(), symbols));
    Ok(())
}

/// The file given with `--kallsyms`, if any.
pub fn given_file() -> Option<&'static Path> {
    GIVEN.get().map(|(p, _)| p.as_path())
}

/// Set to a build id (hex), the kernel iosleuth takes for the running one
/// instead of this machine's, whose /proc/kallsyms it then never reads: a
/// report of a perf.data file then says the same on every machine (the
/// golden tests run with it). Not valid hex: no running kernel is known.
pub const RUNNING_BUILD_ID_ENV: &str = "IOSLEUTH_RUNNING_BUILD_ID";

fn running_override() -> Option<Option<Vec<u8>>> {
    let v = std::env::var(RUNNING_BUILD_ID_ENV).ok()?;
    Some(parse_hex(v.trim()))
}

fn parse_hex(s: &str) -> Option<Vec<u8>> {
    if s.is_empty()
        || !s.len().is_multiple_of(2)
        || s.len() > 64
        || !s.bytes().all(|b| b.is_ascii_hexdigit())
    {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The running kernel's GNU build id, from the ELF notes it exposes in
/// /sys/kernel/notes (where perf reads it too); `None` where unreadable.
pub fn running_build_id() -> Option<Vec<u8>> {
    if let Some(id) = running_override() {
        return id;
    }
    build_id_in_notes(&std::fs::read("/sys/kernel/notes").ok()?)
}

/// The descriptor of the first NT_GNU_BUILD_ID note among ELF notes.
fn build_id_in_notes(mut b: &[u8]) -> Option<Vec<u8>> {
    const NT_GNU_BUILD_ID: u32 = 3;
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let pad = |n: usize| n.div_ceil(4) * 4;
    while b.len() >= 12 {
        let (namesz, descsz, kind) = (word(b, 0)? as usize, word(b, 4)? as usize, word(b, 8)?);
        let desc_at = 12 + pad(namesz);
        let desc = b.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID && b.get(12..16) == Some(b"GNU\0") {
            return Some(desc.to_vec());
        }
        b = b.get(desc_at + pad(descsz)..)?;
    }
    None
}

/// Whether two build ids name one binary: perf pads them to 20 bytes.
pub fn same_build_id(a: &[u8], b: &[u8]) -> bool {
    let trim = |x: &[u8]| -> usize { x.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1) };
    a[..trim(a)] == b[..trim(b)]
}

/// Whether a kallsyms type letter is a function's (text, or weak).
pub fn is_function_type(kind: &str) -> bool {
    matches!(kind, "t" | "T" | "w" | "W")
}

/// Function symbols sorted by address: each its address and where its
/// name lies in `names` (one string for all: a table of 200,000 symbols
/// without as many allocations).
#[derive(Debug, Default, Clone)]
pub struct KernelSymbols {
    table: Vec<(u64, u32, u32)>,
    names: String,
}

impl KernelSymbols {
    pub fn parse(text: &str) -> KernelSymbols {
        let mut names = String::with_capacity(text.len() / 2);
        let mut table: Vec<(u64, u32, u32)> = text
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let addr = u64::from_str_radix(w.next()?, 16).ok()?;
                let kind = w.next()?;
                let name = w.next()?;
                if addr == 0 || !is_function_type(kind) {
                    return None;
                }
                let at = u32::try_from(names.len()).ok()?;
                names.push_str(name);
                Some((addr, at, name.len() as u32))
            })
            .collect();
        // Stable: of several symbols at one address the last listed is
        // the one perf names (its fixup gives that one the length).
        table.sort_by_key(|(a, _, _)| *a);
        KernelSymbols { table, names }
    }

    fn name(&self, at: u32, len: u32) -> &str {
        &self.names[at as usize..(at + len) as usize]
    }

    /// This machine's, or none when /proc/kallsyms cannot be read or
    /// hides its addresses (kptr_restrict shows them all as 0).
    pub fn of_this_machine() -> KernelSymbols {
        KernelSymbols::parse(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default())
    }

    /// The running kernel's, to name a file's frames: this machine's, or
    /// none when another kernel is taken for the running one
    /// (`RUNNING_BUILD_ID_ENV`).
    pub fn of_running_kernel() -> KernelSymbols {
        if running_override().is_some() {
            return KernelSymbols::default();
        }
        Self::of_this_machine()
    }

    /// The `--kallsyms` file's, else this machine's.
    pub fn given_or_this_machine() -> KernelSymbols {
        match GIVEN.get() {
            Some((_, symbols)) => symbols.clone(),
            None => KernelSymbols::of_running_kernel(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    /// The symbol `addr` is in and the offset into it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self
            .table
            .partition_point(|(a, _, _)| *a <= addr)
            .checked_sub(1)?;
        let (start, at, len) = self.table[i];
        Some((self.name(at, len), addr - start))
    }

    /// `name` for a symbol's start, `name+0x10` inside it.
    pub fn resolve(&self, addr: u64) -> Option<String> {
        let (name, off) = self.lookup(addr)?;
        Some(if off == 0 {
            name.to_string()
        } else {
            format!("{name}+{off:#x}")
        })
    }

    /// The address of a symbol (`_text`, for the kernel's relocation).
    pub fn address_of(&self, name: &str) -> Option<u64> {
        self.table
            .iter()
            .find(|(_, at, len)| self.name(*at, *len) == name)
            .map(|(a, _, _)| *a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_id_given_in_hex() {
        assert_eq!(parse_hex("0a1B"), Some(vec![0x0a, 0x1b]));
        for bad in ["", "abc", "zz", "+1", &"00".repeat(33)] {
            assert_eq!(parse_hex(bad), None, "{bad}");
        }
    }

    #[test]
    fn exact_inside_and_before_the_first() {
        let k = KernelSymbols::parse(
            "0000000000000200 T b\n0000000000000100 t a\n0000000000000180 D data\n0000000000000000 T hidden\n",
        );
        assert_eq!(k.resolve(0x100).as_deref(), Some("a"));
        assert_eq!(k.resolve(0x190).as_deref(), Some("a+0x90"));
        assert_eq!(k.resolve(0x210).as_deref(), Some("b+0x10"));
        assert_eq!(k.resolve(0x50), None);
        assert_eq!(k.address_of("b"), Some(0x200));
        let aliases = KernelSymbols::parse("10 T memcpy\n10 T __pi_memcpy\n20 T next\n");
        assert_eq!(aliases.resolve(0x18).as_deref(), Some("__pi_memcpy+0x8"));
    }

    /// /sys/kernel/notes as this machine's kernel wrote it: a build-id
    /// note, then Linux's own notes.
    #[test]
    fn build_id_from_the_kernels_notes() {
        let mut notes = Vec::new();
        for (name, kind, desc) in [
            (&b"Xen\0"[..], 19u32, &b"\0\0\0\x01"[..]),
            (b"GNU\0", 3, &[0x4a, 0x5a, 0x9b, 0x0a, 0xff][..]),
        ] {
            notes.extend((name.len() as u32).to_le_bytes());
            notes.extend((desc.len() as u32).to_le_bytes());
            notes.extend(kind.to_le_bytes());
            notes.extend(name);
            notes.extend(desc);
            notes.resize(notes.len().div_ceil(4) * 4, 0);
        }
        assert_eq!(
            build_id_in_notes(&notes).as_deref(),
            Some(&[0x4a, 0x5a, 0x9b, 0x0a, 0xff][..])
        );
        assert_eq!(build_id_in_notes(&notes[..20]), None);
        assert!(same_build_id(&[1, 2, 0, 0], &[1, 2]));
        assert!(!same_build_id(&[1, 2, 0, 0], &[1, 3]));
    }
}
