//! docs/RULES.md, rendered from the catalog itself: each rule's own
//! `looks_for`, `fires_when`, `stays_silent`, `needs` and `light_lacks`,
//! so the page cannot drift from what `report --explain` prints. A test
//! (tests/offline/rules_doc.rs) holds the committed page to this text.

use super::{catalog, Rule};
use std::fmt::Write;

/// The catalog as markdown, as docs/RULES.md holds it.
pub fn markdown() -> String {
    let mut s = String::from(
        "# The rule catalog\n\n\
         <!-- Generated from the rule catalog (src/diagnose/rules/): do not edit by hand.\n     \
         Regenerate with: IOSLEUTH_UPDATE_GOLDEN=1 cargo test --release --test offline rules_doc -->\n\n\
         Each rule names one root cause with this capture's numbers, why it causes the\n\
         symptom and what to try. Each is tested on committed real captures where it\n\
         fires and on one where a related symptom is present but not its cause.\n\
         `iosleuth report CAPTURE --explain ID` (or `all`) prints a rule's finding, or the\n\
         reason it did not fire. How findings are ranked, stacked devices and the\n\
         `unexplained` finding: [report.md](report.md#findings).\n\n\
         | id | looks for | light capture |\n|---|---|---|\n",
    );
    for r in catalog() {
        let light = if r.light_lacks.is_none() { "yes" } else { "no" };
        let _ = writeln!(s, "| [`{}`](#{}) | {} | {light} |", r.id, r.id, r.looks_for);
    }
    for r in catalog() {
        section(&mut s, r);
    }
    s
}

fn section(s: &mut String, r: &Rule) {
    let needs: Vec<String> = r.needs.iter().map(|n| format!("`{n}`")).collect();
    let light = match r.light_lacks {
        None => "yes".to_string(),
        Some(what) => format!("no, it lacks {what}"),
    };
    let _ = write!(
        s,
        "\n## {id}\n\n\
         Looks for {looks}.\n\n\
         - **Fires when**: {fires}.\n\
         - **Stays silent**, e.g.: {silent}.\n\
         - **Needs** the event {sets} {needs} (`iosleuth record --events {list}`).\n\
         - **From a light capture** (`record --light`): {light}.\n\
         - **Remedy** (`iosleuth try`): {remedy}.\n",
        id = r.id,
        looks = r.looks_for,
        fires = r.fires_when,
        silent = r.stays_silent,
        sets = if r.needs.len() == 1 { "set" } else { "sets" },
        needs = needs.join(" and "),
        list = r.needs.join(","),
        remedy = r
            .remedy
            .unwrap_or("none: the workaround is not a setting (it changes the application, the device or the machine's other work)"),
    );
}
