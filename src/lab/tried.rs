//! `lab run --try`: the lab proves its own advice. While a scenario's bad
//! setup still stands, `iosleuth try` applies the remedy of the bad run's
//! expected finding and measures the scenario's own workload in
//! interleaved rounds (recorded as the scenario records, so the finding is
//! judged in each round); the scenario's line and the closing table say
//! what it measured.

use super::recording::Lab;
use super::run::Own;
use crate::trial::verdict::Change;
use std::path::PathBuf;
use std::process::Command;

/// Rounds a side: `try`'s default.
const ROUNDS: &str = "5";

impl Lab {
    fn tried_json(&self) -> PathBuf {
        self.dir.join("try.json")
    }
    fn tried_stderr(&self) -> PathBuf {
        self.dir.join("try.stderr")
    }

    /// Runs `iosleuth try` on the bad capture with the bad run's workload
    /// (`script`, recorded with `events`; with `sides`, a script that sets
    /// up each side itself); what it says goes beside the scenario's
    /// captures.
    pub(super) fn try_remedy(&self, events: &str, script: &str, sides: Option<&Sides>) {
        let mut c = Command::new(&self.exe);
        c.arg("try").arg(self.bad());
        let own = match self.expect {
            Some(id) => Own::Finding(id),
            None => self.own_finding(),
        };
        match own {
            Own::Finding(id) => {
                c.args(["--finding", id]);
            }
            Own::OthersOnly => {
                let said = format!(
                    "iosleuth: {}: no finding about the scenario, so no setting to try (its findings are about other work on this machine, whose processes the lab leaves alone)\n",
                    self.bad().display()
                );
                let _ = std::fs::write(self.tried_stderr(), said);
                let _ = std::fs::remove_file(self.tried_json());
                return;
            }
            Own::NoFinding => {}
        }
        if let Some(s) = sides {
            c.arg("--workload-applies");
            if let Some(m) = s.metric {
                c.args(["--metric", m]);
            }
        }
        c.args(["--apply", "--rounds", ROUNDS, "--format", "json", "--keep"])
            .arg(self.dir.join("try"));
        if !self.light {
            c.args(["--full", "--events", events]);
        }
        c.args(["--", "sh", "-c", script])
            .env("IOSLEUTH", &self.exe)
            .stdout(
                std::fs::File::create(self.tried_json())
                    .map(std::process::Stdio::from)
                    .unwrap_or_else(|_| std::process::Stdio::null()),
            )
            .stderr(
                std::fs::File::create(self.tried_stderr())
                    .map(std::process::Stdio::from)
                    .unwrap_or_else(|_| std::process::Stdio::null()),
            );
        if let Err(e) = c.status() {
            let _ = std::fs::write(self.tried_stderr(), format!("cannot run try: {e}"));
        }
    }

    /// For a scenario that expects no finding (a healthy one): which of
    /// its bad run's findings is its own to try (see [`super::run::own`]).
    fn own_finding(&self) -> Own {
        match crate::pipeline::diagnosed(&self.bad(), &Default::default()) {
            Ok(run) => super::run::own(&run.findings, &super::run::Ours::of(self)),
            Err(_) => Own::NoFinding,
        }
    }
}

/// A `--try` whose workload sets up each side itself (IOSLEUTH_TRY_SIDE):
/// the candidate's on a device the lab remade with the remedy.
pub(super) struct Sides<'a> {
    pub script: &'a str,
    /// The scenario's own figure to judge by (`--metric`), when the
    /// workload's time cannot show the change.
    pub metric: Option<&'a str>,
}

/// What `try` measured for one scenario: a row of the closing table.
pub struct Tried {
    pub scenario: &'static str,
    pub rule: String,
    /// The knobs, `knob now -> tried`; or why there was no remedy.
    pub remedy: String,
    /// `-95.7 % (95 % CI -95.8..-94.0 %)`, or empty.
    pub effect: String,
    /// In how many rounds of each side the finding showed.
    pub finding: String,
    /// better, worse, no change, inconclusive; or "no remedy", "failed".
    pub verdict: String,
}

/// Reads what `try` left for the scenario.
pub fn tried(scenario: &'static str, lab: &Lab) -> Tried {
    let rule = lab.expect.unwrap_or("(healthy)").to_string();
    let json = std::fs::read_to_string(lab.tried_json()).unwrap_or_default();
    let stderr = std::fs::read_to_string(lab.tried_stderr()).unwrap_or_default();
    let said = stderr
        .lines()
        .rfind(|l| {
            !l.starts_with("iosleuth: try:")
                && !l.contains("capture in")
                && !l.contains("bytes of trace")
        })
        .unwrap_or("")
        .trim_start_matches("iosleuth: ")
        .to_string();
    let Ok(t) = serde_json::from_str::<serde_json::Value>(&json) else {
        let no_remedy = said.contains("not a setting")
            || said.contains("no finding has a remedy")
            || said.contains("cannot be applied to a running system")
            || said.contains("no finding ");
        return Tried {
            scenario,
            rule,
            remedy: short(&said),
            effect: String::new(),
            finding: String::new(),
            verdict: if no_remedy { "no remedy" } else { "failed" }.into(),
        };
    };
    // The knobs try changed, then those the workload's candidate side set
    // up itself (a remade file system).
    let plan = &t["plan"];
    let remedy = [&plan["changes"], &plan["by_workload"]]
        .iter()
        .filter_map(|l| l.as_array())
        .flatten()
        .map(|c| {
            format!(
                "{} {} -> {}",
                c["knob"].as_str().unwrap_or(""),
                c["now"].as_str().unwrap_or("unknown"),
                c["tried"].as_str().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let judged = t["judged_by"].as_str().unwrap_or("");
    let effect = t["changes"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["metric"] == judged))
        .and_then(|c| serde_json::from_value::<Change>(c.clone()).ok())
        .map(|c| crate::trial::report::effect(&c))
        .unwrap_or_default();
    let finding = match &t["finding"] {
        f if f.is_object() => format!(
            "{}/{} baseline, {}/{} candidate",
            f["baseline"], f["rounds"], f["candidate"], f["rounds"]
        ),
        _ => String::new(),
    };
    Tried {
        scenario,
        rule,
        remedy,
        effect,
        finding,
        verdict: t["verdict"].as_str().unwrap_or("?").replace('_', " "),
    }
}

/// Why `try` had nothing to apply, in a few words for the table.
fn short(said: &str) -> String {
    if let Some((_, why)) = said.split_once("cannot be applied to a running system: ") {
        return format!("not live: {}", why.split(", which").next().unwrap_or(why));
    }
    if said.contains("(it has no finding)") {
        return "no finding".into();
    }
    if said.contains("no setting to try") {
        return "no setting to try (the workaround changes the application, the device or other work)".into();
    }
    said.to_string()
}

/// The closing table of `lab run --try`.
pub fn table(rows: &[Tried]) -> String {
    let mut s = String::from("lab --try: each scenario's remedy measured on its own workload\n");
    for r in rows {
        s.push_str(&format!(
            "  {:<18} {:<22} {:<13} {}\n",
            r.scenario, r.rule, r.verdict, r.remedy
        ));
        if !r.effect.is_empty() {
            s.push_str(&format!("  {:<18} {:<22} {:<13} {}", "", "", "", r.effect));
            if !r.finding.is_empty() {
                s.push_str(&format!("; finding in {}", r.finding));
            }
            s.push('\n');
        }
    }
    s
}
