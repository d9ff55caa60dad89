//! Decodes the pages that `per_cpu/cpuN/trace_pipe_raw` hands out: the
//! kernel ring buffer's own format (kernel/trace/ring_buffer.c), described
//! by `events/header_page` and `events/header_event`.
//!
//! A page: a 64-bit base timestamp, a `commit` word (data length, with
//! flags for events missed before this page), then events. Each event
//! starts with a 32-bit header: `type_len` (5 bits) and `time_delta`
//! (27 bits). type_len 1..=28: data of type_len × 4 bytes follows;
//! 0: a 32-bit length (including itself) then the data; 29: padding;
//! 30: a time extension; 31: an absolute timestamp.

use super::tracefs_format::PageHeader;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
const MISSED_EVENTS: u64 = 1 << 31;
const MISSED_STORED: u64 = 1 << 30;

/// What a page says about events lost before it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageInfo {
    pub base_ts: u64,
    pub data_len: usize,
    /// Events were lost between the previous page and this one.
    pub missed: bool,
    /// How many, when the kernel had room to store the count.
    pub missed_count: Option<u64>,
}

pub fn page_info(page: &[u8], hdr: PageHeader) -> Option<PageInfo> {
    let base_ts = u64::from_le_bytes(page.get(0..8)?.try_into().ok()?);
    let cb = page.get(hdr.commit_offset..hdr.commit_offset.checked_add(hdr.commit_size)?)?;
    let commit = match hdr.commit_size {
        8 => u64::from_le_bytes(cb.try_into().ok()?),
        4 => u32::from_le_bytes(cb.try_into().ok()?) as u64,
        _ => return None,
    };
    let data_len = (commit & !(MISSED_EVENTS | MISSED_STORED) & 0xffff_ffff) as usize;
    if hdr.data_offset.checked_add(data_len)? > page.len() {
        return None;
    }
    let missed = commit & MISSED_EVENTS != 0;
    let missed_count = if commit & MISSED_STORED != 0 {
        let at = hdr.data_offset + data_len;
        page.get(at..at.checked_add(8)?)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    } else {
        None
    };
    Some(PageInfo {
        base_ts,
        data_len,
        missed,
        missed_count,
    })
}

/// The records of one page with their absolute timestamps.
pub struct PageRecords<'a> {
    data: &'a [u8],
    pos: usize,
    ts: u64,
    /// Set when the page is malformed; the rest of it is skipped.
    pub damaged: bool,
}

