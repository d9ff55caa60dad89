//! The snapshot's ext4 journal size, read from the superblock, equals what
//! `dumpe2fs -h` prints for file systems mkfs.ext4 made here (4 KiB and
//! 1 KiB blocks, small and large journals, in image files: no device).

use crate::common::*;
use iosleuth::testing::ext4_journal;
use std::process::Command;

#[test]
#[ignore = "needs mkfs.ext4 and dumpe2fs (scripts/test installs e2fsprogs)"]
fn the_journal_size_read_from_the_superblock_is_dumpe2fs_s() {
    need_programs(&["mkfs.ext4", "dumpe2fs"]);
    let dir = tempdir();
    for (block, journal_mib, fs_mib) in [
        (4096, 4, 64),
        (4096, 64, 256),
        (1024, 1, 32),
        (1024, 16, 128),
    ] {
        let img = dir.path().join(format!("ext4-{block}-{journal_mib}.img"));
        std::fs::File::create(&img)
            .unwrap()
            .set_len(fs_mib << 20)
            .unwrap();
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-b", &block.to_string(), "-J"])
            .arg(format!("size={journal_mib}"))
            .arg(&img));
        let out = Command::new("dumpe2fs")
            .args(["-h"])
            .arg(&img)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let field = |key: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or_else(|| panic!("no {key} in dumpe2fs -h:\n{text}"))
        };
        let (journal, bs) = ext4_journal(&img).unwrap();
        assert_eq!(bs, field("Block size:"), "{}", img.display());
        assert_eq!(
            journal,
            field("Total journal blocks:") * bs,
            "{}",
            img.display()
        );
        assert_eq!(journal, journal_mib << 20);
    }
    let plain = dir.path().join("not-ext4.img");
    std::fs::write(&plain, vec![0u8; 4096]).unwrap();
    assert_eq!(ext4_journal(&plain).unwrap_err(), "no ext4 superblock");
}
