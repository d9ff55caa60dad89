//! The README stays a first page (issue 31: at most 400 lines; the rest
//! lives in docs/), and no page sends a reader to a file that is not
//! there: every relative link in README.md, CHANGELOG.md and docs/*.md
//! names an existing file, and a `#fragment` into a markdown file names
//! one of its headings, as GitHub makes their anchors.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const README_MAX_LINES: usize = 400;

#[test]
fn the_readme_is_at_most_400_lines() {
    let lines = std::fs::read_to_string("README.md")
        .unwrap()
        .lines()
        .count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move detail to docs/ and link it"
    );
}

#[test]
fn every_local_link_in_the_docs_resolves() {
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir("docs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text =
            std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        for target in links(&text) {
            checked += 1;
            if let Some(why) = unresolved(page, &target) {
                broken.push(format!("{}: ({target}) {why}", page.display()));
            }
        }
    }
    // The README alone links every page of docs/: far more than this.
    assert!(
        checked >= 20,
        "only {checked} links found: is the parser blind?"
    );
    assert!(
        broken.is_empty(),
        "broken links:\n  {}",
        broken.join("\n  ")
    );
}

/// Why `target`, linked from `page`, does not resolve; `None` when it does.
/// Links with a scheme (https:, mailto:) are not ours to check.
fn unresolved(page: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        page.to_path_buf()
    } else {
        page.parent().unwrap_or(Path::new("")).join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", file.display()));
    }
    let fragment = fragment.filter(|_| file.extension().is_some_and(|x| x == "md"))?;
    let text = std::fs::read_to_string(&file).ok()?;
    let anchors = anchors(&text);
    (!anchors.contains(fragment)).then(|| format!("{} has no heading #{fragment}", file.display()))
}

/// The targets of `[text](target)` and `![alt](target)` outside code
/// blocks and code spans.
fn links(text: &str) -> Vec<String> {
    let prose = prose_lines(text).join("\n");
    let mut out = Vec::new();
    // Code spans end within their paragraph.
    for paragraph in prose.split("\n\n") {
        let paragraph = without_code_spans(paragraph);
        let mut rest = paragraph.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            let target = after[..end].split_whitespace().next().unwrap_or_default();
            out.push(target.to_string());
            rest = &after[end..];
        }
    }
    out
}

/// The lines outside fenced code blocks.
fn prose_lines(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// The text between code spans; a last backtick without its pair is
/// literal, as markdown reads it.
fn without_code_spans(paragraph: &str) -> String {
    let parts: Vec<&str> = paragraph.split('`').collect();
    let mut out: String = parts.iter().step_by(2).copied().collect();
    if parts.len().is_multiple_of(2) {
        out.push_str(parts[parts.len() - 1]);
    }
    out
}

/// GitHub's anchors for a page's headings: lower case, letters, digits,
/// `-` and `_` kept, spaces made `-`, everything else dropped; a repeated
/// heading gets `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        out.insert(anchor);
    }
    out
}

#[test]
fn anchors_are_githubs() {
    let a = anchors(
        "## One page: `--format html`\n## 5. Diagnose\n## 5. Diagnose\n```\n# not a heading\n```\n",
    );
    let want: BTreeSet<String> = ["one-page---format-html", "5-diagnose", "5-diagnose-1"]
        .map(String::from)
        .into();
    assert_eq!(a, want);
    assert_eq!(
        links("see [a](a.md#x) and `[b](b.md)` and ![c](c.png)\n```\n[d](d.md)\n```\n`x\n[e](e.md)` [f](f.md \"t\")\n"),
        ["a.md#x", "c.png", "f.md"]
    );
}
