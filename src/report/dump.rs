//! `iosleuth dump`: every decoded event as one line, in time order, the
//! way `perf script` and `trace-cmd report` print them, so that a person
//! (or a test) can see exactly what iosleuth read. Names and text fields
//! come from the trace: printed escaped (report/escape.rs).

use crate::model::{Event, TraceEvent, Value};
use crate::report::escape::Esc;
use std::fmt::Write;

/// One event as text, its time in seconds after `origin` (the trace's
/// start, or 0 for the trace's own clock); `None` for events outside the
/// timeline.
pub fn line(ev: &Event, origin: u64) -> Option<String> {
    let mut s = String::new();
    match ev {
        Event::Block(b) => {
            head(
                &mut s,
                b.ts.saturating_sub(origin),
                b.cpu,
                b.pid,
                b.comm.as_str(),
            );
            let _ = write!(
                s,
                "block:{} dev={} rwbs={} sector={} bytes={}",
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
        Event::Trace(o) => other(&mut s, o, origin),
        Event::Stack(k) => {
            head(&mut s, k.ts.saturating_sub(origin), k.cpu, k.pid, "");
            s.push_str(stack_event_name(k));
            for f in k.frames.iter() {
                let _ = write!(s, " => {}", Esc(f));
            }
        }
        Event::ProcessName { .. } | Event::ThreadGroup { .. } => return None,
    }
    Some(s)
}

/// One event as a JSON object (`ts` in ns on the trace's clock, `t` in
/// seconds after `origin`, `event` with its system where the source names
/// it, `fields`).
pub fn json(ev: &Event, origin: u64) -> Option<serde_json::Value> {
    use serde_json::json;
    let mut v = json_on_trace_clock(ev)?;
    if let (Some(ts), Some(m)) = (ev.ts(), v.as_object_mut()) {
        m.insert("t".into(), json!(ts.saturating_sub(origin) as f64 / 1e9));
    }
    Some(v)
}

fn json_on_trace_clock(ev: &Event) -> Option<serde_json::Value> {
    use serde_json::json;
    Some(match ev {
        Event::Block(b) => json!({
            "ts": b.ts, "cpu": b.cpu, "pid": b.pid, "comm": b.comm.as_str(),
            "event": format!("block:{}", b.action.letter()),
            "fields": {
                "dev": b.dev.to_string(), "rwbs": b.rwbs.to_string(), "sector": b.sector,
                "bytes": b.bytes, "error": b.error,
            },
        }),
        Event::Trace(o) => {
            let fields: serde_json::Map<String, serde_json::Value> = o
                .fields
                .0
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::Int(n) => match Shown::of(k, *n) {
                            Shown::Plain(n) => json!(n),
                            other => json!(other.to_string()),
                        },
                        Value::Str(s) => json!(s.as_str()),
                    };
                    (k.to_string(), v)
                })
                .collect();
            json!({
                "ts": o.ts, "cpu": o.cpu, "pid": o.pid, "comm": o.comm.as_str(),
                "event": &*o.name, "fields": fields,
            })
        }
        Event::Stack(k) => json!({
            "ts": k.ts, "cpu": k.cpu, "pid": k.pid, "event": stack_event_name(k),
            "fields": {"frames": k.frames.iter().map(|f| &**f).collect::<Vec<&str>>()},
        }),
        Event::ProcessName { .. } | Event::ThreadGroup { .. } => return None,
    })
}

fn other(s: &mut String, o: &TraceEvent, origin: u64) {
    head(
        s,
        o.ts.saturating_sub(origin),
        o.cpu,
        o.pid,
        o.comm.as_str(),
    );
    let _ = write!(s, "{}:", Esc(&o.name));
    for (n, v) in &o.fields.0 {
        let _ = match v {
            Value::Int(x) => write!(s, " {}={}", Esc(n), Shown::of(n, *x)),
            Value::Str(x) => write!(s, " {}={}", Esc(n), Esc(x)),
        };
    }
}

/// The columns every line starts with: time, CPU, thread, comm (escaped).
fn head(s: &mut String, ts: u64, cpu: u32, pid: u32, comm: &str) {
    let _ = write!(
        s,
        "{:>6}.{:09} [{:03}] {:>7} {:<16} ",
        ts / 1_000_000_000,
        ts % 1_000_000_000,
        cpu,
        pid,
        Esc(comm)
    );
}

/// A sample is perf's cpu-clock event; a stack after an event is ftrace's.
fn stack_event_name(k: &crate::model::StackEvent) -> &'static str {
    if k.sampled {
        "perf:cpu-clock"
    } else {
        "ftrace:kernel_stack"
    }
}

/// An integer field as `trace-cmd report` prints it: an address in hex
/// (`%p`, `%ps`, `0x%lx` in the kernel's print formats), a `dev_t` as
/// MAJ,MIN (`%d,%d` of MAJOR and MINOR), anything else in decimal. Binary
/// traces give only the field's name and bytes, so the names decide.
#[derive(Debug, PartialEq)]
enum Shown {
    Plain(i64),
    Address(u64),
    Dev(crate::model::Dev),
}

impl Shown {
    fn of(name: &str, v: i64) -> Shown {
        /// Fields the kernel's tracepoints declare as pointers or code
        /// addresses (workqueue `work`, `ftrace_print`'s `ip`, kmem's
        /// `call_site` and `ptr`, timers, …).
        const ADDRESSES: [&str; 16] = [
            "ip",
            "parent_ip",
            "ret_ip",
            "call_site",
            "caller",
            "ptr",
            "addr",
            "address",
            "work",
            "function",
            "timer",
            "hrtimer",
            "skbaddr",
            "location",
            "handler",
            "napi",
        ];
        if ADDRESSES.contains(&name) {
            return Shown::Address(v as u64);
        }
        // A dev_t in the kernel's encoding (MINORBITS 20), as block events.
        if name == "dev" && (0..=u32::MAX as i64).contains(&v) {
            return Shown::Dev(crate::model::Dev(v as u32));
        }
        Shown::Plain(v)
    }
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shown::Plain(v) => write!(f, "{v}"),
            Shown::Address(a) => write!(f, "{a:#x}"),
            Shown::Dev(d) => write!(f, "{d}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Shown;

    #[test]
    fn addresses_in_hex_and_devices_as_maj_min_as_trace_cmd_prints_them() {
        // ftrace_print's ip, sign-extended from the record.
        assert_eq!(
            Shown::of("ip", -2125887142).to_string(),
            "0xffffffff8149895a"
        );
        assert_eq!(
            Shown::of("work", -131365202658440).to_string(),
            "0xffff888627c27b78"
        );
        assert_eq!(Shown::of("dev", 266338304).to_string(), "254,0");
        assert_eq!(Shown::of("dev", 7 << 20).to_string(), "7,0");
        assert_eq!(Shown::of("ino", 3974010).to_string(), "3974010");
        assert_eq!(Shown::of("cpu", -1).to_string(), "-1");
    }
}
