//! `iosleuth dump`: every decoded event as one line, in time order, the
//! way `perf script` and `trace-cmd report` print them, so that a person
//! (or a test) can see exactly what iosleuth read.

use crate::model::{Event, OtherEvent};
use std::fmt::Write;

/// One event as text; `None` for events outside the timeline.
pub fn line(ev: &Event) -> Option<String> {
    let mut s = String::new();
    match ev {
        Event::Block(b) => {
            let _ = write!(
                s,
                "{:>6}.{:09} [{:03}] {:>7} {:<16} block:{} dev={} rwbs={} sector={} bytes={}",
                b.ts / 1_000_000_000,
                b.ts % 1_000_000_000,
                b.cpu,
                b.pid,
                b.comm.as_str(),
                b.action.letter(),
                b.dev,
                b.rwbs,
                b.sector,
                b.bytes
            );
            if b.error != 0 {
                let _ = write!(s, " error={}", b.error);
            }
        }
        Event::Other(o) => other(&mut s, o),
        Event::ProcessName { .. } => return None,
    }
    Some(s)
}

fn other(s: &mut String, o: &OtherEvent) {
    let _ = write!(
        s,
        "{:>6}.{:09} [{:03}] {:>7} {:<16} {}:",
        o.ts / 1_000_000_000,
        o.ts % 1_000_000_000,
        o.cpu,
        o.pid,
        o.comm.as_str(),
        o.name
    );
    if !o.fields.is_empty() {
        let _ = write!(s, " {}", o.fields);
    }
}