impl<'a> PageRecords<'a> {
    pub fn new(page: &'a [u8], hdr: PageHeader, info: &PageInfo) -> PageRecords<'a> {
        PageRecords {
            data: &page[hdr.data_offset..hdr.data_offset + info.data_len],
            pos: 0,
            ts: info.base_ts,
            damaged: false,
        }
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        Some(u32::from_le_bytes(
            self.data.get(at..at + 4)?.try_into().ok()?,
        ))
    }
}

impl<'a> Iterator for PageRecords<'a> {
    type Item = (u64, &'a [u8]);

    fn next(&mut self) -> Option<(u64, &'a [u8])> {
        loop {
            if self.damaged || self.pos + 4 > self.data.len() {
                return None;
            }
            let h = self.u32_at(self.pos)?;
            let type_len = h & 0x1f;
            let delta = (h >> 5) as u64;
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        // The rest of the page is empty.
                        return None;
                    }
                    let Some(len) = self.u32_at(self.pos + 4) else {
                        self.damaged = true;
                        return None;
                    };
                    self.ts = self.ts.wrapping_add(delta); // garbage near 2^64: time_order skips it
                    self.pos += 4 + len.max(4) as usize;
                }
                TYPE_TIME_EXTEND | TYPE_TIME_STAMP => {
                    let Some(hi) = self.u32_at(self.pos + 4) else {
                        self.damaged = true;
                        return None;
                    };
                    let v = ((hi as u64) << TS_SHIFT) + delta;
                    if type_len == TYPE_TIME_EXTEND {
                        self.ts = self.ts.wrapping_add(v);
                    } else {
                        self.ts = v;
                    }
                    self.pos += 8;
                }
                0 => {
                    let Some(len) = self.u32_at(self.pos + 4) else {
                        self.damaged = true;
                        return None;
                    };
                    let len = (len as usize).saturating_sub(4);
                    let start = self.pos + 8;
                    let padded = (len + 3) & !3;
                    if len == 0 || start + len > self.data.len() {
                        self.damaged = true;
                        return None;
                    }
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = start + padded;
                    return Some((self.ts, &self.data[start..start + len]));
                }
                n => {
                    let len = n as usize * 4;
                    let start = self.pos + 4;
                    if start + len > self.data.len() {
                        self.damaged = true;
                        return None;
                    }
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = start + len;
                    return Some((self.ts, &self.data[start..start + len]));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(events: &[u8], commit_flags: u64, ts: u64) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[0..8].copy_from_slice(&ts.to_le_bytes());
        p[8..16].copy_from_slice(&((events.len() as u64) | commit_flags).to_le_bytes());
        p[16..16 + events.len()].copy_from_slice(events);
        p
    }

    #[test]
    fn small_large_extended_and_padding() {
        let mut ev = Vec::new();
        // type_len 2 (8 bytes of data), delta 5
        ev.extend_from_slice(&(2u32 | (5 << 5)).to_le_bytes());
        ev.extend_from_slice(b"ABCDEFGH");
        // time extend: delta = (1 << 27) + 3
        ev.extend_from_slice(&(30u32 | (3 << 5)).to_le_bytes());
        ev.extend_from_slice(&1u32.to_le_bytes());
        // type_len 0: length 4 + 6 bytes of data (padded to 8), delta 7
        ev.extend_from_slice(&(7u32 << 5).to_le_bytes());
        ev.extend_from_slice(&10u32.to_le_bytes());
        ev.extend_from_slice(b"xyzuvw\0\0");
        // padding with a length, then the end
        ev.extend_from_slice(&(29u32 | (1 << 5)).to_le_bytes());
        ev.extend_from_slice(&4u32.to_le_bytes());
        ev.extend_from_slice(&[0; 4]);
        let p = page(&ev, 0, 1000);
        let hdr = PageHeader::default();
        let info = page_info(&p, hdr).unwrap();
        assert_eq!(
            (info.base_ts, info.data_len, info.missed),
            (1000, ev.len(), false)
        );
        let recs: Vec<(u64, Vec<u8>)> = PageRecords::new(&p, hdr, &info)
            .map(|(t, d)| (t, d.to_vec()))
            .collect();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0], (1005, b"ABCDEFGH".to_vec()));
        assert_eq!(recs[1], (1005 + (1 << 27) + 3 + 7, b"xyzuvw".to_vec()));
    }

    #[test]
    fn missed_events_and_damage() {
        let mut ev = Vec::new();
        ev.extend_from_slice(&(1u32 | (2 << 5)).to_le_bytes());
        ev.extend_from_slice(b"abcd");
        let mut p = page(&ev, MISSED_EVENTS | MISSED_STORED, 50);
        p[16 + ev.len()..16 + ev.len() + 8].copy_from_slice(&123u64.to_le_bytes());
        let info = page_info(&p, PageHeader::default()).unwrap();
        assert!(info.missed);
        assert_eq!(info.missed_count, Some(123));
        // A length running past the page data.
        let mut bad = Vec::new();
        bad.extend_from_slice(&(20u32).to_le_bytes());
        bad.extend_from_slice(b"abcd");
        let p = page(&bad, 0, 0);
        let info = page_info(&p, PageHeader::default()).unwrap();
        let mut it = PageRecords::new(&p, PageHeader::default(), &info);
        assert!(it.next().is_none());
        assert!(it.damaged);
    }
}
