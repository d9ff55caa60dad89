//! The tracing data `perf record -e SYSTEM:EVENT` stores in a perf.data
//! file (HEADER_TRACING_DATA, written by perf's trace-event-info.c and
//! read by trace-event-read.c): the kernel's ring-buffer header and the
//! format file of every recorded event, so that a tracepoint sample's raw
//! bytes decode on any machine. Layout:
//!
//! ```text
//! "\x17\x08\x44tracing" VERSION "\0"   (e.g. "0.6")
//! u8 big-endian, u8 sizeof(long), u32 page size
//! "header_page\0"  u64 size, text
//! "header_event\0" u64 size, text
//! u32 count, then count × (u64 size, ftrace format text)
//! u32 systems, then per system: name "\0", u32 count, count × (u64 size, format text)
//! u32 size, kallsyms; u32 size, printk formats; (0.6:) u64 size, saved cmdlines
//! ```

use super::tracefs_format::{parse_format, parse_header_page, EventFormat, PageHeader};

const MAGIC: &[u8] = b"\x17\x08\x44tracing";

struct Cursor<'a> {
    d: &'a [u8],
    at: usize,
    big: bool,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: u64) -> Result<&'a [u8], String> {
        let n = usize::try_from(n).map_err(|_| "a size beyond memory".to_string())?;
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.d.len())
            .ok_or_else(|| format!("cut short at byte {} (wanted {n} more)", self.at))?;
        let s = &self.d[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u64, String> {
        let b: [u8; 4] = self.take(4)?.try_into().unwrap();
        Ok(if self.big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        } as u64)
    }

    fn u64(&mut self) -> Result<u64, String> {
        let b: [u8; 8] = self.take(8)?.try_into().unwrap();
        Ok(if self.big {
            u64::from_be_bytes(b)
        } else {
            u64::from_le_bytes(b)
        })
    }

    fn string(&mut self) -> Result<&'a str, String> {
        let rest = &self.d[self.at..];
        let n = memchr::memchr(0, rest).ok_or("a string without its end")?;
        let s = std::str::from_utf8(&rest[..n]).map_err(|_| "a name that is not UTF-8")?;
        self.at += n + 1;
        Ok(s)
    }

    fn text(&mut self, size: u64) -> Result<String, String> {
        Ok(String::from_utf8_lossy(self.take(size)?).into_owned())
    }
}

/// The event formats and ring-buffer page header of a tracing data
/// section, or what is wrong with it.
pub fn parse(d: &[u8]) -> Result<(Vec<EventFormat>, PageHeader), String> {
    if !d.starts_with(MAGIC) {
        return Err("its tracing data does not start with the \\x17\\x08\\x44tracing magic".into());
    }
    let mut c = Cursor {
        d,
        at: MAGIC.len(),
        big: false,
    };
    // The version ("0.6") only changes what follows the formats.
    let _version = c.string()?;
    c.big = c.take(1)?[0] != 0;
    let _long_size = c.take(1)?;
    let _page_size = c.u32()?;
    let mut page = PageHeader::default();
    for name in ["header_page", "header_event"] {
        if c.string()? != name {
            return Err(format!("its tracing data has no {name}"));
        }
        let size = c.u64()?;
        let text = c.text(size)?;
        if name == "header_page" {
            page = parse_header_page(&text).unwrap_or_default();
        }
    }
    let mut formats = Vec::new();
    for _ in 0..c.u32()? {
        let size = c.u64()?;
        if let Some(f) = parse_format("ftrace", &c.text(size)?) {
            formats.push(f);
        }
    }
    for _ in 0..c.u32()? {
        let system = c.string()?.to_string();
        for _ in 0..c.u32()? {
            let size = c.u64()?;
            if let Some(f) = parse_format(&system, &c.text(size)?) {
                formats.push(f);
            }
        }
    }
    // kallsyms, printk formats and (0.6) saved cmdlines follow: not needed.
    Ok((formats, page))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(systems: &[(&str, &str)]) -> Vec<u8> {
        let mut d = MAGIC.to_vec();
        d.extend(b"0.6\0");
        d.extend([0u8, 8]);
        d.extend(4096u32.to_le_bytes());
        for (name, text) in [
            (
                "header_page",
                "field: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n",
            ),
            ("header_event", ""),
        ] {
            d.extend(name.as_bytes());
            d.push(0);
            d.extend((text.len() as u64).to_le_bytes());
            d.extend(text.as_bytes());
        }
        d.extend(0u32.to_le_bytes());
        d.extend((systems.len() as u32).to_le_bytes());
        for (sys, fmt) in systems {
            d.extend(sys.as_bytes());
            d.push(0);
            d.extend(1u32.to_le_bytes());
            d.extend((fmt.len() as u64).to_le_bytes());
            d.extend(fmt.as_bytes());
        }
        d.extend(0u32.to_le_bytes());
        d.extend(0u32.to_le_bytes());
        d.extend(0u64.to_le_bytes());
        d
    }

    const FORMAT: &str = "name: block_rq_issue\nID: 1234\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\nprint fmt: \"%d\", REC->dev\n";

    #[test]
    fn formats_by_system_and_damage_named() {
        let d = section(&[("block", FORMAT)]);
        let (formats, _) = parse(&d).unwrap();
        assert_eq!(formats.len(), 1);
        assert_eq!((formats[0].id, formats[0].system.as_str()), (1234, "block"));
        let e = parse(&d[..d.len() - 60]).unwrap_err();
        assert!(e.contains("cut short"), "{e}");
        assert!(parse(b"PERFILE2").unwrap_err().contains("magic"));
    }
}
