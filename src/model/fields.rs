//! The payload of a non-block event, decoded by field name: from a
//! tracefs `format` (captures) or from the `key=value` text that ftrace,
//! trace-cmd and perf print. Analyses read fields by name (`Field`, from one table) because
//! field lists change between kernel versions.

use super::tracepoint::Field;
use std::fmt;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Int(i64),
    Str(Text),
}

/// The longest text kept inside a `Text` itself.
const INLINE: usize = 22;

/// A field's text: task names, states and short names are kept inline,
/// so that decoding an event allocates nothing for them; longer text
/// (paths, messages) goes on the heap.
#[derive(Clone)]
pub enum Text {
    Inline { len: u8, bytes: [u8; INLINE] },
    Heap(Box<str>),
}

impl Text {
    pub fn as_str(&self) -> &str {
        match self {
            // SAFETY: only a whole `&str` is ever copied in (`From<&str>`,
            // the one constructor), so these bytes are UTF-8; checking them
            // again on every read cost a tenth of an event's decoding.
            Text::Inline { len, bytes } => unsafe {
                std::str::from_utf8_unchecked(&bytes[..*len as usize])
            },
            Text::Heap(s) => s,
        }
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        if s.len() <= INLINE {
            let mut bytes = [0; INLINE];
            bytes[..s.len()].copy_from_slice(s.as_bytes());
            Text::Inline {
                len: s.len() as u8,
                bytes,
            }
        } else {
            Text::Heap(s.into())
        }
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        if s.len() <= INLINE {
            Text::from(s.as_str())
        } else {
            Text::Heap(s.into_boxed_str())
        }
    }
}

impl From<std::borrow::Cow<'_, str>> for Text {
    fn from(s: std::borrow::Cow<'_, str>) -> Text {
        match s {
            std::borrow::Cow::Borrowed(b) => Text::from(b),
            std::borrow::Cow::Owned(o) => Text::from(o),
        }
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

/// A field's name as its source gave it, and the `Field` it is when an
/// analysis reads it: decided when the name is first met (once per format
/// or per distinct key of a text), so that finding a field by `Field`
/// compares a byte, not its text.
#[derive(Clone)]
pub struct FieldName {
    text: Arc<str>,
    known: Option<Field>,
}

impl FieldName {
    pub fn new(text: Arc<str>) -> FieldName {
        let known = Field::of(&text);
        FieldName { text, known }
    }
    pub fn as_str(&self) -> &str {
        &self.text
    }
    /// The `Field` of this name, if an analysis reads it.
    pub fn known(&self) -> Option<Field> {
        self.known
    }
}

impl std::ops::Deref for FieldName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl From<&str> for FieldName {
    fn from(s: &str) -> FieldName {
        FieldName::new(s.into())
    }
}

impl PartialEq for FieldName {
    fn eq(&self, other: &FieldName) -> bool {
        self.text == other.text
    }
}

impl fmt::Debug for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// An event's fields by name, in the order its source gave them.
type FieldList = Vec<(FieldName, Value)>;

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Fields(pub FieldList);

/// A thread keeps at most this many emptied field vectors for reuse...
const RECYCLED_MAX: usize = 16384;
/// ...each with room for at most this many fields (a larger one is freed).
const RECYCLED_CAPACITY: usize = 32;

thread_local! {
    /// Field vectors of events dropped on this thread, emptied. The thread
    /// that reads a trace also frees its events (pipeline.rs returns each
    /// batch to it), so decoding takes its vectors from here: in steady
    /// state, an event's fields cost no allocation.
    static RECYCLED: std::cell::RefCell<Vec<FieldList>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for Fields {
    fn drop(&mut self) {
        let mut v = std::mem::take(&mut self.0);
        if v.capacity() == 0 || v.capacity() > RECYCLED_CAPACITY {
            return;
        }
        v.clear();
        // At a thread's end its store may be gone: then `v` is freed.
        let _ = RECYCLED.try_with(|r| {
            if let Ok(mut r) = r.try_borrow_mut() {
                if r.len() < RECYCLED_MAX {
                    r.push(v);
                }
            }
        });
    }
}

impl Fields {
    /// No fields yet, with room for `n`: a vector this thread recycled
    /// when there is one.
    pub fn with_capacity(n: usize) -> Fields {
        let mut v = RECYCLED
            .try_with(|r| r.try_borrow_mut().ok().and_then(|mut r| r.pop()))
            .ok()
            .flatten()
            .unwrap_or_default();
        v.reserve(n);
        Fields(v)
    }
    pub fn get(&self, field: Field) -> Option<&Value> {
        let field = Some(field);
        self.0
            .iter()
            .find(|(n, _)| n.known == field)
            .map(|(_, v)| v)
    }
    /// An integer field; text that holds a number counts.
    pub fn int(&self, field: Field) -> Option<i64> {
        match self.get(field)? {
            Value::Int(n) => Some(*n),
            Value::Str(s) => parse_int(s),
        }
    }
    pub fn str(&self, field: Field) -> Option<&str> {
        match self.get(field)? {
            Value::Str(s) => Some(s),
            Value::Int(_) => None,
        }
    }
    /// A field by a name known only at run time (a format's, a user's).
    pub fn named(&self, name: &str) -> Option<&Value> {
        self.0.iter().find(|(n, _)| &**n == name).map(|(_, v)| v)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn push(&mut self, name: FieldName, v: Value) {
        self.0.push((name, v));
    }
}

impl fmt::Display for Fields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (n, v)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{n}={v}")?;
        }
        Ok(())
    }
}

