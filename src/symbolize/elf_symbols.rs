//! Function names of a user-space binary (an executable or shared
//! library a sample's address fell in), chosen as perf chooses them, so
//! that a perf.data file folds to what `perf script` names:
//!
//! - the symbol table: the detached debug file of the binary's build id
//!   (`/usr/lib/debug/.build-id/xx/yyyy.debug`, what `-dbg` packages
//!   install) or the one its `.gnu_debuglink` names, when it has a
//!   `.symtab`; else the binary's own `.symtab`; else its `.dynsym`;
//! - functions only (`STT_FUNC`, `STT_GNU_IFUNC`) in executable sections;
//! - of several symbols at one address, perf's `choose_best_symbol`: one
//!   with a size, not weak, global, fewer leading underscores, the longer
//!   name;
//! - a symbol without a size ends where the next one starts.
//!
//! Addresses come as offsets into the file (a mapping's start and page
//! offset), turned into the binary's virtual addresses through its
//! loadable segments.

use super::elf_reader::ElfReader;
use super::user_frames::demangle;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ObjectSymbolTable, ReadRef};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
struct Sym {
    start: u64,
    end: u64,
    name: String,
    weak: bool,
    global: bool,
}

/// One binary's functions by virtual address, and its loadable segments.
#[derive(Debug, Default)]
pub struct ElfSymbols {
    syms: Vec<Sym>,
    /// (file offset, size in the file, virtual address) of each PT_LOAD.
    segments: Vec<(u64, u64, u64)>,
}

/// Where detached debug files live (Debian, Fedora, Ubuntu).
const DEBUG_ROOT: &str = "/usr/lib/debug";

impl ElfSymbols {
    /// The binary at `path`, or `None` when it cannot be read as ELF.
    /// With the build id the recording saw, the file must have it: perf's
    /// build-id cache (`~/.debug/.build-id/xx/yyyy/elf`, the copy `perf
    /// record` kept; the only copy of the vDSO) first, then `path` unless
    /// it was rebuilt since. A file that is there but refused (not a
    /// regular file, too large) is said in `refused`, with its path.
    pub fn load(
        path: &Path,
        build_id: Option<&[u8]>,
        refused: &mut Vec<String>,
    ) -> Option<ElfSymbols> {
        let hex: Option<String> = build_id
            .filter(|id| id.len() > 1)
            .map(|id| id.iter().map(|b| format!("{b:02x}")).collect());
        let cache = hex.as_ref().and_then(|h| {
            let home = std::env::var_os("HOME")?;
            Some(
                Path::new(&home)
                    .join(".debug/.build-id")
                    .join(&h[..2])
                    .join(&h[2..]),
            )
        });
        // The cache keeps a binary as `elf`, the vDSO as `vdso`.
        let candidates = cache
            .iter()
            .flat_map(|c| [c.join("elf"), c.join("vdso")])
            .chain([path.to_path_buf()]);
        for c in candidates {
            let Some(reader) = open(&c, refused) else {
                continue;
            };
            let parsed = object::File::parse(&reader);
            if let Some(why) = reader.over_budget() {
                refused.push(format!("{}: {why}", c.display()));
            }
            match parsed {
                Ok(file) if same_build_id(build_id, &file) => {
                    let mut debug = debug_files(path, &file);
                    debug.extend(cache.map(|c| c.join("debug")));
                    return Some(ElfSymbols::of(&file, build_id, &debug, refused));
                }
                _ => {}
            }
        }
        None
    }

    /// The functions of `file`, from the first of its `debug` files that
    /// has the same build id and a symbol table, else its own.
    fn of<'d, R: ReadRef<'d>>(
        file: &object::File<'d, R>,
        build_id: Option<&[u8]>,
        debug: &[PathBuf],
        refused: &mut Vec<String>,
    ) -> ElfSymbols {
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let mut syms = Vec::new();
        for d in debug {
            let Some(reader) = open(d, refused) else {
                continue;
            };
            if let Ok(df) = object::File::parse(&reader) {
                if same_build_id(build_id, &df) {
                    syms = functions(&df, false);
                }
            }
            if let Some(why) = reader.over_budget() {
                refused.push(format!("{}: {why}", d.display()));
            }
            if !syms.is_empty() {
                break;
            }
        }
        if syms.is_empty() {
            syms = functions(file, false);
        }
        if syms.is_empty() {
            syms = functions(file, true);
        }
        syms.extend(plt_stubs(file));
        ElfSymbols {
            syms: tidy(syms),
            segments,
        }
    }

