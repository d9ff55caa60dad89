//! Names of user-space frames, as `perf script` writes them and the
//! collapsers then shorten them: the mapping an address falls in gives
//! the binary and the file offset, the binary's symbols (`elf_symbols`)
//! the function, demangled as perf demangles. Shared by perf.data files
//! and iosleuth's own samples; each binary is read once, each (binary,
//! offset) named once.

use super::elf_symbols::ElfSymbols;
use crate::ingest::perf_script_stack::parse_frame;
use rustc_hash::FxHashMap;
use std::path::Path;
use std::sync::Arc;

/// An executable mapping of a process.
#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub path: Arc<str>,
}

/// The functions of one mapped file: a binary's by file offset, a JIT's
/// perf map's by address.
enum Functions {
    Binary(ElfSymbols),
    PerfMap(ElfSymbols),
}

impl Functions {
    fn at(&self, addr: u64, offset: u64) -> Option<&str> {
        match self {
            Functions::Binary(s) => s.at_file_offset(offset),
            Functions::PerfMap(s) => s.at_address(addr),
        }
    }
}

#[derive(Default)]
pub struct UserFrames {
    binaries: FxHashMap<Arc<str>, Option<Functions>>,
    /// By binary (its interned path's address) and file offset.
    names: FxHashMap<(usize, u64), Option<Arc<str>>>,
    /// The build id of each binary the recording saw, by path: a file
    /// that changed since is not used to name frames.
    build_ids: FxHashMap<Vec<u8>, Vec<u8>>,
    paths: FxHashMap<String, Arc<str>>,
    /// Where the image of a mapping with no file of its own (`[vdso]`)
    /// was kept.
    images: FxHashMap<&'static str, std::path::PathBuf>,
    /// Files that were there but not read (not regular, too large, a perf
    /// map of another user), each with its path and why, until taken.
    refused: Vec<String>,
}

impl UserFrames {
    pub fn with_build_ids(build_ids: FxHashMap<Vec<u8>, Vec<u8>>) -> UserFrames {
        UserFrames {
            build_ids,
            ..Default::default()
        }
    }

    /// Every mapped file's path seen so far.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.paths.keys().map(String::as_str)
    }

    /// Names frames in `[vdso]` from the image kept at `path`.
    pub fn with_vdso(mut self, path: std::path::PathBuf) -> UserFrames {
        self.images.insert("[vdso]", path);
        self
    }

    /// What was refused since last asked, each naming the file and why
    /// (the source that reads the input adds its name).
    pub fn take_refused(&mut self) -> Vec<String> {
        std::mem::take(&mut self.refused)
    }

    /// The mapping of `path` in process `pid` as one shared string
    /// (frame names are cached by its address); anonymous executable
    /// memory (JIT code) is named after the map file a JIT writes for
    /// perf, as perf names it.
    pub fn mapped_path(&mut self, pid: i32, path: &[u8]) -> Arc<str> {
        let path = String::from_utf8_lossy(path);
        let anonymous = path == "//anon"
            || path.starts_with("/dev/zero")
            || path.starts_with("/anon_hugepage")
            || path.starts_with("[stack")
            || path.starts_with("/SYSV")
            || path == "[heap]";
        let path = if anonymous {
            format!("/tmp/perf-{pid}.map")
        } else {
            path.into_owned()
        };
        self.paths
            .entry(path)
            .or_insert_with_key(|p| Arc::from(p.as_str()))
            .clone()
    }

    /// The frame at `addr` inside `mapping` (`[unknown]` outside any).
    pub fn name(&mut self, mapping: Option<&Mapping>, addr: u64) -> Option<Arc<str>> {
        let Some(m) = mapping else {
            return parse_frame(&format!("\t{addr:x} [unknown] ([unknown])")).map(Arc::from);
        };
        let offset = addr.wrapping_sub(m.start).wrapping_add(m.pgoff);
        let key = (Arc::as_ptr(&m.path) as *const u8 as usize, offset);
        if let Some(n) = self.names.get(&key) {
            return n.clone();
        }
        let (build_ids, images, refused) = (&self.build_ids, &self.images, &mut self.refused);
        let syms = self
            .binaries
            .entry(m.path.clone())
            .or_insert_with(|| functions(&m.path, build_ids, images, refused));
        let line = match syms.as_ref().and_then(|s| s.at(addr, offset)) {
            Some(name) => format!("\t{addr:x} {}+0x0 ({})", demangle(name), m.path),
            None => format!("\t{addr:x} [unknown] ({})", m.path),
        };
        let n: Option<Arc<str>> = parse_frame(&line).map(Arc::from);
        self.names.insert(key, n.clone());
        n
    }
}

