//! What the kernel keeps about each loaded program (`bpf_prog_info`), read
//! with BPF_OBJ_GET_INFO_BY_FD: its runs and run time (kept only while
//! `kernel.bpf_stats_enabled`), and the runs it skipped. A raw
//! tracepoint's program does not run again on a CPU where it is already
//! running (kernel/trace/bpf_trace.c, `__bpf_trace_run`: an event from an
//! interrupt that came in while it ran is not seen, and counted in
//! `recursion_misses`). aya 0.14 does not expose that counter.

use std::os::fd::{AsFd, AsRawFd};

/// BPF_OBJ_GET_INFO_BY_FD (include/uapi/linux/bpf.h, enum bpf_cmd).
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;

/// Offsets in `struct bpf_prog_info` (include/uapi/linux/bpf.h; the
/// fields are 8-byte aligned and have not moved since they were added in
/// Linux 5.1 and 5.12). The test below checks them against the installed
/// header.
const RUN_TIME_NS_AT: usize = 192;
const RUN_CNT_AT: usize = 200;
const RECURSION_MISSES_AT: usize = 208;
/// Enough of the struct for the fields read: the kernel fills what it
/// has up to this length (and zero past what it has).
const INFO_LEN: usize = 216;

/// The kernel's figures for one program.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunFigures {
    pub runs: u64,
    pub run_time_ns: u64,
    /// Runs the kernel skipped: the program was already running on that CPU.
    pub missed: u64,
}

#[repr(C)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The figures of the program behind `fd`; None when the kernel does not
/// answer (then they are unknown, not 0).
pub fn run_figures(fd: impl AsFd) -> Option<RunFigures> {
    let mut info = [0u8; INFO_LEN];
    let mut attr = InfoAttr {
        bpf_fd: fd.as_fd().as_raw_fd() as u32,
        info_len: INFO_LEN as u32,
        info: info.as_mut_ptr() as u64,
    };
    // SAFETY: `attr` points at `info`, INFO_LEN bytes the kernel writes at
    // most `info_len` of; both outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr,
            std::mem::size_of::<InfoAttr>(),
        )
    };
    if r != 0 || (attr.info_len as usize) < INFO_LEN {
        return None;
    }
    let at = |i: usize| u64::from_ne_bytes(info[i..i + 8].try_into().expect("8 bytes"));
    Some(RunFigures {
        runs: at(RUN_CNT_AT),
        run_time_ns: at(RUN_TIME_NS_AT),
        missed: at(RECURSION_MISSES_AT),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The offsets against the kernel's header, as the C compiler lays it
    /// out (linux-libc-dev and clang are installed by the test command).
    #[test]
    #[ignore = "needs clang-14 and linux-libc-dev (scripts/test installs them)"]
    fn offsets_are_the_headers() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("o.c");
        std::fs::write(
            &src,
            "#include <stdio.h>\n#include <stddef.h>\n#include <linux/bpf.h>\n\
             int main(void) { printf(\"%zu %zu %zu\\n\", offsetof(struct bpf_prog_info, run_time_ns), \
             offsetof(struct bpf_prog_info, run_cnt), offsetof(struct bpf_prog_info, recursion_misses)); return 0; }\n",
        )
        .unwrap();
        let exe = dir.path().join("o");
        let cc = std::process::Command::new("clang-14")
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .expect("test cannot run: missing clang-14 (scripts/test installs it)");
        assert!(
            cc.status.success(),
            "test cannot run: {}",
            String::from_utf8_lossy(&cc.stderr)
        );
        let out = std::process::Command::new(&exe).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            format!("{RUN_TIME_NS_AT} {RUN_CNT_AT} {RECURSION_MISSES_AT}")
        );
    }
}
