//! Turns the printed payload of a non-block event into fields:
//! `prev_comm=fio prev_pid=12 ... ==> next_comm=swapper/0 ...` (most
//! events), `fd: 0x00000003, buf: 0x...` (syscall entries as perf and
//! trace-cmd print them), `sys_fsync(fd: 3)` / `sys_fsync -> 0x0` (syscalls
//! as ftrace prints them) and a bare `0x0` (syscall exits elsewhere).

use crate::model::fields::value_of_text;
use crate::model::{FieldName, Fields, Tracepoint, Value};

/// Room for this many fields first (sched_switch has 7; most have fewer).
const TYPICAL_FIELDS: usize = 8;

/// Where a `key=` starts: at the start or after a space, `[` or `(`, a
/// name of letters, digits and `_`, then `=`.
fn key_at(p: &[u8], i: usize) -> Option<usize> {
    if i > 0 && !matches!(p[i - 1], b' ' | b'\t' | b'[' | b'(' | b',') {
        return None;
    }
    let first = *p.get(i)?;
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return None;
    }
    let mut j = i + 1;
    while j < p.len() && (p[j].is_ascii_alphanumeric() || p[j] == b'_') {
        j += 1;
    }
    (p.get(j) == Some(&b'=')).then_some(j)
}

fn clean_value(v: &[u8]) -> &str {
    let s = std::str::from_utf8(v).unwrap_or("").trim();
    // sched_switch's arrow belongs to no field; brackets and commas close
    // groups such as softirq's `[action=NET_RX]`.
    let s = s.strip_suffix("==>").unwrap_or(s).trim_end();
    let s = s.trim_end_matches([']', ')', ',', '[', ' ']);
    // Units: `runtime=53666 [ns]`.
    match s.find(" [") {
        Some(i) => &s[..i],
        None => s,
    }
}

/// Parses `payload` of the event `short_name`; `key` interns field names.
pub fn parse_payload(
    short_name: &str,
    payload: &[u8],
    key: &mut dyn FnMut(&[u8]) -> FieldName,
) -> Fields {
    let mut out = Fields::with_capacity(TYPICAL_FIELDS);
    let p = payload;
    if let Some(f) = sched_plugin_fields(short_name, p, key) {
        return f;
    }
    if memchr::memchr(b'=', p).is_some() {
        let mut starts = Vec::new();
        for i in 0..p.len() {
            if let Some(eq) = key_at(p, i) {
                starts.push((i, eq));
            }
        }
        for (n, &(k, eq)) in starts.iter().enumerate() {
            let end = starts.get(n + 1).map(|s| s.0).unwrap_or(p.len());
            let v = clean_value(&p[eq + 1..end]);
            out.push(key(&p[k..eq]), value_of_text(v));
        }
        return out;
    }
    // ext4 and jbd2: `dev 7,0 ino 12 parent 2 datasync 0`, key and value
    // by turns; the device as the kernel's dev_t, as in captures.
    if p.starts_with(b"dev ") {
        let text = std::str::from_utf8(p).unwrap_or("");
        let mut words = text.split_ascii_whitespace();
        while let (Some(k), Some(v)) = (words.next(), words.next()) {
            let value = match (k, crate::model::Dev::parse_bytes(v.as_bytes())) {
                ("dev", Some(d)) => Value::Int(d.0 as i64),
                _ => value_of_text(v),
            };
            out.push(key(k.as_bytes()), value);
        }
        return out;
    }
    // workqueue_execute_start/end, activate_work: `work struct 0000…: function f`.
    if let Some(rest) = p.strip_prefix(b"work struct ") {
        let rest = std::str::from_utf8(rest).unwrap_or("");
        let (work, func) = rest.split_once(':').unwrap_or((rest, ""));
        out.push(key(b"work"), value_of_text(&format!("0x{}", work.trim())));
        if let Some(f) = func.trim().strip_prefix("function ") {
            out.push(key(b"function"), value_of_text(f.trim()));
        }
        return out;
    }
    let is_exit = short_name.starts_with("sys_exit");
    // `name: value, name: value` (syscall entries).
    if !is_exit && memchr::memmem::find(p, b": ").is_some() {
        for part in p.split(|&c| c == b',') {
            let part = std::str::from_utf8(part).unwrap_or("").trim();
            if let Some((k, v)) = part.split_once(':') {
                out.push(key(k.trim().as_bytes()), value_of_text(v.trim()));
            }
        }
        return out;
    }
    if is_exit {
        let s = std::str::from_utf8(p).unwrap_or("").trim();
        if !s.is_empty() {
            out.push(key(b"ret"), value_of_text(s));
        }
    }
    out
}

