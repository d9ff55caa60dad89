//! Streaming input: a window over a file that slides forward, so that
//! memory stays the same whatever the length of the trace.

use std::fs::File;
use std::io::{Cursor, Read};

const CHUNK: usize = 4 << 20;

/// What the read windows of the inputs read together (merged per-CPU
/// files, a capture's CPUs) share: 600 per-CPU files of 4 MiB windows
/// each took 2.4 GiB.
const WINDOWS_BUDGET: usize = 64 << 20;

/// The smallest window a large file gets, whatever the number of inputs.
const MIN_WINDOW: usize = 64 << 10;

/// The window each of `inputs` files read together gets.
pub fn window_share(inputs: usize) -> usize {
    (WINDOWS_BUDGET / inputs.max(1)).clamp(MIN_WINDOW, CHUNK)
}

/// The longest line `next_line` returns: a longer one is skipped, so that
/// a file without newlines cannot make the window grow without end.
pub const MAX_LINE: usize = CHUNK;

/// How much of a line too long to read `next_line` keeps, to show it.
const LONG_HEAD: usize = 120;

/// A file (or an in-memory buffer) read forward through a sliding window.
pub struct Chunked {
    file: Option<Box<dyn Read>>,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
    eof: bool,
    /// File offset of `buf[0]`.
    base: u64,
    error: Option<std::io::Error>,
    /// The start of the last line too long to read.
    long_head: Vec<u8>,
    /// How far ahead to read when more is needed.
    window: usize,
    /// The file's length when opened, when it is a regular file: no
    /// window need be larger than what is left of it.
    size: Option<u64>,
}

impl Chunked {
    pub fn from_file(file: File) -> Chunked {
        Chunked::from_file_windowed(file, CHUNK)
    }

    /// A file read with a window of at most `window` bytes (one input's
    /// [`window_share`]), and no larger than the file.
    pub fn from_file_windowed(file: File, window: usize) -> Chunked {
        let size = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let mut c = Chunked::from_reader(Box::new(file)).windowed(window);
        c.size = size;
        c
    }

    /// Reads ahead by at most `window` bytes.
    pub fn windowed(mut self, window: usize) -> Chunked {
        self.window = window.max(1);
        self
    }

    /// How far ahead this reads.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Any byte stream, e.g. a decompressor over a file.
    pub fn from_reader(file: Box<dyn Read>) -> Chunked {
        Chunked {
            file: Some(file),
            buf: Vec::new(),
            pos: 0,
            len: 0,
            eof: false,
            base: 0,
            error: None,
            long_head: Vec::new(),
            window: CHUNK,
            size: None,
        }
    }

    pub fn from_vec(v: Vec<u8>) -> Chunked {
        let len = v.len();
        Chunked {
            file: None,
            buf: v,
            pos: 0,
            len,
            eof: true,
            base: 0,
            error: None,
            long_head: Vec::new(),
            window: CHUNK,
            size: None,
        }
    }

    /// Makes at least `n` bytes available after the cursor, unless the input
    /// ends first. Returns how many are available.
    pub fn ensure(&mut self, n: usize) -> usize {
        if self.len - self.pos >= n || self.eof {
            return self.len - self.pos;
        }
        // Slide what is left to the front, then read until there is enough.
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.len, 0);
            self.base += self.pos as u64;
            self.len -= self.pos;
            self.pos = 0;
        }
        let mut want = n.max(self.window);
        if let Some(size) = self.size {
            // A window past the end of the file would be zeroes never
            // read: one byte more than is left, to see the end.
            let left = usize::try_from(size.saturating_sub(self.base)).unwrap_or(usize::MAX);
            want = want.min(left.saturating_add(1).max(self.len + 1));
        }
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        while self.len < n && !self.eof {
            let Some(f) = self.file.as_mut() else {
                self.eof = true;
                break;
            };
            if self.len == self.buf.len() {
                // The file grew after it was opened.
                let more = n.max(self.window);
                self.buf.resize(more, 0);
            }
            match f.read(&mut self.buf[self.len..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.len += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(e);
                    self.eof = true;
                }
            }
        }
        self.len - self.pos
    }

    /// The bytes available after the cursor (call `ensure` first).
    pub fn avail(&self) -> &[u8] {
        &self.buf[self.pos..self.len]
    }

    pub fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.len);
    }

    /// File offset of the cursor.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The file offset up to which what is buffered holds no `byte`
    /// (from the cursor on), given the last answer (`known`): one search
    /// over the buffer serves every line in it, where a search per line
    /// cost more in its setup than in its scan.
    pub fn free_of(&self, byte: u8, known: u64) -> u64 {
        if known > self.offset() {
            return known;
        }
        let avail = self.avail();
        let clean = memchr::memchr(byte, avail).unwrap_or(avail.len());
        self.offset() + clean as u64
    }

    /// The next line without its newline, or `None` at the end. A line
    /// longer than `MAX_LINE` is skipped whole: then the flag is set and
    /// the bytes are only its start.
    pub fn next_line(&mut self) -> Option<(&[u8], bool)> {
        let mut want = 256;
        loop {
            let have = self.ensure(want);
            if have == 0 {
                return None;
            }
            if let Some(nl) = memchr::memchr(b'\n', self.avail()) {
                let start = self.pos;
                self.pos += nl + 1;
                return Some((&self.buf[start..start + nl], false));
            }
            if self.eof {
                let start = self.pos;
                self.pos = self.len;
                return Some((&self.buf[start..self.len], false));
            }
            if have >= MAX_LINE {
                let head = &self.buf[self.pos..self.pos + LONG_HEAD.min(have)];
                self.long_head.clear();
                self.long_head.extend_from_slice(head);
                self.skip_past_newline();
                return Some((&self.long_head, true));
            }
            // A line longer than what is buffered: read more.
            want = MAX_LINE;
        }
    }

    /// Skips a run of blank lines (`\n`, `\r\n`) at the cursor, eight
    /// bytes at a time, and returns how many: a gigabyte of them costs a
    /// scan, not a billion lines. Stops before a line that has anything
    /// else, its leading `\r` too.
    pub fn skip_blank_lines(&mut self) -> u64 {
        let mut lines = 0u64;
        loop {
            if self.ensure(2) == 0 {
                return lines;
            }
            let (consumed, n) = blank_run(self.avail());
            self.consume(consumed);
            lines += n;
            // Stopped short of the buffer's end: a line with content, or
            // a lone `\r` that the next read may show to be `\r\n`.
            let left = self.len - self.pos;
            if left > 1 || (left == 1 && self.eof) || consumed == 0 {
                return lines;
            }
        }
    }

    /// Discards everything up to and including the next newline.
    fn skip_past_newline(&mut self) {
        loop {
            if let Some(nl) = memchr::memchr(b'\n', self.avail()) {
                self.consume(nl + 1);
                return;
            }
            self.pos = self.len;
            if self.eof || self.ensure(self.window) == 0 {
                return;
            }
        }
    }

    /// The stream from the cursor on: what is buffered, then the rest of
    /// the file (to put a decompressor in front of it).
    pub fn into_reader(self) -> Box<dyn Read> {
        let mut buf = self.buf;
        buf.truncate(self.len);
        let head = Cursor::new(buf.split_off(self.pos));
        match self.file {
            Some(f) if !self.eof => Box::new(head.chain(f)),
            _ => Box::new(head),
        }
    }

    /// A read error that cut the input short, if any.
    pub fn take_error(&mut self) -> Option<std::io::Error> {
        self.error.take()
    }
}

