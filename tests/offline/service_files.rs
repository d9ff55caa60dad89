//! contrib/'s systemd unit for `watch`, its drop-in for remote scraping and
//! its logrotate file: the drop-in's command is the unit's with `--listen`
//! added, every flag either passes is one `watch --help` lists, and the
//! logrotate file rotates the unit's `--log` and reloads that unit.

use crate::common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;

const UNIT: &str = "contrib/iosleuth-watch.service";
const DROP_IN: &str = "contrib/iosleuth-watch.service.d/listen.conf";
const LOGROTATE: &str = "contrib/iosleuth-watch.logrotate";

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The unit's name, as `systemctl` takes it: the file's name.
fn unit_name() -> &'static str {
    UNIT.rsplit('/').next().unwrap()
}

/// `(section, key, value)` of a unit file, in order: comments dropped and
/// backslash continuations joined, as systemd reads them.
fn settings(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut pending = String::new();
    for raw in text.lines() {
        let line = raw.trim();
        if pending.is_empty() && (line.starts_with('#') || line.starts_with(';')) {
            continue;
        }
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        let line = std::mem::take(&mut pending) + line;
        if line.is_empty() {
            continue;
        }
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = s.to_string();
        } else if let Some((k, v)) = line.split_once('=') {
            out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
        } else {
            panic!("not a setting: {line:?}");
        }
    }
    out
}

/// The values `key` takes in `[Service]`, in order.
fn service(text: &str, key: &str) -> Vec<String> {
    settings(text)
        .into_iter()
        .filter(|(s, k, _)| s == "Service" && k == key)
        .map(|(_, _, v)| v)
        .collect()
}

fn words(cmd: &str) -> Vec<String> {
    cmd.split_whitespace().map(str::to_string).collect()
}

/// The unit's one ExecStart, as words.
fn unit_exec_start() -> Vec<String> {
    let starts = service(&read(UNIT), "ExecStart");
    assert_eq!(starts.len(), 1, "{UNIT}: one ExecStart, not {starts:?}");
    assert!(!starts[0].is_empty(), "{UNIT}: an empty ExecStart");
    words(&starts[0])
}

/// The drop-in's ExecStart, as words: it must first clear the unit's (a
/// simple service takes one ExecStart; without `ExecStart=` systemd
/// refuses the unit).
fn drop_in_exec_start() -> Vec<String> {
    let starts = service(&read(DROP_IN), "ExecStart");
    assert_eq!(
        starts.len(),
        2,
        "{DROP_IN}: `ExecStart=` then one ExecStart, not {starts:?}"
    );
    assert_eq!(
        starts[0], "",
        "{DROP_IN}: the first ExecStart must be empty"
    );
    words(&starts[1])
}

/// The value of `--flag VALUE` (or `--flag=VALUE`) in a command's words.
fn flag_value(cmd: &[String], flag: &str) -> Option<String> {
    cmd.iter().enumerate().find_map(|(i, w)| {
        if w == flag {
            cmd.get(i + 1).cloned()
        } else {
            w.strip_prefix(flag)?.strip_prefix('=').map(str::to_string)
        }
    })
}

/// `iosleuth watch --help`: its option lines, e.g. `  -q, --quiet`.
fn watch_help() -> String {
    let o = common::iosleuth()
        .args(["watch", "--help"])
        .output()
        .unwrap();
    assert!(o.status.success(), "watch --help: {}", o.status);
    String::from_utf8(o.stdout).unwrap()
}

/// The long flags `watch --help` lists.
fn watch_flags(help: &str) -> BTreeSet<String> {
    help.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with('-'))
        .flat_map(|l| l.split_whitespace())
        .map(|w| w.trim_end_matches(','))
        .filter(|w| w.starts_with("--"))
        .map(str::to_string)
        .collect()
}

/// `--listen`'s default, from `watch --help` (`[default: ADDR:PORT]`).
fn default_listen(help: &str) -> SocketAddr {
    let after = help
        .split_once("--listen")
        .expect("--help lists --listen")
        .1;
    let def = after
        .split_once("[default: ")
        .and_then(|(_, r)| r.split_once(']'))
        .expect("--listen has a default")
        .0;
    def.parse().unwrap()
}

