//! The BPF object that `record --light` loads is committed (a plain
//! `cargo build` needs no clang); this checks that it is what its
//! committed source builds to, with the compiler the test command installs.

use crate::common;

use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "needs clang-14: scripts/test installs it and runs it"]
fn committed_bpf_object_is_built_from_its_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    common::need_programs(&["clang-14"]);
    let dir = common::tempdir();
    let out = dir.path().join("light.bpf.o");
    let st = Command::new(root.join("bpf/build.sh"))
        .arg(&out)
        .status()
        .unwrap();
    assert!(st.success(), "bpf/build.sh failed");
    let built = std::fs::read(&out).unwrap();
    let committed = std::fs::read(root.join("bpf/light.bpf.o")).unwrap();
    let version = String::from_utf8(
        Command::new("clang-14")
            .arg("--version")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        built == committed,
        "bpf/light.bpf.o differs from what bpf/light.bpf.c builds to with {}: run bpf/build.sh and commit the object (the committed one was built with Debian clang 14.0.6)",
        version.lines().next().unwrap_or("?")
    );
}