/// The bytes of the blank lines at the start of `b` (`\n` and `\r\n`)
/// and how many lines they are.
fn blank_run(b: &[u8]) -> (usize, u64) {
    const NL: u64 = u64::from_ne_bytes([b'\n'; 8]);
    const CRLF: u64 = u64::from_ne_bytes(*b"\r\n\r\n\r\n\r\n");
    let word = |i: usize| u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    let (mut i, mut lines) = (0usize, 0u64);
    loop {
        if i + 8 <= b.len() {
            let w = word(i);
            if w == NL {
                i += 8;
                lines += 8;
                continue;
            }
            if w == CRLF {
                i += 8;
                lines += 4;
                continue;
            }
        }
        match (b.get(i), b.get(i + 1)) {
            (Some(b'\n'), _) => {
                i += 1;
                lines += 1;
            }
            (Some(b'\r'), Some(b'\n')) => {
                i += 2;
                lines += 1;
            }
            _ => return (i, lines),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn blank_lines_are_skipped_in_runs_and_counted() {
        assert_eq!(blank_run(b"\n\n\r\nx\n"), (4, 3));
        assert_eq!(blank_run(b"abc"), (0, 0));
        assert_eq!(blank_run(b"\r\r\n"), (0, 0), "a lone CR is content");
        let text = [&[b'\n'; 1000][..], b"\r\n\r\n  ev\n\n"].concat();
        let mut c = Chunked::from_vec(text);
        assert_eq!(c.skip_blank_lines(), 1002);
        assert_eq!(
            c.next_line().map(|(l, _)| l.to_vec()),
            Some(b"  ev".to_vec())
        );
        assert_eq!(c.skip_blank_lines(), 1);
        assert_eq!(c.next_line(), None);
        // Across reads: a window of 7 bytes, the CR and LF of one line in
        // two of them.
        let text = [&[b'\n'; 13][..], b"\r\nx"].concat();
        let mut c = Chunked::from_reader(Box::new(std::io::Cursor::new(text))).windowed(7);
        assert_eq!(c.skip_blank_lines(), 14);
        assert_eq!(c.next_line().map(|(l, _)| l.to_vec()), Some(b"x".to_vec()));
    }

    fn file_of(len: usize) -> File {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![b'x'; len]).unwrap();
        use std::io::Seek;
        f.rewind().unwrap();
        f
    }

    #[test]
    fn a_small_file_gets_a_window_of_its_size() {
        let mut c = Chunked::from_file(file_of(144));
        assert_eq!(c.ensure(256 * 1024), 144);
        assert!(c.buf.len() <= 145, "{}", c.buf.len());
    }

    #[test]
    fn many_large_files_share_the_budget() {
        assert_eq!(window_share(1), CHUNK);
        assert_eq!(window_share(256), 256 << 10);
        assert_eq!(window_share(2000), MIN_WINDOW);
        let mut c = Chunked::from_file_windowed(file_of(1 << 20), window_share(2000));
        let mut read = 0;
        while c.ensure(48) > 0 {
            assert!(c.buf.len() <= MIN_WINDOW);
            read += c.avail().len();
            c.consume(c.avail().len());
        }
        assert_eq!(read, 1 << 20);
    }

    #[test]
    fn a_file_that_grows_is_read_to_its_new_end() {
        let f = file_of(100);
        let mut c = Chunked::from_file(f.try_clone().unwrap());
        // Written in place: the clone shares the file offset.
        std::os::unix::fs::FileExt::write_all_at(&f, &[b'y'; 400], 100).unwrap();
        assert_eq!(c.ensure(500), 500);
        assert_eq!(c.avail()[499], b'y');
    }
}