#[test]
fn the_drop_in_runs_the_units_command_with_listen_added() {
    let unit = unit_exec_start();
    let drop_in = drop_in_exec_start();
    assert!(
        flag_value(&unit, "--listen").is_none(),
        "{UNIT}: listens on the default (localhost); the drop-in widens it"
    );
    let n = unit.len();
    assert_eq!(
        drop_in.get(..n),
        Some(&unit[..]),
        "{DROP_IN}: ExecStart must begin with {UNIT}'s"
    );
    assert_eq!(
        drop_in.get(n),
        Some(&"--listen".to_string()),
        "{DROP_IN}: the unit's ExecStart, then --listen ADDR:PORT, nothing else: {drop_in:?}"
    );
    assert_eq!(drop_in.len(), n + 2, "{DROP_IN}: {drop_in:?}");
    let addr: SocketAddr = drop_in[n + 1]
        .parse()
        .unwrap_or_else(|e| panic!("{DROP_IN}: --listen {}: {e}", drop_in[n + 1]));
    // Only the address changes: the scrape configs in docs/WATCH.md name
    // the default port.
    assert_eq!(
        addr.port(),
        default_listen(&watch_help()).port(),
        "{DROP_IN}: --listen keeps the default port"
    );
}

#[test]
fn every_flag_of_the_service_files_is_one_watch_help_lists() {
    let known = watch_flags(&watch_help());
    assert!(
        known.contains("--listen") && known.contains("--log"),
        "{known:?}"
    );
    for (file, cmd) in [(UNIT, unit_exec_start()), (DROP_IN, drop_in_exec_start())] {
        assert!(
            cmd[0].ends_with("/iosleuth") && cmd.get(1).map(String::as_str) == Some("watch"),
            "{file}: ExecStart runs `iosleuth watch` by its absolute path: {cmd:?}"
        );
        for w in cmd.iter().filter(|w| w.starts_with("--")) {
            let flag = w.split('=').next().unwrap();
            assert!(
                known.contains(flag),
                "{file}: {flag} is not an option of `iosleuth watch` ({known:?})"
            );
        }
    }
}

#[test]
fn logrotate_rotates_the_units_log_and_reloads_the_unit() {
    let unit_text = read(UNIT);
    let unit = unit_exec_start();
    let log = flag_value(&unit, "--log").expect("the unit gives --log");
    let (log_dir, log_name) = log.rsplit_once('/').unwrap();
    // systemd makes the log directory (ProtectSystem=strict leaves it the
    // only writable place under /var/log).
    assert_eq!(
        service(&unit_text, "LogsDirectory"),
        vec![log_dir.strip_prefix("/var/log/").unwrap().to_string()],
        "{UNIT}: LogsDirectory= is --log's directory"
    );

    let text = read(LOGROTATE);
    let code: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let head = code
        .iter()
        .find_map(|l| l.strip_suffix('{'))
        .expect("a `PATTERN {` block");
    let patterns: Vec<&str> = head.split_whitespace().collect();
    assert!(
        patterns.iter().any(|p| {
            let (dir, name) = p.rsplit_once('/').unwrap();
            let matches = match name.strip_prefix('*') {
                Some(tail) => log_name.ends_with(tail),
                None => name == log_name,
            };
            dir == log_dir && matches
        }),
        "{LOGROTATE}: {patterns:?} do not cover the unit's --log {log}"
    );

    let script: Vec<&str> = code
        .iter()
        .skip_while(|l| **l != "postrotate")
        .skip(1)
        .take_while(|l| **l != "endscript")
        .copied()
        .collect();
    let name = unit_name();
    let reload = format!("systemctl reload {name}");
    let hup = format!("systemctl kill -s HUP {name}");
    assert!(
        script
            .iter()
            .any(|l| l.contains(&reload) || l.contains(&hup)),
        "{LOGROTATE}: the postrotate must reload {name} (SIGHUP reopens --log): {script:?}"
    );
    if script.iter().any(|l| l.contains(&reload)) {
        assert_eq!(
            service(&unit_text, "ExecReload"),
            vec!["/bin/kill -HUP $MAINPID".to_string()],
            "{UNIT}: reloading must send SIGHUP"
        );
    }
}
