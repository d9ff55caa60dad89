//! btt's interval statistics, computed the way btt computes them so that the
//! same blktrace file gives the same numbers to the nanosecond and the count.
//!
//! The rules, from btt's source (trace_*.c, devs.c, inlines.h):
//! - events with 0 bytes (except requeues) and passthrough requests are
//!   ignored; on each device everything before its first Q or A is ignored;
//! - each queued bio (Q) is kept by start sector; a second Q at the same start
//!   while the first is pending is ignored;
//! - G, S, I, M/F find the Q whose range contains their sector;
//! - D and C apply to every pending Q that lies within their range: each such
//!   bio gets its own I2D/M2D, D2C and Q2C (the per-queued-bio weighting);
//! - a delta that is not positive counts as 1 ns;
//! - Q2Q and Q2C of md/dm devices (majors 9, 253, 254) go to the `dm` rows.

use super::dev_table::DevTable;
use super::sector_map::SectorMap;
use crate::model::{Action, BlockEvent, Dev, Extra};
use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

/// min/avg/max/N of one interval, in nanoseconds. Without a sample (`n`
/// 0) min and max are unknown: null in JSON, never 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Interval {
    pub n: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub total_ns: u64,
}

impl Serialize for Interval {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let known = self.n > 0;
        let mut st = s.serialize_struct("Interval", 4)?;
        st.serialize_field("n", &self.n)?;
        st.serialize_field("min_ns", &known.then_some(self.min_ns))?;
        st.serialize_field("max_ns", &known.then_some(self.max_ns))?;
        st.serialize_field("total_ns", &self.total_ns)?;
        st.end()
    }
}

impl Interval {
    pub fn add(&mut self, t: u64) {
        if self.n == 0 {
            self.min_ns = t;
            self.max_ns = t;
        } else if t < self.min_ns {
            self.min_ns = t;
        } else if t > self.max_ns {
            self.max_ns = t;
        }
        self.total_ns += t;
        self.n += 1;
    }
    /// The average in seconds as btt computes it (`BIT_TIME(total) / n`),
    /// so that printing with 9 decimals gives btt's digits.
    pub fn avg_secs(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let t = self.total_ns;
        ((t / 1_000_000_000) as f64 + (t % 1_000_000_000) as f64 / 1.0e9) / self.n as f64
    }
    pub fn avg_ns(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.total_ns as f64 / self.n as f64
        }
    }
}

/// The intervals btt prints, for one device or for all.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Intervals {
    pub q2q: Interval,
    pub q2q_dm: Interval,
    pub q2a: Interval,
    pub q2a_dm: Interval,
    pub q2g: Interval,
    pub s2g: Interval,
    pub g2i: Interval,
    pub q2m: Interval,
    pub i2d: Interval,
    pub m2d: Interval,
    pub d2c: Interval,
    pub q2c: Interval,
    pub q2c_dm: Interval,
}

/// btt's "Device Merge Information" row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MergeInfo {
    pub queued: u64,
    pub issued: u64,
    /// #Q / #D (at least 1).
    pub ratio: f64,
    pub blk_min: u64,
    /// Sectors completed / #D, truncated as btt prints it.
    pub blk_avg: u64,
    pub blk_max: u64,
    pub blk_total: u64,
}

/// btt's "Device Overhead": each stage's share of the total Q2C time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Overhead {
    pub q2g_pct: f64,
    pub g2i_pct: f64,
    pub q2m_pct: f64,
    pub i2d_pct: f64,
    pub d2c_pct: f64,
}

const UNSET: u64 = u64::MAX;

/// Write bios and how long they waited to get a request (Q→G): where
/// writeback throttling (wbt) and a full tag set put a writer to sleep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct WriteWaits {
    pub bios: u64,
    pub q2g: Interval,
    /// Waits of 1 ms or more.
    pub over_1ms: u64,
}

#[derive(Clone, Copy, Debug)]
struct QueuedBio {
    end: u64,
    t: u64,
    pid: u32,
    g_time: u64,
    s_time: u64,
    i_time: u64,
    m_time: u64,
    d_time: u64,
}

#[derive(Debug, Default)]
struct DevState {
    culling: bool,
    pending: SectorMap<QueuedBio>,
    last_q: Option<u64>,
    n_qs: u64,
    n_ds: u64,
    n_act_q: u64,
    avgs: Intervals,
    blks: Interval,
    writes: WriteWaits,
}

