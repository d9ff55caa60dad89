//! A forward jump under judgment: the events held after it, and the
//! three ways it ends (the stream comes back near the old timeline and
//! the jumped events are dropped; enough events follow and it is
//! accepted; the input ends and its length decides).

use super::*;

impl TimeGuard {
    /// An event read while a jump is judged.
    pub(super) fn while_held(&mut self, ev: Event, ts: u64, p: Position) {
        let j = self.jump.expect("held");
        if j.from.is_none() && j.timed == 1 && ts > j.to.saturating_add(ABSURD_NS) {
            // The source's first event lies far before this one: judge
            // this one as a jump from it, the first set aside meanwhile.
            let i = self.held.iter().position(|(e, _)| e.ts().is_some());
            self.island = i.and_then(|i| self.held.remove(i));
            self.jump = Some(Jump {
                from: Some(j.to),
                to: ts,
                max: ts,
                timed: 1,
            });
            self.held.push_back((ev, p));
            return;
        }
        if ts >= j.to.saturating_sub(JUMP_NS / 2) {
            // Follows the jump: the one event back was the damaged one.
            if let Some((r, rp)) = self.returner.take() {
                let rts = r.ts().unwrap_or(0);
                self.backwards.add(|| {
                    format!(
                        "{rp} at {}, {} before the event before it",
                        secs(rts),
                        secs(j.max.saturating_sub(rts))
                    )
                });
            }
            self.held.push_back((ev, p));
            let j = self.jump.as_mut().expect("held");
            j.timed += 1;
            j.max = j.max.max(ts);
            let enough = match (j.from, &self.island) {
                (_, Some(_)) => 2,
                (Some(_), None) => CONFIRM,
                (None, None) => CONFIRM_START,
            };
            if j.timed >= enough {
                self.accept_held();
            }
            return;
        }
        // Back near the timeline before the jump.
        match self.returner.take() {
            None => self.returner = Some((ev, p)),
            Some(r) => {
                let back = r.0.ts().unwrap_or(0);
                self.replay.push_front((ev, p));
                self.replay.push_front(r);
                self.drop_jump(back);
            }
        }
    }

    /// The source ended while a jump was judged.
    pub(super) fn end_of_input(&mut self) {
        let j = self.jump.expect("held");
        match self.returner.take() {
            Some(r) => {
                let back = r.0.ts().unwrap_or(0);
                if j.to.saturating_sub(back) > ABSURD_NS {
                    self.replay.push_front(r);
                    self.drop_jump(back);
                } else {
                    let (rp, rts) = (r.1, back);
                    self.backwards.add(|| {
                        format!(
                            "{rp} at {}, {} before the event before it",
                            secs(rts),
                            secs(j.max.saturating_sub(rts))
                        )
                    });
                    self.accept_held();
                }
            }
            None => match j.from {
                Some(from) if j.to.saturating_sub(from) > ABSURD_NS => self.drop_jump(from),
                _ => self.accept_held(),
            },
        }
    }

    /// The jump was damage: its events are skipped; `back` is the time the
    /// timeline went on at.
    fn drop_jump(&mut self, back: u64) {
        let j = self.jump.expect("held");
        let gap = j.to.saturating_sub(j.from.unwrap_or(back));
        let side = if j.from.is_some() {
            "after the event before it"
        } else {
            "after the events that follow it"
        };
        self.drop_held(|first| format!("{first}, {} {side}", secs(gap)));
        // The first event set aside was right: it starts the source again.
        if let Some(first) = self.island.take() {
            self.replay.push_front(first);
        }
    }

    /// Skips the held timed events (the first described by `say`) and
    /// puts the untimed ones back.
    fn drop_held(&mut self, say: impl FnOnce(String) -> String) {
        self.jump = None;
        let mut say = Some(say);
        let mut keep = Vec::new();
        for (ev, p) in std::mem::take(&mut self.held) {
            match ev.ts() {
                None => keep.push((ev, p)),
                Some(ts) => {
                    let say = say.take();
                    self.far
                        .add(|| (say.expect("first"))(format!("{p} at {}", secs(ts))));
                }
            }
        }
        for x in keep.into_iter().rev() {
            self.replay.push_front(x);
        }
    }

    /// The jump was real: the held events are judged again, from it on.
    fn accept_held(&mut self) {
        let j = self.jump.take().expect("held");
        if let Some((ev, p)) = self.island.take() {
            // The source's first event, far before all that follows.
            let ts = ev.ts().unwrap_or(0);
            self.far.add(|| {
                format!(
                    "{p} at {}, {} before the events after it",
                    secs(ts),
                    secs(j.to.saturating_sub(ts))
                )
            });
        }
        self.last = Some(j.to);
        for x in std::mem::take(&mut self.held).into_iter().rev() {
            self.replay.push_front(x);
        }
    }
}
