//! `record --func`: how each kernel function asked for will be seen,
//! decided before the workload starts (`analyze::functions` reads it back).
//!
//! A function with entry and return tracepoints of its own is timed call
//! by call through them. Any other function is seen where its threads
//! block, through the off-CPU stacks. Kprobes (`kprobe_events`, fprobe)
//! and BPF fentry would see every call of any function, but they leave
//! global state behind a killed recorder and this kernel offers neither
//! (no CONFIG_KPROBE_EVENTS; BPF tracing programs and the function tracer
//! are refused), so they are not used.

use crate::model::function_brackets::brackets_of;
use crate::symbolize::kallsyms::is_function_type;
use std::path::Path;

/// How one function is measured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Entry and return tracepoints (`ext4/…` as the recorder names them).
    Calls { entry: String, exit: String },
    /// Off-CPU stacks: the time threads blocked with it on their stack.
    Blocked,
}

/// Each function's plan, or why one cannot be measured. `tracefs` is the
/// tracefs root (for the events), `kallsyms` the text of /proc/kallsyms.
pub fn plan(
    functions: &[String],
    tracefs: &Path,
    kallsyms: &str,
) -> Result<Vec<(String, Plan)>, String> {
    let mut out: Vec<(String, Plan)> = Vec::new();
    for name in functions {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        {
            return Err(format!("--func: {name:?} is not a kernel function name"));
        }
        if out.iter().any(|(n, _)| n == name) {
            continue;
        }
        if let Some((entry, exit)) = brackets_of(name) {
            let has = |e: &str| tracefs.join("events").join(e).is_dir();
            if has(&entry) && has(&exit) {
                out.push((name.clone(), Plan::Calls { entry, exit }));
                continue;
            }
        }
        if !is_text_symbol(kallsyms, name) {
            return Err(format!(
                "--func: no kernel function {name:?} in /proc/kallsyms (misspelt, inlined into its callers, or in a module that is not loaded)"
            ));
        }
        out.push((name.clone(), Plan::Blocked));
    }
    Ok(out)
}

/// Whether /proc/kallsyms lists `name` as a function (of the kernel or of
/// a loaded module: `addr t name [module]`).
fn is_text_symbol(kallsyms: &str, name: &str) -> bool {
    kallsyms.lines().any(|l| {
        let mut w = l.split_whitespace().skip(1);
        w.next().is_some_and(is_function_type) && w.next() == Some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81400000 T add_transaction_credits
ffffffff81400100 t ext4_sync_file
ffffffff81500000 D jiffies
ffffffffc0001000 t nvme_queue_rq\t[nvme]
";

    #[test]
    fn tracepoints_where_the_function_has_them_else_its_blocked_time() {
        let dir = tempfile::tempdir().unwrap();
        for e in ["ext4_sync_file_enter", "ext4_sync_file_exit"] {
            std::fs::create_dir_all(dir.path().join("events/ext4").join(e)).unwrap();
        }
        let want: Vec<String> = ["ext4_sync_file", "add_transaction_credits", "nvme_queue_rq"]
            .map(String::from)
            .to_vec();
        let p = plan(&want, dir.path(), KALLSYMS).unwrap();
        assert_eq!(
            p[0].1,
            Plan::Calls {
                entry: "ext4/ext4_sync_file_enter".into(),
                exit: "ext4/ext4_sync_file_exit".into()
            }
        );
        assert_eq!(p[1].1, Plan::Blocked);
        assert_eq!(p[2].1, Plan::Blocked);
        // Without the tracepoints, a bracketed function falls back.
        let empty = tempfile::tempdir().unwrap();
        let p = plan(&want[..1], empty.path(), KALLSYMS).unwrap();
        assert_eq!(p[0].1, Plan::Blocked);
    }

    #[test]
    fn unknown_and_data_symbols_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["no_such_function", "jiffies"] {
            let e = plan(&[bad.to_string()], dir.path(), KALLSYMS).unwrap_err();
            assert!(e.contains(bad) && e.contains("kallsyms"), "{e}");
        }
        let e = plan(&["a;rm".to_string()], dir.path(), KALLSYMS).unwrap_err();
        assert!(e.contains("not a kernel function name"), "{e}");
    }
}