/// The functions of the file mapped at `path`: a JIT's perf map, a
/// binary (the image kept for `[vdso]`), or `None`; a file that is there
/// but refused is said in `refused`.
fn functions(
    path: &str,
    build_ids: &FxHashMap<Vec<u8>, Vec<u8>>,
    images: &FxHashMap<&'static str, std::path::PathBuf>,
    refused: &mut Vec<String>,
) -> Option<Functions> {
    let not_read = |why: String| format!("{why}: not read for symbols");
    if super::perf_map::is_perf_map(path) {
        return match super::perf_map::load(Path::new(path)) {
            Ok(f) => f.map(|f| Functions::PerfMap(ElfSymbols::of_functions(f))),
            Err(why) => {
                refused.push(not_read(format!("{path}: {why}")));
                None
            }
        };
    }
    let id = build_ids.get(path.as_bytes()).map(Vec::as_slice);
    let file = images.get(path).map_or(Path::new(path), |p| p);
    let mut why = Vec::new();
    let syms = ElfSymbols::load(file, id, &mut why);
    refused.extend(why.into_iter().map(not_read));
    syms.map(Functions::Binary)
}

/// A symbol as perf prints it: Rust (legacy and v0) without its hash, C++
/// whole as `__cxa_demangle` writes it (perf's demangler here; the frame
/// parser then drops the parameters, as the collapsers do, which keeps
/// a template function's return type and drops a `const &` qualifier),
/// anything else as it is.
pub(super) fn demangle(name: &str) -> String {
    // A v0 Rust symbol's `.` suffix (`.cold` of a function BOLT or LLVM
    // split, `.llvm.N`) is not part of its name to GNU's demangler.
    let name = match name.split_once('.') {
        Some((v0, _)) if v0.starts_with("_R") => v0,
        _ => name,
    };
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    thunk(name)
        .or_else(|| demangle_cpp(name))
        .unwrap_or_else(|| name.to_string())
}

/// A C++ function's whole name. On the 4424 functions libstdc++ exports,
/// this and the frame parser give what inferno makes of
/// `__cxa_demangle`'s name for all but 107 (cpp_demangle spells the
/// standard abbreviations `std::istream`, `std::iostream` and
/// `std::ostream` out, or not, unlike GNU's); without parameters and
/// return types from cpp_demangle itself, 441 differed.
fn demangle_cpp(name: &str) -> Option<String> {
    if !name.starts_with("_Z") {
        return None;
    }
    let d = cpp_demangle::Symbol::new(name)
        .ok()?
        .demangle_with_options(&cpp_demangle::DemangleOptions::new())
        .ok()?;
    Some(empty_packs_as_libiberty(&integer_literals_as_libiberty(&d)))
}

/// An empty template parameter pack as GNU's demangler writes it, not at
/// all: `AnalysisManager<llvm::Function>`, where cpp_demangle writes
/// `AnalysisManager<llvm::Function, >`.
fn empty_packs_as_libiberty(d: &str) -> String {
    d.replace(", >", ">")
}

/// A thunk as GNU's demangler (perf's) names it, `virtual thunk to
/// std::basic_ostream<…>::~basic_ostream`, where cpp_demangle writes
/// `{virtual override thunk({virtual offset(0, -24)}, …)}`: the call
/// offsets skipped (Itanium ABI `T h|v|c`), the target demangled.
fn thunk(name: &str) -> Option<String> {
    let rest = name.strip_prefix("_ZT")?;
    let (what, offsets, mut rest) = match rest.as_bytes().first()? {
        b'h' => ("non-virtual thunk to ", 1, rest),
        b'v' => ("virtual thunk to ", 1, rest),
        b'c' => ("covariant return thunk to ", 2, &rest[1..]),
        _ => return None,
    };
    for _ in 0..offsets {
        rest = skip_call_offset(rest)?;
    }
    Some(format!("{what}{}", demangle_cpp(&format!("_Z{rest}"))?))
}