    /// Functions at absolute addresses (a JIT's perf map: start, size,
    /// name), looked up with [`ElfSymbols::at_address`].
    pub fn of_functions(functions: Vec<(u64, u64, String)>) -> ElfSymbols {
        let syms = functions
            .into_iter()
            .map(|(start, size, name)| Sym {
                start,
                end: start.saturating_add(size),
                name,
                weak: false,
                global: true,
            })
            .collect();
        ElfSymbols {
            syms: tidy(syms),
            segments: Vec::new(),
        }
    }

    /// The function at `offset` into the file.
    pub fn at_file_offset(&self, offset: u64) -> Option<&str> {
        let vaddr = self
            .segments
            .iter()
            .find(|(off, size, _)| offset >= *off && offset < off + size)
            .map(|(off, _, va)| offset - off + va)?;
        self.at_address(vaddr)
    }

    /// The function at virtual address `vaddr`.
    pub fn at_address(&self, vaddr: u64) -> Option<&str> {
        let i = self
            .syms
            .partition_point(|s| s.start <= vaddr)
            .checked_sub(1)?;
        let s = &self.syms[i];
        (vaddr < s.end).then_some(s.name.as_str())
    }
}

/// The file at `path` opened for its symbols, or `None`: absent, or
/// refused (said in `refused`).
fn open(path: &Path, refused: &mut Vec<String>) -> Option<ElfReader> {
    ElfReader::open(path).unwrap_or_else(|why| {
        refused.push(format!("{}: {why}", path.display()));
        None
    })
}

/// Whether `file` is the binary of build id `want` (any, without one).
fn same_build_id<'d, R: ReadRef<'d>>(want: Option<&[u8]>, file: &object::File<'d, R>) -> bool {
    match (want, file.build_id().ok().flatten()) {
        (Some(want), Some(has)) => want.starts_with(has) || has.starts_with(want),
        _ => true,
    }
}

/// The detached debug files that may hold `file`'s symbol table, in the
/// order perf tries them.
fn debug_files<'d, R: ReadRef<'d>>(path: &Path, file: &object::File<'d, R>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(link) = file.gnu_debuglink().ok().flatten() {
        let name = String::from_utf8_lossy(link.0).into_owned();
        let dir = path.parent().unwrap_or(Path::new("/"));
        out.push(dir.join(&name));
        out.push(dir.join(".debug").join(&name));
        out.push(
            Path::new(DEBUG_ROOT)
                .join(dir.strip_prefix("/").unwrap_or(dir))
                .join(&name),
        );
    }
    if let Some(id) = file.build_id().ok().flatten().filter(|id| id.len() > 1) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        out.push(
            Path::new(DEBUG_ROOT)
                .join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..])),
        );
    }
    out
}

/// The named functions of one table (`.dynsym` when `dynamic`) in
/// executable sections.
fn functions<'d, R: ReadRef<'d>>(file: &object::File<'d, R>, dynamic: bool) -> Vec<Sym> {
    let table: Vec<object::Symbol<'d, '_, R>> = if dynamic {
        file.dynamic_symbols().collect()
    } else {
        file.symbols().collect()
    };
    table
        .into_iter()
        .filter(|s| {
            // Functions, and labels (STT_NOTYPE: `_dl_start_user`), as
            // perf's elf_sym__is_label keeps them.
            matches!(
                s.kind(),
                object::SymbolKind::Text | object::SymbolKind::Label | object::SymbolKind::Unknown
            ) && !s.is_undefined()
                && s.section() != object::SymbolSection::Absolute
        })
        .filter(|s| {
            let exec = s
                .section_index()
                .and_then(|i| file.section_by_index(i).ok())
                .map(|sec| match sec.flags() {
                    object::SectionFlags::Elf { sh_flags } => {
                        sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0
                    }
                    _ => false,
                });
            exec == Some(true)
        })
        .filter_map(|s| {
            let name = s.name().ok().filter(|n| !n.is_empty())?;
            Some(Sym {
                start: s.address(),
                end: s.address() + s.size(),
                name: name.to_string(),
                weak: s.is_weak(),
                global: s.is_global(),
            })
        })
        .collect()
}