/// Per-device and overall btt statistics, fed one event at a time.
#[derive(Debug, Default)]
pub struct Btt {
    devs: DevTable<DevState>,
    /// Devices in the order btt first saw them (its output order).
    order: Vec<Dev>,
    all: Intervals,
    all_last_q: Option<u64>,
    /// Q2C and D2C per process (pid of the Q).
    per_pid: HashMap<u32, (Interval, Interval)>,
    /// Reused by C to list the bios it covers (and removes).
    scratch: Vec<u64>,
}

fn tdelta(from: u64, to: u64) -> u64 {
    if from < to {
        to - from
    } else {
        1
    }
}

fn update_lq(last: &mut Option<u64>, avg: &mut Interval, time: u64) {
    if let Some(l) = *last {
        avg.add(if time > l { time - l } else { 1 });
    }
    *last = Some(time);
}

/// The pending bio whose range holds `sector` (btt's `rb_find_sec`).
fn find_containing(pending: &mut SectorMap<QueuedBio>, sector: u64) -> Option<&mut QueuedBio> {
    let (_, q) = pending.last_in_mut(..=sector)?;
    if sector < q.end {
        Some(q)
    } else {
        None
    }
}

/// Start sectors of pending bios that lie within `[start, end]`, into `out`.
fn within(pending: &SectorMap<QueuedBio>, start: u64, end: u64, out: &mut Vec<u64>) {
    out.clear();
    out.extend(
        pending
            .range(start..=end)
            .filter(|(_, q)| q.end <= end)
            .map(|(s, _)| s),
    );
}

/// btt's `io_setup` + `dip_alloc` culling: the device's state, or `None`
/// if the event is ignored. One lookup: it runs for every event.
fn setup<'a>(
    devs: &'a mut DevTable<DevState>,
    order: &mut Vec<Dev>,
    dev: Dev,
    starts_device: bool,
) -> Option<&'a mut DevState> {
    let d = devs.get_or_insert_with(dev, || {
        order.push(dev);
        DevState {
            culling: true,
            ..DevState::default()
        }
    });
    if d.culling {
        if !starts_device {
            return None;
        }
        d.culling = false;
    }
    Some(d)
}

impl Btt {
    #[inline]
    pub fn add(&mut self, e: &BlockEvent) {
        if e.passthrough {
            return;
        }
        let act = match e.action {
            Action::BioComplete => Action::Complete,
            a => a,
        };
        let sectors = e.sectors();
        match act {
            Action::Queue => self.queue(e, sectors),
            Action::Remap => self.remap(e),
            Action::GetRq
            | Action::SleepRq
            | Action::Insert
            | Action::BackMerge
            | Action::FrontMerge => self.bio_step(e, act),
            Action::Issue => self.issue(e, sectors),
            Action::Complete => self.complete(e, sectors),
            Action::Requeue => self.requeue(e),
            _ => {}
        }
    }

    /// Q: a new bio to follow, unless one is pending at its start sector;
    /// Q2Q from the device's and the overall last Q.
    #[inline]
    fn queue(&mut self, e: &BlockEvent, sectors: u64) {
        if e.bytes == 0 {
            return;
        }
        let Some(d) = setup(&mut self.devs, &mut self.order, e.dev, true) else {
            return;
        };
        let remapper = e.dev.is_remapper();
        if d.pending.contains_key(e.sector) {
            return;
        }
        d.pending.insert(
            e.sector,
            QueuedBio {
                end: e.sector.saturating_add(sectors),
                t: e.ts,
                pid: e.pid,
                g_time: UNSET,
                s_time: 0,
                i_time: UNSET,
                m_time: UNSET,
                d_time: UNSET,
            },
        );
        if remapper {
            update_lq(&mut d.last_q, &mut d.avgs.q2q_dm, e.ts);
            update_lq(&mut self.all_last_q, &mut self.all.q2q_dm, e.ts);
        } else {
            update_lq(&mut d.last_q, &mut d.avgs.q2q, e.ts);
            update_lq(&mut self.all_last_q, &mut self.all.q2q, e.ts);
        }
        d.n_qs += 1;
        d.n_act_q += 1;
        d.writes.bios += e.rwbs.is_write() as u64;
    }

    /// A: Q2A of the bio on the device it came from.
    #[inline]
    fn remap(&mut self, e: &BlockEvent) {
        if setup(&mut self.devs, &mut self.order, e.dev, true).is_none() {
            return;
        }
        if let Extra::Remap {
            from_dev,
            from_sector,
        } = e.extra
        {
            let Some(up) = self.devs.get_mut(&from_dev) else {
                return;
            };
            if let Some(q) = find_containing(&mut up.pending, from_sector) {
                let dt = tdelta(q.t, e.ts);
                if from_dev.is_remapper() {
                    up.avgs.q2a_dm.add(dt);
                    self.all.q2a_dm.add(dt);
                } else {
                    up.avgs.q2a.add(dt);
                    self.all.q2a.add(dt);
                }
            }
        }
    }