/// `h <offset> _` or `v <offset> _ <virtual offset> _`; an offset is a
/// number, `n` before it when negative.
fn skip_call_offset(s: &str) -> Option<&str> {
    let (numbers, mut s) = match s.as_bytes().first()? {
        b'h' => (1, &s[1..]),
        b'v' => (2, &s[1..]),
        _ => return None,
    };
    for _ in 0..numbers {
        let n = s.strip_prefix('n').unwrap_or(s);
        let digits = n.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        s = n[digits..].strip_prefix('_')?;
    }
    Some(s)
}

/// Template arguments that are integers as GNU's demangler (perf's)
/// writes them: `1335398ul`, where cpp_demangle writes `(unsigned
/// long)1335398`.
fn integer_literals_as_libiberty(d: &str) -> String {
    const SUFFIXES: [(&str, &str); 6] = [
        ("(unsigned long long)", "ull"),
        ("(long long)", "ll"),
        ("(unsigned long)", "ul"),
        ("(long)", "l"),
        ("(unsigned int)", "u"),
        ("(int)", ""),
    ];
    let mut out = String::with_capacity(d.len());
    let mut rest = d;
    'scan: while !rest.is_empty() {
        for (cast, suffix) in SUFFIXES {
            if let Some(after) = rest.strip_prefix(cast) {
                let digits = after
                    .bytes()
                    .take_while(|c| c.is_ascii_digit() || *c == b'-')
                    .count();
                if digits > 0 {
                    out.push_str(&after[..digits]);
                    out.push_str(suffix);
                    rest = &after[digits..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap_or(' ');
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_perf_demangles_them() {
        assert_eq!(
            frame("_ZN8iosleuth6ingest5merge6Merger5prime17hbf946f9c219207e9E.llvm.6084931058377092873"),
            "iosleuth::ingest::merge::Merger::prime"
        );
        assert_eq!(demangle("_ZN3foo3barEi"), "foo::bar(int)");
        assert_eq!(frame("_ZN3foo3barEi"), "foo::bar");
        assert_eq!(
            integer_literals_as_libiberty("A<B<(unsigned long)1335398, C>, (int)3, (long)-2>::f"),
            "A<B<1335398ul, C>, 3, -2l>::f"
        );
        assert_eq!(demangle("read"), "read");
        // A v0 Rust symbol's suffix is not its name's.
        assert_eq!(demangle("_RNvCs1234_7mycrate3foo.cold"), "mycrate::foo");
        // An empty parameter pack: GNU writes nothing for it.
        assert_eq!(demangle("_ZN1AIiJEE1fEv"), "A<int>::f()");
        // As `__cxa_demangle` and the frame parser give them (libstdc++'s
        // exports): a ref-qualified method, a template's return type.
        assert_eq!(
            frame("_ZNKRSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEE3strEv"),
            "std::__cxx11::basic_stringbuf<char, std::char_traits<char>, std::allocator<char> >::str"
        );
        assert_eq!(
            frame("_ZSt9use_facetISt5ctypeIcEERKT_RKSt6locale"),
            "std::ctype<char> const& std::use_facet<std::ctype<char> >"
        );
    }

    /// A symbol's frame as the perf.data reader makes it.
    fn frame(symbol: &str) -> String {
        parse_frame(&format!("\t1 {}+0x0 (/x)", demangle(symbol))).expect("a frame")
    }

    /// The name perf gave a thunk in a system-wide `perf record -g` here
    /// (a live test's run, libstdc++'s wide ostream), and c++filt's for
    /// the other two kinds (without parameters).
    #[test]
    fn thunks_as_perf_names_them() {
        assert_eq!(
            frame("_ZTv0_n24_NSt13basic_ostreamIwSt11char_traitsIwEED1Ev"),
            "virtual thunk to std::basic_ostream<wchar_t, std::char_traits<wchar_t> >::~basic_ostream"
        );
        assert_eq!(frame("_ZThn16_N1C1fEv"), "non-virtual thunk to C::f");
        assert_eq!(
            frame("_ZTch0_h16_N1D1fEv"),
            "covariant return thunk to D::f"
        );
        // Not thunks: a malformed call offset, a vtable.
        assert_eq!(thunk("_ZTv0_N1B1gEi"), None);
        assert_eq!(thunk("_ZTV1A"), None);
    }
}
