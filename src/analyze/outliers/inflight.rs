//! Requests in flight, as the outlier analysis follows them: queued,
//! issued, merged, requeued, completed (`block`), what each one is
//! (`request_class`), and what waiting on a device means at a moment
//! (`dev_view`: the oldest request at it, commits, checkpoints).

use super::OutlierAnalysis;
use crate::model::{Action, BlockEvent, Dev, Rwbs};
use rustc_hash::FxHashSet;

/// What a request was, by who queued it and its flags.
pub(super) fn request_class(comm: &str, rwbs: Rwbs, bytes: u32) -> &'static str {
    let flush = rwbs.has(Rwbs::FLUSH) || rwbs.has(Rwbs::PREFLUSH);
    if flush && (bytes == 0 || !rwbs.has(Rwbs::WRITE)) {
        "flush"
    } else if comm.starts_with("jbd2/") {
        "journal write"
    } else if rwbs.has(Rwbs::WRITE) {
        "data write"
    } else if rwbs.has(Rwbs::READ) {
        "read"
    } else {
        "other request"
    }
}

/// How many completed requests are kept before the first look at which
/// ones open operations still refer to.
pub(super) const DONE_LOOK_FROM: usize = 1024;

/// A request: its device and start sector.
pub(super) type ReqKey = (Dev, u64);

/// A request in flight: what it is, who queued it, when it was issued.
#[derive(Clone)]
pub(super) struct InFlight {
    pub(super) class: &'static str,
    pub(super) comm: crate::model::Comm,
    pub(super) bytes: u32,
    pub(super) issued_at: Option<u64>,
    /// The block analysis' id of the request (`RequestRow::id`), learnt at
    /// its issue.
    pub(super) id: Option<u64>,
}

impl InFlight {
    /// A request as its first event shows it, not yet issued.
    pub(super) fn of(b: &BlockEvent) -> InFlight {
        InFlight {
            class: request_class(b.comm.as_str(), b.rwbs, b.bytes),
            comm: b.comm,
            bytes: b.bytes,
            issued_at: None,
            id: None,
        }
    }
}

/// One device's requests: how many are queued (not issued), and the issued
/// ones by issue time and sector.
#[derive(Default)]
pub(super) struct DevState {
    queued: u32,
    issued: super::issued::Issued,
}

