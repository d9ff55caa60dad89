//! Progress on stderr for people waiting at a terminal, as cargo and
//! ripgrep's users expect: nothing when stderr is a file or a pipe (logs,
//! CI, `2>&1 | less` stay clean), and cleared when done.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// A spinner with a message, shown only on a terminal.
pub struct Progress(Option<ProgressBar>);

/// Events read between two updates of the count shown.
const EVENTS_PER_UPDATE: u64 = 1 << 16;

impl Progress {
    pub fn new(message: &str) -> Progress {
        if !std::io::stderr().is_terminal() || crate::cli::quiet() {
            return Progress(None);
        }
        let bar = ProgressBar::new_spinner();
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} [{elapsed}]") {
            bar.set_style(style);
        }
        bar.set_message(message.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress(Some(bar))
    }

    pub fn set(&self, message: String) {
        if let Some(b) = &self.0 {
            b.set_message(message);
        }
    }

    /// Counts `n` more events read: the message says how many, now and
    /// then.
    pub fn add_events(&self, n: u64) {
        let Some(b) = &self.0 else {
            return;
        };
        let before = b.position();
        b.inc(n);
        if before / EVENTS_PER_UPDATE != (before + n) / EVENTS_PER_UPDATE {
            b.set_message(format!(
                "reading: {:.1} M events",
                (before + n) as f64 / 1e6
            ));
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
