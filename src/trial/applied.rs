//! The candidate's settings while they are applied: each change written in
//! the journal before it is made (so that `record --cleanup` undoes it
//! after a SIGKILL), put back in the reverse order when the round ends or
//! the guard is dropped (an error, a panic's unwind), and read back.

use super::knob::Knob;
use super::Planned;
use crate::capture::journal::Journal;
use serde::Serialize;

/// A knob put back, and what the kernel shows after.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Restored {
    pub knob: String,
    pub value: String,
    pub reads: String,
    pub ok: bool,
}

pub struct Applied<'j> {
    journal: &'j mut Journal,
    /// Each changed knob with the value that puts it back, in order, and
    /// whether it is a partner the kernel changed (written back only when
    /// it no longer shows its value: the kernel refuses some values it
    /// shows, as vm.dirty_bytes' 0).
    done: Vec<(Knob, String, bool)>,
}

impl<'j> Applied<'j> {
    /// Sets each knob to its tried value, in order; on a refusal, puts
    /// back what it had set and says which knob and value.
    pub fn apply(journal: &'j mut Journal, changes: &[Planned]) -> Result<Applied<'j>, String> {
        let mut a = Applied {
            journal,
            done: Vec::new(),
        };
        for Planned {
            resolved: knob,
            tried: value,
            ..
        } in changes
        {
            // Its partners first: put back after it.
            for p in knob.partners() {
                let was = p.read()?;
                a.journal_change(&p, &was);
                a.done.push((p, was, true));
            }
            let was = knob.read()?;
            let restore = knob.restore_value(&was);
            // Written down first: a SIGKILL between the two leaves an
            // entry that puts back the value it already has.
            a.journal_change(knob, &restore);
            a.done.push((knob.clone(), restore, false));
            knob.write(value)?;
            let now = knob.read()?;
            if !knob.shows(&now, value) {
                return Err(format!(
                    "{}: wrote {value:?} but the kernel shows {now:?}",
                    knob.name
                ));
            }
        }
        Ok(a)
    }

    /// Written down before the change, with the value that puts it back.
    fn journal_change(&mut self, knob: &Knob, restore: &str) {
        match (&knob.task, &knob.mount) {
            (Some((t, attr)), _) => self.journal.record_task(*t, *attr, restore),
            (_, Some(m)) => self.journal.record_mount(m, restore),
            _ => self.journal.record_knob(&knob.file, restore),
        }
    }

    /// Puts every knob back (last changed first) and reads each back.
    pub fn restore(mut self) -> Result<Vec<Restored>, String> {
        self.undo()
    }

    fn undo(&mut self) -> Result<Vec<Restored>, String> {
        let mut out = Vec::new();
        let mut failed = Vec::new();
        while let Some((knob, value, partner)) = self.done.pop() {
            let before = knob.read().unwrap_or_default();
            let wrote = if partner && knob.shows(&before, &value) {
                Ok(())
            } else {
                knob.write(&value)
            };
            let reads = knob.read().unwrap_or_else(|e| e);
            let ok = wrote.is_ok() && knob.shows(&reads, &value);
            if ok {
                match (&knob.task, &knob.mount) {
                    (Some((t, attr)), _) => self.journal.forget_task(*t, *attr),
                    (_, Some(m)) => self.journal.forget_mount(m),
                    _ => self.journal.forget_knob(&knob.file),
                }
            } else {
                failed.push(format!(
                    "{}: could not put back {value:?} (reads {reads:?}{}); the journal keeps it for `iosleuth record --cleanup`",
                    knob.name,
                    wrote.err().map(|e| format!(", {e}")).unwrap_or_default()
                ));
            }
            out.push(Restored {
                knob: knob.name.clone(),
                value,
                reads,
                ok,
            });
        }
        if failed.is_empty() {
            Ok(out)
        } else {
            Err(failed.join("; "))
        }
    }
}

impl Drop for Applied<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.undo() {
            eprintln!("iosleuth: {e}");
        }
    }
}