/// The world as one open operation's device sees it, for a stretch.
#[derive(Clone, Copy, PartialEq)]
pub(super) struct DevView {
    pub(super) queued: bool,
    /// The oldest request at the device, and its class.
    pub(super) oldest: Option<(ReqKey, u64, &'static str)>,
    pub(super) commit: bool,
    pub(super) checkpoint: bool,
}

impl DevView {
    /// What `integrate` is given for an operation not blocked in `D`,
    /// which reads no device view: none is worked out for it.
    pub(super) const UNREAD: DevView = DevView {
        queued: false,
        oldest: None,
        commit: false,
        checkpoint: false,
    };
}

impl OutlierAnalysis {
    /// What waiting on `dev` (None: any device) means right now.
    pub(super) fn dev_view(&self, dev: Option<Dev>) -> DevView {
        let one = |d: &Dev, st: &DevState| {
            let oldest = st.issued.first().map(|(at, sector)| {
                let k = (*d, sector);
                let class = self.queued.get(&k).map(|r| r.class).unwrap_or("request");
                (k, at, class)
            });
            (st.queued > 0, oldest)
        };
        let (queued, oldest) = match dev {
            Some(d) => self.devs.get(&d).map(|st| one(&d, st)).unwrap_or_default(),
            None => self.devs.iter().map(|(d, st)| one(d, st)).fold(
                (false, None::<(ReqKey, u64, &'static str)>),
                |a, b| {
                    let oldest = match (a.1, b.1) {
                        (Some(x), Some(y)) => Some(if (y.1, y.0) < (x.1, x.0) { y } else { x }),
                        (x, y) => x.or(y),
                    };
                    (a.0 || b.0, oldest)
                },
            ),
        };
        let commit = match dev {
            Some(d) => self.commits.get(&d).is_some_and(|&n| n > 0),
            None => self.commits.values().any(|&n| n > 0),
        };
        let checkpoint = self
            .checkpointing
            .values()
            .any(|d| dev.is_none_or(|x| x == *d));
        DevView {
            queued,
            oldest,
            commit,
            checkpoint,
        }
    }

    /// A request leaves: out of the queue, or off the device.
    fn forget(&mut self, key: ReqKey) -> Option<InFlight> {
        let r = self.queued.remove(&key)?;
        let d = self.devs.entry(key.0).or_default();
        match r.issued_at {
            Some(at) => {
                d.issued.remove(&(at, key.1));
            }
            None => d.queued = d.queued.saturating_sub(1),
        }
        Some(r)
    }

    /// Completed requests no open operation waited for any more go, once
    /// there are twice as many as after the last look (amortised: one look
    /// at every open operation's waits per request kept, not one per
    /// operation that ends).
    fn forget_unreferenced(&mut self) {
        if self.done.len() < self.done_limit {
            return;
        }
        // Waited for so far, or by operations integrated after this event.
        let pending = self.pending_views.iter().filter_map(|(_, v)| v.oldest);
        let referenced: FxHashSet<(ReqKey, u64)> = self
            .open
            .iter()
            .flat_map(|o| {
                o.waited_on
                    .keys()
                    .copied()
                    .chain(o.cur_wait.map(|(k, at, _)| (k, at)))
            })
            .chain(pending.map(|(k, at, _)| (k, at)))
            .collect();
        self.done.retain(|k, _| referenced.contains(k));
        self.done_limit = (2 * self.done.len()).max(DONE_LOOK_FROM);
    }

    pub fn block(&mut self, b: &BlockEvent, issued: Option<u64>) {
        let key = (b.dev, b.sector);
        match b.action {
            Action::Queue => {
                if self.queued.contains_key(&key) {
                    return;
                }
                self.queued.insert(key, InFlight::of(b));
                self.devs.entry(b.dev).or_default().queued += 1;
            }
            Action::Issue => {
                let r = self.queued.entry(key).or_insert_with(|| InFlight::of(b));
                r.id = issued.or(r.id);
                if r.issued_at.is_none() {
                    r.issued_at = Some(b.ts);
                    let d = self.devs.entry(b.dev).or_default();
                    d.queued = d.queued.saturating_sub(1);
                    d.issued.insert((b.ts, b.sector));
                }
            }
            Action::Complete => {
                if let Some(r) = self.forget(key) {
                    if let Some(at) = r.issued_at {
                        // Waited for so far, or being waited for right now
                        // by operations integrated only after this event.
                        let now = self
                            .pending_views
                            .iter()
                            .any(|(_, v)| v.oldest.is_some_and(|(k, i, _)| k == key && i == at));
                        if now || self.open.iter().any(|o| o.waited_for(&key, at)) {
                            self.done.insert((key, at), (r, b.ts));
                            self.forget_unreferenced();
                        }
                    }
                }
            }
            Action::BackMerge | Action::FrontMerge => {
                // Merged into a request already queued: not one of its own.
                self.forget(key);
                // The request now starts at this bio.
                if b.action == Action::FrontMerge {
                    let old = (b.dev, b.sector.saturating_add(b.bytes as u64 >> 9));
                    if let Some(r) = self.queued.remove(&old) {
                        if let Some(at) = r.issued_at {
                            let d = self.devs.entry(b.dev).or_default();
                            d.issued.remove(&(at, old.1));
                            d.issued.insert((at, b.sector));
                        }
                        self.queued.insert(key, r);
                    }
                }
            }
            Action::Requeue => {
                if let Some(r) = self.queued.get_mut(&key) {
                    if let Some(at) = r.issued_at.take() {
                        let d = self.devs.entry(b.dev).or_default();
                        d.issued.remove(&(at, b.sector));
                        d.queued += 1;
                    }
                }
            }
            _ => {}
        }
    }
}
