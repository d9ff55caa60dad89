//! An ELF file that an input names (a binary a recording mapped, its
//! debug file), read in the pieces its parser asks for (headers, symbol
//! tables, their strings, a few sections), never whole, and no more
//! than a budget in all: a damaged or hostile file whose headers claim
//! gigabytes of symbols costs at most that.

use crate::ingest::files::{open_named, Limit, Links};
use object::ReadRef;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// The largest ELF file read for symbols: a debug file of a very large
/// program is a few hundred MiB.
pub const MAX_FILE: Limit = Limit {
    bytes: 1 << 30,
    what: "iosleuth reads symbols from",
};

/// What one file may make iosleuth read and hold: its symbol tables and
/// their strings.
pub const READ_BUDGET: u64 = 256 << 20;

/// Strings (symbol names) are read in blocks of this size, plus the
/// longest string read (object's limit): a table of 100,000 names is a
/// few hundred reads, not 100,000.
const STRING_BLOCK: u64 = 64 << 10;
const MAX_STRING: u64 = 4096;

/// An open ELF file (or what claims to be one) and the pieces read from
/// it, which live as long as it does.
pub struct ElfReader {
    file: File,
    len: u64,
    left: Cell<u64>,
    over_budget: Cell<bool>,
    pieces: RefCell<Vec<Box<[u8]>>>,
    /// Blocks of string tables by their start, as indexes into `pieces`.
    blocks: RefCell<HashMap<u64, usize>>,
}

impl ElfReader {
    /// The file at `path`: `Ok(None)` when there is none, `Err(why)` when
    /// it is there but refused (not a regular file, too large, on /proc).
    pub fn open(path: &Path) -> Result<Option<ElfReader>, String> {
        Ok(
            open_named(path, MAX_FILE, Links::Follow)?.map(|(file, m)| ElfReader {
                file,
                len: m.len(),
                left: Cell::new(READ_BUDGET),
                over_budget: Cell::new(false),
                pieces: RefCell::new(Vec::new()),
                blocks: RefCell::new(HashMap::new()),
            }),
        )
    }

    /// Why parsing stopped short, when it was the budget.
    pub fn over_budget(&self) -> Option<String> {
        self.over_budget.get().then(|| {
            format!(
                "its symbol tables need more than the {} iosleuth reads from one file",
                crate::ingest::files::size_text(READ_BUDGET)
            )
        })
    }

    /// `size` bytes at `offset`, charged to the budget.
    fn read(&self, offset: u64, size: u64) -> Result<&[u8], ()> {
        let end = offset.checked_add(size).ok_or(())?;
        if end > self.len {
            return Err(());
        }
        if size > self.left.get() {
            self.over_budget.set(true);
            return Err(());
        }
        self.left.set(self.left.get() - size);
        let mut buf = vec![0; usize::try_from(size).map_err(|_| ())?];
        self.file.read_exact_at(&mut buf, offset).map_err(|_| ())?;
        Ok(self.keep(buf.into_boxed_slice()).1)
    }

    /// Keeps `piece` for the reader's lifetime; its index and contents.
    fn keep(&self, piece: Box<[u8]>) -> (usize, &[u8]) {
        let at: *const [u8] = &*piece;
        let mut pieces = self.pieces.borrow_mut();
        pieces.push(piece);
        // SAFETY: a boxed slice's contents do not move when the box does,
        // and `pieces` only grows: they live until `self` is dropped.
        (pieces.len() - 1, unsafe { &*at })
    }

    /// The string-table block that starts at `start` (read once).
    fn block(&self, start: u64) -> Result<&[u8], ()> {
        if let Some(&i) = self.blocks.borrow().get(&start) {
            let piece: *const [u8] = &*self.pieces.borrow()[i];
            // SAFETY: as in `keep`.
            return Ok(unsafe { &*piece });
        }
        let size = (STRING_BLOCK + MAX_STRING).min(self.len.saturating_sub(start));
        self.read(start, size)?;
        let i = self.pieces.borrow().len() - 1;
        self.blocks.borrow_mut().insert(start, i);
        self.block(start)
    }
}

impl<'a> ReadRef<'a> for &'a ElfReader {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        self.read(offset, size)
    }

    fn read_bytes_at_until(
        self,
        range: std::ops::Range<u64>,
        delimiter: u8,
    ) -> Result<&'a [u8], ()> {
        if range.start >= range.end || range.end > self.len {
            return Err(());
        }
        let start = range.start - range.start % STRING_BLOCK;
        let block = self.block(start)?;
        let from = (range.start - start) as usize;
        let until = (range.end - start).min(block.len() as u64) as usize;
        let s = block.get(from..until).ok_or(())?;
        let s = &s[..s.len().min(MAX_STRING as usize)];
        let n = s.iter().position(|&b| b == delimiter).ok_or(())?;
        Ok(&s[..n])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::Object;

    #[test]
    fn reads_what_the_whole_file_holds() {
        let me = std::env::current_exe().unwrap();
        let whole = std::fs::read(&me).unwrap();
        let parsed = object::File::parse(&*whole).unwrap();
        let r = ElfReader::open(&me).unwrap().unwrap();
        let pieces = object::File::parse(&r).unwrap();
        assert_eq!(pieces.build_id().unwrap(), parsed.build_id().unwrap());
        fn names<'d, R: ReadRef<'d>>(f: &object::File<'d, R>) -> Vec<String> {
            use object::ObjectSymbol;
            f.symbols()
                .filter_map(|s| s.name().ok().map(str::to_string))
                .collect()
        }
        let (a, b) = (names(&pieces), names(&parsed));
        assert!(a.len() > 1000, "{}", a.len());
        assert_eq!(a, b);
        // Far less than the file was read.
        assert!(READ_BUDGET - r.left.get() < whole.len() as u64);
    }

    #[test]
    fn a_string_that_crosses_a_block_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let mut b = vec![b'x'; STRING_BLOCK as usize + 100];
        b[STRING_BLOCK as usize + 50] = 0;
        std::fs::write(&p, &b).unwrap();
        let r = ElfReader::open(&p).unwrap().unwrap();
        let s = (&r)
            .read_bytes_at_until(STRING_BLOCK - 10..b.len() as u64, 0)
            .unwrap();
        assert_eq!(s.len(), 60);
        assert!((&r).read_bytes_at_until(0..b.len() as u64, 0).is_err());
    }

    #[test]
    fn the_budget_bounds_what_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        std::fs::File::create(&p)
            .unwrap()
            .set_len(READ_BUDGET + 10)
            .unwrap();
        let r = ElfReader::open(&p).unwrap().unwrap();
        assert!((&r).read_bytes_at(0, READ_BUDGET + 1).is_err());
        assert!(r.over_budget().is_some());
    }
}
