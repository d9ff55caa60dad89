//! Trace text printed for a person. Any process sets its own `comm`, and a
//! trace carries event names, field values and marks that others wrote: a
//! control character among them (ESC, a newline) would act on the reader's
//! terminal or forge a line of the report. Text output prints such strings
//! through [`Esc`] (or [`escape`]): control characters become `\x1b`, `\n`,
//! `\t`, `\r`. JSON escapes them itself and keeps the strings as they are.
//!
//! Nothing to escape costs one pass over the bytes and no allocation.

use std::borrow::Cow;
use std::fmt;

/// Whether `s` may hold a control character: a C0 byte, DEL, or the lead
/// byte of U+0080..U+00BF (which holds the C1 controls).
#[inline]
fn suspect(s: &str) -> bool {
    s.bytes().any(|b| b < 0x20 || b == 0x7f || b == 0xc2)
}

/// `s` with its control characters (C0, DEL, C1) escaped.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !suspect(s) || !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Prints trace text escaped, honouring width and alignment (`{:<16}`).
pub struct Esc<'a>(pub &'a str);

impl fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&escape(self.0))
    }
}

/// Several strings escaped and joined, as `[..].join(sep)` would.
pub fn join_escaped<S: AsRef<str>>(items: &[S], sep: &str) -> String {
    let mut out = String::new();
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(&escape(s.as_ref()));
    }
    out
}

/// A message of several lines (an error that lists warnings): each line
/// escaped, the line breaks kept.
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    if !suspect(s) {
        return Cow::Borrowed(s);
    }
    let lines: Vec<Cow<str>> = s.split('\n').map(escape).collect();
    Cow::Owned(lines.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("fio"), "fio");
        assert!(matches!(escape("kworker/0:1H µs °"), Cow::Borrowed(_)));
        assert_eq!(escape("a\x1b[2Jb"), "a\\x1b[2Jb");
        assert_eq!(escape("x\ny\tz\r\x7f"), "x\\ny\\tz\\r\\x7f");
        assert_eq!(escape("c1\u{9b}31m"), "c1\\x9b31m");
        assert_eq!(format!("[{:<8}]", Esc("a\x07")), "[a\\x07   ]");
        assert_eq!(format!("[{:>4}]", Esc("ab")), "[  ab]");
        assert_eq!(join_escaped(&["a\n", "b"], ", "), "a\\n, b");
        assert_eq!(
            escape_lines("x: a\x1b\nwarning: b"),
            "x: a\\x1b\nwarning: b"
        );
    }
}