/// `name@plt` for each stub of the procedure linkage table, as perf's
/// `dso__synthesize_plt_symbols` names them (x86-64: 16-byte entries in
/// `.plt` after its 16-byte header, or in `.plt.sec` without one), in
/// the order of `.rela.plt`.
fn plt_stubs<'d, R: ReadRef<'d>>(file: &object::File<'d, R>) -> Vec<Sym> {
    const ENTRY: u64 = 16;
    if file.architecture() != object::Architecture::X86_64 {
        return Vec::new();
    }
    let (Some(rela), Some(dynsym)) = (
        file.section_by_name(".rela.plt"),
        file.dynamic_symbol_table(),
    ) else {
        return Vec::new();
    };
    let (mut at, end) = match (
        file.section_by_name(".plt.sec"),
        file.section_by_name(".plt"),
    ) {
        (Some(sec), _) => (sec.address(), sec.address() + sec.size()),
        (None, Some(plt)) => (plt.address() + ENTRY, plt.address() + plt.size()),
        _ => return Vec::new(),
    };
    let Ok(data) = rela.data() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    // Elf64_Rela: r_offset, r_info (symbol << 32 | type), r_addend.
    for r in data.chunks_exact(24) {
        if at + ENTRY > end {
            break;
        }
        let info = u64::from_le_bytes(r[8..16].try_into().unwrap());
        let index = object::SymbolIndex((info >> 32) as usize);
        // A relocation without a symbol (IRELATIVE: an ifunc's stub) is
        // `@plt` to perf.
        let name = dynsym
            .symbol_by_index(index)
            .ok()
            .and_then(|s| s.name().ok().map(str::to_string))
            .unwrap_or_default();
        out.push(Sym {
            start: at,
            end: at + ENTRY,
            name: format!("{name}@plt"),
            weak: false,
            global: true,
        });
        at += ENTRY;
    }
    out
}

/// Sorted, one symbol per address (perf's choice), sizeless ones ending
/// at the next.
fn tidy(mut syms: Vec<Sym>) -> Vec<Sym> {
    syms.sort_by_key(|s| s.start);
    let mut out: Vec<Sym> = Vec::with_capacity(syms.len());
    for s in syms {
        match out.last_mut() {
            Some(last) if last.start == s.start => {
                if better(&s, last) {
                    *last = s;
                }
            }
            _ => out.push(s),
        }
    }
    for i in 0..out.len() {
        if out[i].end == out[i].start {
            out[i].end = out.get(i + 1).map_or(out[i].start + 4096, |n| n.start);
        }
    }
    out
}

/// perf's `choose_best_symbol`: whether `a` beats `b` at one address.
/// perf keeps each symbol's name demangled as it loads it, so the
/// underscores and the length it compares are the demangled name's
/// (identical code folded by BOLT or the linker leaves many C++ and Rust
/// functions at one address: the mangled lengths choose another).
fn better(a: &Sym, b: &Sym) -> bool {
    let sized = |s: &Sym| s.end > s.start;
    if sized(a) != sized(b) {
        return sized(a);
    }
    if a.weak != b.weak {
        return !a.weak;
    }
    if a.global != b.global {
        return a.global;
    }
    let (da, db) = (demangle(&a.name), demangle(&b.name));
    let underscores = |n: &str| n.bytes().take_while(|&c| c == b'_').count();
    if underscores(&da) != underscores(&db) {
        return underscores(&da) < underscores(&db);
    }
    da.len() > db.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(start: u64, size: u64, name: &str, weak: bool, global: bool) -> Sym {
        Sym {
            start,
            end: start + size,
            name: name.into(),
            weak,
            global,
        }
    }

    #[test]
    fn perf_prefers_sized_strong_global_fewer_underscores_longer() {
        let t = tidy(vec![
            sym(0x100, 0x10, "__read", false, true),
            sym(0x100, 0x10, "read", true, true),
            sym(0x100, 0x10, "__libc_read", false, true),
            sym(0x200, 0, "nosize", false, false),
            sym(0x300, 0x10, "last", false, false),
        ]);
        // `read` is weak; of the two strong ones with two underscores,
        // the longer name.
        assert_eq!(t[0].name, "__libc_read");
        let e = ElfSymbols {
            syms: t,
            segments: vec![(0, 0x1000, 0)],
        };
        assert_eq!(e.at_file_offset(0x10f), Some("__libc_read"));
        assert_eq!(e.at_file_offset(0x110), None);
        assert_eq!(e.at_file_offset(0x2ff), Some("nosize"));
        assert_eq!(e.at_file_offset(0x5000), None);
    }

    /// Identical code folded into one address (BOLT's `-icf`): perf
    /// compares the demangled names, `hello::world()` (14 bytes) beats
    /// `foo::bar` (8), though its mangled name is the shorter (17 to 34).
    #[test]
    fn perf_compares_demangled_names() {
        let t = tidy(vec![
            sym(0x100, 0x10, "_ZN3foo3bar17h0123456789abcdefE", false, true),
            sym(0x100, 0x10, "_ZN5hello5worldEv", false, true),
        ]);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].name, "_ZN5hello5worldEv");
    }

    #[test]
    fn this_machines_libc_names_its_functions() {
        // A binary every Debian machine has; its symbols from .dynsym at
        // least.
        let Some(libc) = ElfSymbols::load(
            Path::new("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            None,
            &mut Vec::new(),
        ) else {
            panic!("no libc.so.6 on a Debian machine?");
        };
        assert!(libc.syms.iter().any(|s| s.name.ends_with("read")));
    }
}