/// `comm:pid [prio]` from the end of `t` (a comm may hold `:` and spaces).
fn task_at_end(t: &str) -> Option<(&str, &str, &str)> {
    let (task, prio) = t.trim_end().strip_suffix(']')?.rsplit_once(" [")?;
    let (comm, pid) = task.rsplit_once(':')?;
    let digits = |s: &str| {
        !s.is_empty()
            && s.trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
    };
    (digits(pid) && digits(prio)).then_some((comm.trim_start(), pid, prio))
}

/// What libtraceevent's sched_switch plugin prints in `trace-cmd report`
/// (the default, without `-N`): `prev:pid [prio] S ==> next:pid [prio]`
/// for sched_switch, `comm:pid [prio] [success=1 ]CPU:003` for
/// sched_wakeup and sched_waking. Named as the tracepoint's fields.
fn sched_plugin_fields(
    short_name: &str,
    p: &[u8],
    key: &mut dyn FnMut(&[u8]) -> FieldName,
) -> Option<Fields> {
    let text = std::str::from_utf8(p).ok()?.trim();
    let mut out = Fields::with_capacity(TYPICAL_FIELDS);
    match Tracepoint::of(short_name) {
        Tracepoint::SchedSwitch => {
            let (prev, next) = text.split_once(" ==> ")?;
            let (prev, state) = prev.trim_end().rsplit_once(' ')?;
            let (pc, pp, pprio) = task_at_end(prev)?;
            let (nc, np, nprio) = task_at_end(next)?;
            for (k, v) in [
                ("prev_comm", pc),
                ("prev_pid", pp),
                ("prev_prio", pprio),
                ("prev_state", state),
                ("next_comm", nc),
                ("next_pid", np),
                ("next_prio", nprio),
            ] {
                out.push(key(k.as_bytes()), value_of_text(v));
            }
        }
        k if k.is_wakeup() => {
            let (task, cpu) = text.rsplit_once(" CPU:")?;
            let task = task.trim_end();
            let task = match task.rsplit_once(" success=") {
                Some((t, _)) => t,
                None => task,
            };
            let (comm, pid, prio) = task_at_end(task)?;
            let cpu = cpu.trim_start_matches('0');
            for (k, v) in [
                ("comm", comm),
                ("pid", pid),
                ("prio", prio),
                ("target_cpu", if cpu.is_empty() { "0" } else { cpu }),
            ] {
                out.push(key(k.as_bytes()), value_of_text(v));
            }
        }
        _ => return None,
    }
    Some(out)
}

/// ftrace's own syscall lines: `sys_fsync(fd: 3)` is the entry of fsync,
/// `sys_fsync -> 0x0` its exit. Returns the tracepoint name
/// (`sys_enter_fsync` / `sys_exit_fsync`) and the fields.
pub fn parse_ftrace_syscall(
    rest: &[u8],
    key: &mut dyn FnMut(&[u8]) -> FieldName,
) -> Option<(String, Fields)> {
    let rest = std::str::from_utf8(rest).ok()?.trim();
    let call = rest.strip_prefix("sys_")?;
    let name_end = call.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
    let (name, after) = call.split_at(name_end);
    if let Some(args) = after.strip_prefix('(') {
        let args = args.strip_suffix(')')?;
        let mut f = Fields::with_capacity(TYPICAL_FIELDS);
        for part in args.split(", ").filter(|s| !s.is_empty()) {
            let (k, v) = part.split_once(": ")?;
            f.push(key(k.as_bytes()), value_of_text(v));
        }
        return Some((format!("sys_enter_{name}"), f));
    }
    let ret = after.trim_start().strip_prefix("->")?.trim();
    let mut f = Fields::with_capacity(TYPICAL_FIELDS);
    f.push(key(b"ret"), value_of_text(ret));
    Some((format!("sys_exit_{name}"), f))
}

#[cfg(test)]
mod tests {
    use crate::model::tracepoint::Field;

    /// A field no analysis reads, by its name.
    fn int(f: &Fields, name: &str) -> Option<i64> {
        f.named(name).and_then(|v| match v {
            Value::Int(n) => Some(*n),
            Value::Str(s) => crate::model::fields::parse_int(s),
        })
    }
    use super::*;
    use crate::model::Value;

    fn k(b: &[u8]) -> FieldName {
        FieldName::new(String::from_utf8_lossy(b).into())
    }

    #[test]
    fn ext4_and_jbd2_pairs_with_the_device_as_dev_t() {
        let f = parse_payload(
            "jbd2_run_stats",
            b"dev 259,3 tid 5461 wait 0 request_delay 0 running 5 locked 0 flushing 0 logging 4 handle_count 12 blocks 3 blocks_logged 4",
            &mut k,
        );
        assert_eq!(f.int(Field::Dev), Some((259 << 20) | 3));
        assert_eq!(int(&f, "tid"), Some(5461));
        assert_eq!(int(&f, "logging"), Some(4));
        assert_eq!(f.int(Field::BlocksLogged), Some(4));
        let f = parse_payload(
            "ext4_sync_file_enter",
            b"dev 7,0 ino 12 parent 2 datasync 0 ",
            &mut k,
        );
        assert_eq!(f.int(Field::Dev), Some(7 << 20));
        assert_eq!(f.int(Field::Ino), Some(12));
        assert_eq!(f.int(Field::Datasync), Some(0));
    }

