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
    Str(Box<str>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(n) => write!(f, "{n}"),
            Value::Str(s) => f.write_str(s),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Default)]
pub struct Fields(pub Vec<(Arc<str>, Value)>);

impl Fields {
    pub fn get(&self, field: Field) -> Option<&Value> {
        self.named(field.name())
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
    pub fn push(&mut self, name: Arc<str>, v: Value) {
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
    fn short_name_drops_the_system() {
        assert_eq!(short_name("sched:sched_switch"), "sched_switch");
        assert_eq!(short_name("ext4_sync_file_enter"), "ext4_sync_file_enter");
        assert_eq!(short_name("a:b:c"), "c");
        assert_eq!(short_name("sched:"), "");
        assert_eq!(short_name(""), "");
    }
}
