//! Driver events below the block layer (nvme, scsi, mmc) matched to the
//! requests they carry: lines written from the kernel's format
//! definitions (this VM has none of these drivers; case 4's real excerpt
//! is in seed_excerpts.rs).

use crate::common;

use common::*;

const FILE: &str = "tests/fixtures/driver-events.synthetic.txt";

#[test]
fn each_driver_splits_d2c_into_before_in_and_after_the_device() {
    let rep = json_report(&[FILE], &[]);
    let d = &rep["driver"];
    let dev = |name: &str| {
        d["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["device"] == name)
            .unwrap_or_else(|| panic!("{name}: {d}"))
            .clone()
    };
    // (device, driver, before, in, after) in µs, from the timestamps.
    for (name, driver, before, inside, after) in [
        ("259,0", "nvme", 101, 56, 33),
        ("259,1", "nvme", 10, 100, 10),
        ("8,0", "scsi", 14, 278, 8),
        ("179,0", "mmc", 30, 474, 46),
    ] {
        let x = dev(name);
        assert_eq!(x["driver"], driver);
        assert_eq!(x["commands"], 1, "{x}");
        let us = |k: &str| x[k]["max"].as_u64().unwrap() / 1000;
        assert_eq!(
            (us("before_device"), us("in_device"), us("after_device")),
            (before, inside, after),
            "{name}"
        );
        // The three parts are the request's D2C.
        let d2c = rep["devices"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["device"] == name)
            .unwrap()["d2c"]["max"]
            .as_u64()
            .unwrap();
        let sum: u64 = ["before_device", "in_device", "after_device"]
            .iter()
            .map(|k| x[*k]["max"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, d2c, "{name}");
    }
    // The 4096-byte-LBA read matched at slba x 8; the command at slba 1
    // has no request; the MMC status poll (CMD13) pairs nothing.
    assert_eq!(d["unmatched_commands"], 1);
    assert_eq!(d["ends_without_start"], 0);
    assert_eq!(d["slowest"][0]["command"], "cmd_opcode=25");
    assert_eq!(d["slowest"][0]["device_ns"], 474_000);
    assert!(
        rep["unknown_events"].as_object().unwrap().is_empty(),
        "{}",
        rep["unknown_events"]
    );
    let text = run(iosleuth().args(["report", FILE]));
    assert!(
        text.contains("8,0 sector 4717976 + 8 (WRITE_10): 0.278 ms in the device"),
        "{text}"
    );
}