    /// G, S, I, M and F: a step of the one queued bio that holds their
    /// sector (Q2G, S2G, G2I, Q2M); a merge also ends an active Q.
    #[inline]
    fn bio_step(&mut self, e: &BlockEvent, act: Action) {
        if e.bytes == 0 {
            return;
        }
        let Some(d) = setup(&mut self.devs, &mut self.order, e.dev, false) else {
            return;
        };
        let is_merge = matches!(act, Action::BackMerge | Action::FrontMerge);
        if let Some(q) = find_containing(&mut d.pending, e.sector) {
            match act {
                Action::GetRq => {
                    q.g_time = e.ts;
                    let wait = tdelta(q.t, e.ts);
                    d.avgs.q2g.add(wait);
                    self.all.q2g.add(wait);
                    if e.rwbs.is_write() {
                        d.writes.q2g.add(wait);
                        d.writes.over_1ms += (wait >= 1_000_000) as u64;
                    }
                    if q.s_time != 0 {
                        d.avgs.s2g.add(tdelta(q.s_time, e.ts));
                        self.all.s2g.add(tdelta(q.s_time, e.ts));
                    }
                }
                Action::SleepRq => q.s_time = e.ts,
                Action::Insert => {
                    q.i_time = e.ts;
                    if q.g_time != UNSET {
                        d.avgs.g2i.add(tdelta(q.g_time, e.ts));
                        self.all.g2i.add(tdelta(q.g_time, e.ts));
                    }
                }
                _ => {
                    q.m_time = e.ts;
                    d.avgs.q2m.add(tdelta(q.t, e.ts));
                    self.all.q2m.add(tdelta(q.t, e.ts));
                }
            }
        }
        if is_merge && d.n_act_q != 0 {
            d.n_act_q -= 1;
        }
    }

    /// D: I2D (or M2D) of every pending bio within its range.
    #[inline]
    fn issue(&mut self, e: &BlockEvent, sectors: u64) {
        if e.bytes == 0 {
            return;
        }
        let Some(d) = setup(&mut self.devs, &mut self.order, e.dev, false) else {
            return;
        };
        if d.n_act_q != 0 {
            d.n_act_q -= 1;
        }
        d.n_ds += 1;
        // In place: nothing is removed, so no list of keys to look up again.
        let end = e.sector.saturating_add(sectors);
        let DevState { pending, avgs, .. } = d;
        let all = &mut self.all;
        pending.for_each_in_mut(e.sector..=end, |q| {
            if q.end > end {
                return;
            }
            if q.i_time != UNSET {
                avgs.i2d.add(tdelta(q.i_time, e.ts));
                all.i2d.add(tdelta(q.i_time, e.ts));
            } else if q.m_time != UNSET {
                avgs.m2d.add(tdelta(q.m_time, e.ts));
                all.m2d.add(tdelta(q.m_time, e.ts));
            }
            q.d_time = e.ts;
        });
    }

    /// C: every pending bio within its range is done: Q2C, and D2C if it
    /// was seen issued (overall, per device and per process).
    #[inline]
    fn complete(&mut self, e: &BlockEvent, sectors: u64) {
        if e.bytes == 0 {
            return;
        }
        let Some(d) = setup(&mut self.devs, &mut self.order, e.dev, false) else {
            return;
        };
        let remapper = e.dev.is_remapper();
        d.blks.add(sectors);
        within(
            &d.pending,
            e.sector,
            e.sector.saturating_add(sectors),
            &mut self.scratch,
        );
        for &s in &self.scratch {
            let q = d.pending.remove(s).unwrap();
            let q2c = tdelta(q.t, e.ts);
            let pp = self.per_pid.entry(q.pid).or_default();
            if remapper {
                d.avgs.q2c_dm.add(q2c);
                self.all.q2c_dm.add(q2c);
            } else {
                d.avgs.q2c.add(q2c);
                self.all.q2c.add(q2c);
                pp.0.add(q2c);
            }
            if q.d_time != UNSET {
                let d2c = tdelta(q.d_time, e.ts);
                d.avgs.d2c.add(d2c);
                self.all.d2c.add(d2c);
                pp.1.add(d2c);
            }
        }
    }

    /// R: counted as a Q again, as btt does.
    #[inline]
    fn requeue(&mut self, e: &BlockEvent) {
        let Some(d) = setup(&mut self.devs, &mut self.order, e.dev, false) else {
            return;
        };
        d.n_qs += 1;
        d.n_act_q += 1;
    }

