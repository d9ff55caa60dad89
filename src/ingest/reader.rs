//! Streaming input: a window over a file that slides forward, so that
//! memory stays the same whatever the length of the trace.

use std::fs::File;
use std::io::{Cursor, Read};

const CHUNK: usize = 4 << 20;

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
}

impl Chunked {
    pub fn from_file(file: File) -> Chunked {
        Chunked::from_reader(Box::new(file))
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
        let want = n.max(CHUNK);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        while self.len < n && !self.eof {
            let Some(f) = self.file.as_mut() else {
                self.eof = true;
                break;
            };
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

    /// Discards everything up to and including the next newline.
    fn skip_past_newline(&mut self) {
        loop {
            if let Some(nl) = memchr::memchr(b'\n', self.avail()) {
                self.consume(nl + 1);
                return;
            }
            self.pos = self.len;
            if self.eof || self.ensure(CHUNK) == 0 {
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