    #[test]
    fn sched_switch_with_arrow_and_spaces_in_comm() {
        let f = parse_payload(
            "sched_switch",
            b"prev_comm=Web Content prev_pid=89 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120",
            &mut k,
        );
        assert_eq!(f.str(Field::PrevComm), Some("Web Content"));
        assert_eq!(f.int(Field::PrevPid), Some(89));
        assert_eq!(f.str(Field::PrevState), Some("S"));
        assert_eq!(f.str(Field::NextComm), Some("swapper/0"));
        assert_eq!(f.int(Field::NextPrio), Some(120));
    }

    #[test]
    fn softirq_and_syscalls() {
        let f = parse_payload("softirq_entry", b"vec=4 [action=BLOCK]", &mut k);
        assert_eq!(f.int(Field::Vec), Some(4));
        assert_eq!(
            f.named("action").map(|v| v.to_string()).as_deref(),
            Some("BLOCK")
        );
        let f = parse_payload(
            "sched_stat_runtime",
            b"comm=a b pid=89 runtime=53666 [ns] vruntime=4 [ns]",
            &mut k,
        );
        assert_eq!(
            (f.str(Field::Comm), int(&f, "runtime"), int(&f, "vruntime")),
            (Some("a b"), Some(53666), Some(4))
        );
        let f = parse_payload(
            "workqueue_execute_start",
            b"work struct 00000000cbdcc894: function ext4_end_io_rsv_work",
            &mut k,
        );
        assert_eq!(f.int(Field::Work), Some(0xcbdcc894));
        assert_eq!(f.str(Field::Function), Some("ext4_end_io_rsv_work"));
        let f = parse_payload("sys_enter_fsync", b"fd: 0x00000003", &mut k);
        assert_eq!(int(&f, "fd"), Some(3));
        let f = parse_payload("sys_exit_fsync", b"0xfffffffffffffffb", &mut k);
        assert_eq!(f.int(Field::Ret), Some(-5));
        let (n, f) = parse_ftrace_syscall(
            b"sys_pwrite64(fd: 3, buf: 0x560b9af31dd0, count: 0x2000, pos: 0)",
            &mut k,
        )
        .unwrap();
        assert_eq!(n, "sys_enter_pwrite64");
        assert_eq!(int(&f, "fd"), Some(3));
        assert_eq!(int(&f, "count"), Some(0x2000));
        let (n, f) = parse_ftrace_syscall(b"sys_fsync -> 0x0", &mut k).unwrap();
        assert_eq!(
            (n.as_str(), f.get(Field::Ret)),
            ("sys_exit_fsync", Some(&Value::Int(0)))
        );
    }
}

#[cfg(test)]
mod sched_plugin_tests {
    use super::*;
    use crate::model::tracepoint::Field;

    fn fields(name: &str, text: &str) -> Fields {
        parse_payload(name, text.as_bytes(), &mut |k| {
            FieldName::from(std::str::from_utf8(k).unwrap())
        })
    }

    #[test]
    fn trace_cmd_sched_switch_plugin_text_gives_the_tracepoint_fields() {
        let f = fields(
            "sched_switch",
            "kworker/u8:1:29 [120] R+ ==> fio 2:7889 [100]",
        );
        assert_eq!(f.str(Field::PrevComm), Some("kworker/u8:1"));
        assert_eq!(f.int(Field::PrevPid), Some(29));
        assert_eq!(f.int(Field::PrevPrio), Some(120));
        assert_eq!(f.str(Field::PrevState), Some("R+"));
        assert_eq!(f.str(Field::NextComm), Some("fio 2"));
        assert_eq!(f.int(Field::NextPid), Some(7889));
        assert_eq!(f.int(Field::NextPrio), Some(100));
    }

    #[test]
    fn trace_cmd_sched_wakeup_plugin_text_gives_the_tracepoint_fields() {
        for text in ["dd:29696 [120] CPU:001", "dd:29696 [120] success=1 CPU:001"] {
            let f = fields("sched_waking", text);
            assert_eq!(f.str(Field::Comm), Some("dd"), "{text}");
            assert_eq!(f.int(Field::Pid), Some(29696));
            assert_eq!(f.int(Field::TargetCpu), Some(1));
        }
        // The kernel's own format still parses as key=value.
        let f = fields("sched_wakeup", "comm=dd pid=29696 prio=120 target_cpu=001");
        assert_eq!(f.int(Field::Pid), Some(29696));
    }
}