    pub fn all(&self) -> &Intervals {
        &self.all
    }

    pub fn device(&self, dev: Dev) -> Option<&Intervals> {
        self.devs.get(&dev).map(|d| &d.avgs)
    }

    pub fn write_waits(&self, dev: Dev) -> WriteWaits {
        self.devs.get(&dev).map(|d| d.writes).unwrap_or_default()
    }

    /// Q2C and D2C of the bios a process queued.
    pub fn per_pid(&self) -> &HashMap<u32, (Interval, Interval)> {
        &self.per_pid
    }

    /// btt's merge table row; `None` where btt prints no row.
    pub fn merge_info(&self, dev: Dev) -> Option<MergeInfo> {
        let d = self.devs.get(&dev)?;
        if d.n_qs == 0 || d.n_ds == 0 {
            return None;
        }
        let queued = d.n_qs.max(d.n_ds);
        Some(MergeInfo {
            queued,
            issued: d.n_ds,
            ratio: queued as f64 / d.n_ds as f64,
            blk_min: d.blks.min_ns,
            blk_avg: (d.blks.total_ns as f64 / d.n_ds as f64) as u64,
            blk_max: d.blks.max_ns,
            blk_total: d.blks.total_ns,
        })
    }

    pub fn overhead(&self, dev: Dev) -> Option<Overhead> {
        let a = &self.devs.get(&dev)?.avgs;
        if a.q2c.n == 0 || a.q2c.total_ns == 0 {
            return None;
        }
        let q2c = a.q2c.total_ns as f64;
        let pct = |i: &Interval| 100.0 * i.total_ns as f64 / q2c;
        Some(Overhead {
            q2g_pct: pct(&a.q2g),
            g2i_pct: pct(&a.g2i),
            q2m_pct: pct(&a.q2m),
            i2d_pct: pct(&a.i2d),
            d2c_pct: pct(&a.d2c),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Rwbs;

    fn ev(ts: u64, action: Action, sector: u64, sectors: u32) -> BlockEvent {
        BlockEvent::for_test(ts, action, sector, sectors, Rwbs::READ)
    }

    #[test]
    fn merged_bios_each_count_d2c_and_q2c() {
        let mut b = Btt::default();
        for e in [
            ev(100, Action::Queue, 0, 8),
            ev(110, Action::GetRq, 0, 8),
            ev(120, Action::Queue, 8, 8),
            ev(125, Action::BackMerge, 8, 8),
            ev(130, Action::Insert, 0, 16),
            ev(150, Action::Issue, 0, 16),
            ev(400, Action::Complete, 0, 16),
        ] {
            b.add(&e);
        }
        let a = b.all();
        assert_eq!(a.q2c.n, 2);
        assert_eq!(
            (a.q2c.min_ns, a.q2c.max_ns, a.q2c.total_ns),
            (280, 300, 580)
        );
        assert_eq!((a.d2c.n, a.d2c.total_ns), (2, 500));
        assert_eq!((a.q2g.n, a.q2g.total_ns), (1, 10));
        assert_eq!((a.g2i.n, a.g2i.total_ns), (1, 20));
        assert_eq!((a.i2d.n, a.i2d.total_ns), (1, 20));
        assert_eq!((a.q2m.n, a.m2d.n, a.m2d.total_ns), (1, 1, 25));
        assert_eq!((a.q2q.n, a.q2q.total_ns), (1, 20));
        let m = b.merge_info(Dev::new(8, 0)).unwrap();
        assert_eq!((m.queued, m.issued, m.ratio, m.blk_avg), (2, 1, 2.0, 16));
    }

    #[test]
    fn events_before_first_queue_are_culled_and_duplicates_ignored() {
        let mut b = Btt::default();
        b.add(&ev(1, Action::Complete, 0, 8));
        b.add(&ev(2, Action::Queue, 0, 8));
        b.add(&ev(3, Action::Queue, 0, 8));
        b.add(&ev(5, Action::Complete, 0, 8));
        assert_eq!(b.all().q2c.n, 1);
        assert_eq!(b.all().q2c.total_ns, 3);
        assert_eq!(b.merge_info(Dev::new(8, 0)), None, "no D, no merge row");
    }

    #[test]
    fn btt_average_rounding() {
        let mut i = Interval::default();
        for t in [1_000_000_001, 2, 3] {
            i.add(t);
        }
        assert_eq!(format!("{:.9}", i.avg_secs()), "0.333333335");
    }
}