/// Decimal (optionally negative) or `0x` hexadecimal.
pub fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        return u64::from_str_radix(h, 16).ok().map(|v| v as i64);
    }
    if let Some(h) = s.strip_prefix("-0x") {
        return u64::from_str_radix(h, 16)
            .ok()
            .map(|v| (v as i64).wrapping_neg());
    }
    s.parse::<i64>().ok()
}

/// A value as printed in text: a number when it is one.
pub fn value_of_text(s: &str) -> Value {
    match parse_int(s) {
        Some(n) => Value::Int(n),
        None => Value::Str(s.into()),
    }
}

/// The event name without its system: `sched:sched_switch` → `sched_switch`.
pub fn short_name(name: &str) -> &str {
    // A plain backwards scan: names are short and every analysis asks for
    // every event, so memrchr's setup would cost more than the search.
    match name.bytes().rposition(|b| b == b':') {
        Some(i) => &name[i + 1..],
        None => name,
    }
}

#[cfg(test)]
mod tests {
    use super::short_name;

    #[test]
    fn text_up_to_22_bytes_is_inline_and_reads_back_whole() {
        use super::Text;
        let x22 = "x".repeat(22);
        for s in ["", "fio", "kworker/u4:2-events", "a\u{e9}\u{1F600}", &x22] {
            let t = Text::from(s);
            assert!(matches!(t, Text::Inline { .. }), "{s}");
            assert_eq!(t.as_str(), s);
            assert_eq!(Text::from(s.to_string()), t);
        }
        let long = "/var/lib/postgresql/18/main/base/16384/1259";
        let t = Text::from(long);
        assert!(matches!(t, Text::Heap(_)));
        assert_eq!(&*t, long);
        assert_eq!(format!("{t} {t:?}"), format!("{long} {long:?}"));
    }

    #[test]
    fn short_name_drops_the_system() {
        assert_eq!(short_name("sched:sched_switch"), "sched_switch");
        assert_eq!(short_name("ext4_sync_file_enter"), "ext4_sync_file_enter");
        assert_eq!(short_name("a:b:c"), "c");
        assert_eq!(short_name("sched:"), "");
        assert_eq!(short_name(""), "");
    }
}
