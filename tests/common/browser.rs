//! Pages loaded in headless Chromium (the test command installs it): the
//! DOM as the browser built it, its console messages, and a screenshot.

use std::path::Path;
use std::process::Command;

/// The browser; a missing one fails the test, naming it (tests that use it
/// are `#[ignore]`d under plain `cargo test`).
pub fn chromium() -> &'static str {
    let found = Command::new("chromium")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "test cannot run: chromium is missing (scripts/test installs it)"
    );
    "chromium"
}

/// The page as the browser built it, and its console messages.
pub struct Loaded {
    pub dom: String,
    pub console: Vec<String>,
}

pub fn load(browser: &str, page: &Path, screenshot: &Path) -> Loaded {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--virtual-time-budget=5000",
    ];
    let o = Command::new(browser)
        .args(common)
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(&url)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let console = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    let shot = Command::new(browser)
        .args(common)
        .arg("--window-size=1100,2000")
        .arg(format!("--screenshot={}", screenshot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(shot.status.success(), "{shot:?}");
    let png = std::fs::read(screenshot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000);
    Loaded {
        dom: String::from_utf8(o.stdout).unwrap(),
        console,
    }
}
