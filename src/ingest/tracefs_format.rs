//! The kernel's self-description of its trace data: `events/*/*/format`
//! and `events/header_page`. Fields are decoded by name, because field
//! lists and offsets change between kernel versions.

use std::collections::HashMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub name: String,
    pub offset: usize,
    pub size: usize,
    pub signed: bool,
    /// `__data_loc`: a u32 holding offset (low 16 bits) and length (high 16).
    pub data_loc: bool,
    /// What the declaration says the bytes are.
    pub kind: FieldKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    Int,
    /// `char x[N]` or `__data_loc char[] x`.
    Text,
    /// Any other array (`unsigned long args[6]`, `u8 uuid[16]`).
    Array,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    pub id: u16,
    pub system: String,
    pub name: String,
    pub fields: Vec<Field>,
}

/// Parses one `format` file; `system` comes from its directory.
pub fn parse_format(system: &str, text: &str) -> Option<EventFormat> {
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(n) = l.strip_prefix("name:") {
            name = Some(n.trim().to_string());
        } else if let Some(i) = l.strip_prefix("ID:") {
            id = i.trim().parse().ok();
        } else if let Some(f) = l.strip_prefix("field:") {
            fields.push(parse_field(f)?);
        }
    }
    Some(EventFormat {
        id: id?,
        system: system.to_string(),
        name: name?,
        fields,
    })
}

/// `unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;`
fn parse_field(f: &str) -> Option<Field> {
    let mut parts = f.split(';').map(str::trim);
    let decl = parts.next()?;
    let mut offset = None;
    let mut size = None;
    let mut signed = false;
    for p in parts {
        if let Some(v) = p.strip_prefix("offset:") {
            offset = v.parse().ok();
        } else if let Some(v) = p.strip_prefix("size:") {
            size = v.parse().ok();
        } else if let Some(v) = p.strip_prefix("signed:") {
            signed = v == "1";
        }
    }
    // A record lives in one ring-buffer page: no field lies beyond 1 MiB.
    const LIMIT: usize = 1 << 20;
    if offset.is_some_and(|o| o > LIMIT) || size.is_some_and(|s| s > LIMIT) {
        return None;
    }
    // The name is the last word of the declaration, without `[N]`.
    let last = decl.split_whitespace().last()?;
    let name = last.split('[').next()?.to_string();
    let data_loc = decl.contains("__data_loc");
    let array = data_loc || last.contains('[');
    let kind = match (array, decl.contains("char")) {
        (false, _) => FieldKind::Int,
        (true, true) => FieldKind::Text,
        (true, false) => FieldKind::Array,
    };
    Some(Field {
        data_loc,
        kind,
        name,
        offset: offset?,
        size: size?,
        signed,
    })
}

impl EventFormat {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Reads a field of a record as an unsigned integer (sign-extended when
/// the field is signed and narrower than 64 bits).
pub fn read_int(rec: &[u8], f: &Field) -> Option<u64> {
    let b = rec.get(f.offset..f.offset.checked_add(f.size)?)?;
    let v = match f.size {
        1 => b[0] as u64,
        2 => u16::from_le_bytes([b[0], b[1]]) as u64,
        4 => u32::from_le_bytes(b.try_into().ok()?) as u64,
        8 => u64::from_le_bytes(b.try_into().ok()?),
        _ => return None,
    };
    Some(if f.signed && f.size < 8 {
        let shift = 64 - 8 * f.size as u32;
        (((v << shift) as i64) >> shift) as u64
    } else {
        v
    })
}

/// Reads a `char name[N]` or `__data_loc char[]` field as bytes up to NUL.
pub fn read_str<'a>(rec: &'a [u8], f: &Field) -> Option<&'a [u8]> {
    let b = if f.data_loc {
        let loc = u32::from_le_bytes(
            rec.get(f.offset..f.offset.checked_add(4)?)?
                .try_into()
                .ok()?,
        );
        let (off, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
        rec.get(off..off + len)?
    } else if f.size == 0 {
        // `char buf[]` (ftrace:print): the rest of the record.
        rec.get(f.offset..)?
    } else {
        rec.get(f.offset..f.offset.checked_add(f.size)?)?
    };
    Some(&b[..memchr::memchr(0, b).unwrap_or(b.len())])
}

/// Where the data of a ring-buffer page starts and how its `commit` word
/// is laid out, from `events/header_page`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageHeader {
    pub commit_offset: usize,
    pub commit_size: usize,
    pub data_offset: usize,
}

impl Default for PageHeader {
    /// The layout of every 64-bit kernel.
    fn default() -> Self {
        PageHeader {
            commit_offset: 8,
            commit_size: 8,
            data_offset: 16,
        }
    }
}

pub fn parse_header_page(text: &str) -> Option<PageHeader> {
    let mut fields: HashMap<String, Field> = HashMap::new();
    for line in text.lines() {
        if let Some(f) = line.trim().strip_prefix("field:") {
            if let Some(f) = parse_field(f) {
                fields.entry(f.name.clone()).or_insert(f);
            }
        }
    }
    let commit = fields.get("commit")?;
    let data = fields.get("data")?;
    Some(PageHeader {
        commit_offset: commit.offset,
        commit_size: commit.size,
        data_offset: data.offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ISSUE: &str = "name: block_rq_issue\nID: 2104\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n\nprint fmt: \"...\"\n";

    #[test]
    fn format_file() {
        let f = parse_format("block", ISSUE).unwrap();
        assert_eq!((f.id, f.name.as_str()), (2104, "block_rq_issue"));
        let rwbs = f.field("rwbs").unwrap();
        assert_eq!((rwbs.offset, rwbs.size, rwbs.data_loc), (34, 10, false));
        assert!(f.field("cmd").unwrap().data_loc);
        assert!(f.field("common_pid").unwrap().signed);
    }

    #[test]
    fn header_page_of_this_kernel() {
        let t = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
        assert_eq!(parse_header_page(t), Some(PageHeader::default()));
    }

    #[test]
    fn integers_and_strings() {
        let mut rec = vec![0u8; 64];
        rec[4..8].copy_from_slice(&(-5i32).to_le_bytes());
        rec[34..37].copy_from_slice(b"WS\0");
        let loc: u32 = (50u32) | (3 << 16);
        rec[60..64].copy_from_slice(&loc.to_le_bytes());
        rec[50..53].copy_from_slice(b"ab\0");
        let f = parse_format("block", ISSUE).unwrap();
        assert_eq!(
            read_int(&rec, f.field("common_pid").unwrap()),
            Some((-5i64) as u64)
        );
        assert_eq!(read_str(&rec, f.field("rwbs").unwrap()), Some(&b"WS"[..]));
        assert_eq!(read_str(&rec, f.field("cmd").unwrap()), Some(&b"ab"[..]));
    }
}
