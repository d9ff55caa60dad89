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
        if !std::io::stderr().is_terminal() {
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

    /// Counts events read: the message says how many, now and then.
    pub fn events<'a, I: Iterator + 'a>(&'a self, it: I) -> impl Iterator<Item = I::Item> + 'a {
        let mut n = 0u64;
        it.inspect(move |_| {
            n += 1;
            if n.is_multiple_of(EVENTS_PER_UPDATE) {
                self.set(format!("reading: {:.1} M events", n as f64 / 1e6));
            }
        })
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = &self.0 {
            b.finish_and_clear();
        }
    }
}
